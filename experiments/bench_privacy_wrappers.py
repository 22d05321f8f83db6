"""Benchmark for seed 000: oracle evaluations per second over the full power set, and one Sens-o-Matic release.

For n = 20 and 24 (all 2**n subsets, the layout the wrappers use in regime A)
it prints our steady-state time of :func:`gpuprivacy.oracle.evaluate_powerset` (the compiling call is reported separately),
a Python loop over subsets calling NumPy measured in the same run (timed on
the first ``--loop-limit`` subsets and scaled, since a loop over 1.7e7
subsets takes minutes), and the ratio; then the whole Sens-o-Matic release
at n = 20 (evaluation + sweeps + sampling). It records ``uptime`` load.

    python experiments/bench_privacy_wrappers.py               # CPU targets of issue 6 (n = 20: >= 50x mean, >= 10x median)
    python experiments/bench_privacy_wrappers.py --gpu         # adds n = 30 (run on a GPU)
    python experiments/bench_privacy_wrappers.py --json        # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import numpy as np

import gpuprivacy
from gpuprivacy import oracle
from gpuprivacy.mechanisms import wrappers
from _timing import best_of  # experiments/_timing.py (the script's folder is on sys.path)

TARGETS = {"mean": 50.0, "median": 10.0}


def _loop(data, n, numpy_fn, limit):
    """Python loop over bitmasks 0..limit-1: gather the kept rows, call NumPy (empty subset: NaN)."""
    bits = 1 << np.arange(n)
    start = time.perf_counter()
    out = np.empty(limit)
    for mask in range(limit):
        rows = data[(mask & bits) != 0]
        out[mask] = numpy_fn(rows) if rows.size else np.nan
    return time.perf_counter() - start, out


def run_case(n, *, repeats=3, loop_limit=200_000):
    data = np.random.default_rng(0).standard_normal(n)
    rows = []
    # Two block capacities: the wrappers' public default (n private under add/remove neighbours, so the block
    # must not reveal it) and capacity = n (n public, e.g. swap neighbours): less padding per subset.
    for name, ours, numpy_fn in [("mean", oracle.mean, np.mean), ("median", oracle.median, np.median)]:
        limit = min(2**n, loop_limit)
        # Masks index canonical (sorted) positions, so the loop runs on the sorted data: same subsets, same values.
        loop_seconds, loop_values = _loop(np.sort(data), n, numpy_fn, limit)
        loop_total = loop_seconds * 2**n / limit
        for capacity in (None, n):
            # max_queries=None: this benchmark evaluates the whole power set on purpose (2**30 at n = 30 is above
            # the default budget of 2**27); the memory check of evaluate_powerset still applies.
            run = lambda: oracle.evaluate_powerset(ours, data, capacity=capacity, max_queries=None)  # noqa: E731
            start = time.perf_counter()
            values = jax.block_until_ready(run())
            first = time.perf_counter() - start
            # Compare on the first `limit` values only, sliced on the device: at n = 30 the whole result is 8 GiB.
            head = np.asarray(values[:limit])
            del values  # free the 2**n result before the timed calls
            steady = best_of(run, repeats)
            np.testing.assert_allclose(head, loop_values, rtol=1e-9, atol=1e-12)  # same numbers
            rows.append(dict(case=f"power set n={n}", oracle=name, subsets=2**n,
                             capacity="default (public, 32)" if capacity is None else f"n = {n} (n public)",
                             ours_seconds=steady, ours_first_call_seconds=first, ours_evals_per_second=2**n / steady,
                             loop_seconds=loop_total, loop_measured_subsets=limit,
                             loop_evals_per_second=2**n / loop_total, ratio=loop_total / steady,
                             target_ratio=TARGETS[name] if n == 20 else None))
    return rows


def run_release(n=20, repeats=3):
    data = np.random.default_rng(1).uniform(size=n)
    params = dict(oracle_fn=wrappers.average_oracle(), grid=np.linspace(0, 1, 101), epsilon=1.0, beta=0.05)
    start = time.perf_counter()
    out = wrappers.sens_o_matic(jax.random.key(0), data, **params)
    jax.block_until_ready(out.value)
    first = time.perf_counter() - start
    keys = iter(jax.random.split(jax.random.key(1), repeats))
    steady = best_of(lambda: wrappers.sens_o_matic(next(keys), data, **params).value, repeats)
    return dict(case=f"sens_o_matic release n={n}", queries=int(out.info.nonprivate_num_queries),
                ours_seconds=steady, ours_first_call_seconds=first)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="also run n = 30 (needs an accelerator)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--loop-limit", type=int, default=200_000, help="subsets timed in the Python loop")
    parser.add_argument("--cpu-cores", action="store_true",
                        help="one JAX CPU device per core (gpuprivacy.use_cpu_cores): the engine splits over them")
    args = parser.parse_args(argv)
    if args.cpu_cores:
        gpuprivacy.use_cpu_cores()
    sizes = [20, 24] + ([30] if args.gpu else [])
    rows = [row for n in sizes for row in run_case(n, loop_limit=args.loop_limit)]
    release = run_release()
    load = os.getloadavg()
    result = dict(benchmark="privacy_wrappers", gpuprivacy=gpuprivacy.__version__, jax=jax.__version__,
                  device=jax.devices()[0].device_kind, devices=jax.device_count(), platform=platform.platform(), cpu_count=os.cpu_count(),
                  load_average=load, rows=rows, release=release)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"device {result['device']}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'case':18} {'oracle':7} {'capacity':21} {'ours s':>9} {'evals/s':>10} {'loop s':>9} {'ratio':>7} "
          f"{'target':>6}")
    for r in rows:
        target = "-" if r["target_ratio"] is None else f"{r['target_ratio']:g}x"
        print(f"{r['case']:18} {r['oracle']:7} {r['capacity']:21} {r['ours_seconds']:9.3f} "
              f"{r['ours_evals_per_second']:10.3g} "
              f"{r['loop_seconds']:9.2f} {r['ratio']:6.1f}x {target:>6}")
    print(f"{release['case']}: {release['ours_seconds']:.3f} s steady ({release['queries']} queries), "
          f"first call {release['ours_first_call_seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
