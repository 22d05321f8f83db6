"""Benchmark: batched ``gpuprivacy.oracle.evaluate`` vs a Python loop over subsets calling NumPy.

Prints, for each case, our time, the baseline's time measured in the same
run, and the ratio. Our time is the steady state (the first, compiling call
is reported separately); the subset family is built before timing and shared
by both sides.

    python experiments/bench_oracle.py            # the CPU targets of issue 2
    python experiments/bench_oracle.py --gpu      # adds k = 10^6 (run on a GPU)
    python experiments/bench_oracle.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time

import jax
import numpy as np

import gpuprivacy
from gpuprivacy import oracle, subsets
from _timing import best_of  # experiments/_timing.py (the script's folder is on sys.path)

CASES = [  # (n, k, subset size, target ratio median, target ratio mean)
    (100, 10**5, 90, 20.0, 50.0),
    (1000, 10**4, 900, 5.0, 5.0),
]
GPU_CASES = [(100, 10**6, 90, 100.0, 100.0), (1000, 10**6, 900, 100.0, 100.0)]


def run_case(n, k, size, *, repeats=3, loop_limit=None):
    rng = np.random.default_rng(0)
    data = rng.standard_normal(n)
    family = subsets.random_subsets(jax.random.key(0), n, size, k)
    kept = np.stack([np.flatnonzero(m) for m in family.keep_masks()]) if k <= 10**5 else None
    rows = []
    for name, ours, numpy_fn in [("median", oracle.median, np.median), ("mean", oracle.mean, np.mean)]:
        start = time.perf_counter()
        values = np.asarray(oracle.evaluate(ours, data, family))
        first = time.perf_counter() - start
        steady = best_of(lambda: oracle.evaluate(ours, data, family), repeats)
        # The baseline: a plain Python loop over subsets (timed on up to loop_limit subsets and scaled).
        limit = k if loop_limit is None else min(k, loop_limit)
        if kept is None:
            kept_part = np.stack([family.subset(i) for i in range(limit)])
        else:
            kept_part = kept[:limit]
        start = time.perf_counter()
        reference = [numpy_fn(data[idx]) for idx in kept_part]
        loop = (time.perf_counter() - start) * (k / limit)
        np.testing.assert_allclose(values[:limit], reference, rtol=1e-12, atol=1e-15)
        rows.append({"case": f"n={n} k={k} s={size}", "oracle": name, "ours_s": steady, "ours_first_call_s": first,
                     "numpy_loop_s": loop, "loop_scaled_from": limit, "ratio": loop / steady})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true", help="also run the k = 10^6 cases")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    cases = [(n, k, s) for n, k, s, *_ in CASES]
    targets = {f"n={n} k={k} s={s}": (tm, tmean) for n, k, s, tm, tmean in CASES + GPU_CASES}
    if args.gpu:
        cases += [(n, k, s) for n, k, s, *_ in GPU_CASES]
    results = []
    for n, k, s in cases:
        results += run_case(n, k, s, repeats=args.repeats, loop_limit=10**5 if k > 10**5 else None)
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "processor": platform.processor(),
            "devices": [str(d) for d in jax.devices()], "jax": jax.__version__, "gpuprivacy": gpuprivacy.__version__,
            "python": platform.python_version()}
    for row in results:
        t_median, t_mean = targets[row["case"]]
        row["target"] = t_median if row["oracle"] == "median" else t_mean
        row["meets_target"] = row["ratio"] >= row["target"]
    if args.json:
        json.dump({"meta": meta, "results": results}, sys.stdout, indent=1)
        print()
        return
    print(f"# bench_oracle  {meta['date']}  devices={meta['devices']}  jax {meta['jax']}")
    print(f"{'case':24s} {'oracle':7s} {'ours (s)':>10s} {'1st call':>9s} {'numpy loop':>11s} {'ratio':>8s} "
          f"{'target':>7s}")
    for row in results:
        print(f"{row['case']:24s} {row['oracle']:7s} {row['ours_s']:10.4f} {row['ours_first_call_s']:9.3f} "
              f"{row['numpy_loop_s']:11.4f} {row['ratio']:7.1f}x {row['target']:6.0f}x"
              f"{'' if row['meets_target'] else '  (missed)'}")


if __name__ == "__main__":
    main()
