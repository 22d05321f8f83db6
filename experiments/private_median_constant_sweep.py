"""Seed 003: accuracy, fast-path and overflow rates of the private median against the constant C (spec 003 Sec. 5.4).

Privacy holds for every C > 0; the accuracy theorems need C > 104.31 (Lemma B.3). Smaller C shrinks the
Laplace scale 12C/(L n eps) but makes more data sets atypical (larger K = floor(Lnr/(2C))), which sends
more trials off the certified fast path. This sweep measures that trade-off with the public API.

    python experiments/private_median_constant_sweep.py [--n 10000] [--trials 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import jax
import numpy as np

from gpuprivacy.mechanisms import median

DISTRIBUTIONS = {
    "uniform": lambda rng, shape: rng.uniform(-1, 1, shape),
    "normal": lambda rng, shape: rng.standard_normal(shape),
    "cauchy": lambda rng, shape: rng.standard_cauchy(shape),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--constants", type=float, nargs="+", default=[1.0, 2.0, 6.0, 20.0, 105.0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    base = dict(epsilon=1.0, min_density=0.15, radius=1.0, median_bound=10.0)
    rows = []
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    for di, (name, draw) in enumerate(DISTRIBUTIONS.items()):
        data = draw(np.random.default_rng(di), (args.trials, args.n))
        nonprivate = np.quantile(np.abs(np.sort(data, axis=1)[:, (args.n + 1) // 2 - 1]), 0.9)
        for constant in args.constants:
            start = time.perf_counter()
            out = median.private_median_trials(jax.random.key(di), data, **base, constant=constant)
            rows.append(dict(distribution=name, n=args.n, constant=constant,
                             error_q90=float(np.quantile(np.abs(out.values), 0.9)),
                             nonprivate_error_q90=float(nonprivate), fast_path_rate=out.fast_path_rate,
                             overflow_rate=out.overflow_rate, mean_rows=float(np.mean(out.nonprivate_num_rows)),
                             seconds=time.perf_counter() - start))
    if args.json:
        json.dump({"uptime": load, "rows": rows}, sys.stdout, indent=1)
        print()
        return
    print(f"# load: {load}")
    print(f"{'distribution':12s} {'C':>6s} {'q90 error':>10s} {'non-private':>11s} {'fast path':>9s} {'overflow':>8s} "
          f"{'rows':>6s} {'s (incl. compile)':>17s}")
    for r in rows:
        print(f"{r['distribution']:12s} {r['constant']:6.1f} {r['error_q90']:10.4f} {r['nonprivate_error_q90']:11.4f} "
              f"{r['fast_path_rate']:9.3f} {r['overflow_rate']:8.3f} {r['mean_rows']:6.2f} {r['seconds']:17.2f}")


if __name__ == "__main__":
    main()
