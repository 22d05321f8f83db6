"""Benchmark (seed 002): k logistic-regression fits over a covering design, and the exact aggregation.

For a block design with k = binom(t + c, c) kept sets of about 1000 rows
(5 features + label), it measures in one run:

* ours: ``gpuprivacy.oracle.evaluate`` of the optax logistic-regression
  oracle over all k kept sets (vmapped, chunked; steady state, the first
  compiling call reported separately);
* baseline 1: a Python loop calling the SAME oracle, jitted once, on each
  gathered subset (timed on ``--loop-subsets`` subsets and scaled to k);
* baseline 2: a Python loop of SciPy L-BFGS fits of the same objective
  (timed on ``--scipy-subsets`` subsets and scaled);
* aggregation: the exact order statistics F(0..C-1) for the pure-DP estimator
  on this block design and on sample-and-aggregate, against the oracle time.

Records ``uptime`` load with the numbers (the machine may be shared).

    python experiments/bench_blackbox_estimation.py                  # k = 10626 (t = 20, c = 4), n = 6000
    python experiments/bench_blackbox_estimation.py --json
    python experiments/bench_blackbox_estimation.py --quick          # k = 120 (t = 14, c = 2), n = 2000: a smoke run
    python experiments/bench_blackbox_estimation.py --gpu            # k = 53130 (t = 20, c = 5), n = 5000

Explicit ``--n``, ``--t``, ``--c``, ``--loop-subsets`` and ``--scipy-subsets`` override the mode's sizes.
The GPU size is 5x the default's k, not more: exact aggregation refuses block designs of more than 28
chunks (t + c), and building the design and its aggregation structure on the host grows with k * n.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

import gpuprivacy
from _timing import mode_sizes  # experiments/_timing.py (the script's folder is on sys.path)
from gpuprivacy import designs, oracle
from gpuprivacy.mechanisms import blackbox

FEATURES = 5
# Sizes per mode: rows, design (t, c), subsets timed by the jitted loop and by the SciPy loop (scaled to k).
MODES = {
    "default": dict(n=6000, t=20, c=4, loop_subsets=300, scipy_subsets=100),
    "quick": dict(n=2000, t=14, c=2, loop_subsets=50, scipy_subsets=20),
    "gpu": dict(n=5000, t=20, c=5, loop_subsets=300, scipy_subsets=100),
}


def _load():
    try:
        return os.getloadavg()
    except OSError:  # pragma: no cover
        return (float("nan"),) * 3


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, FEATURES))
    beta = np.linspace(-1.0, 1.0, FEATURES)
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.3 + x @ beta)))).astype(np.float64)
    return np.concatenate([x, y[:, None]], axis=1)


def _scipy_fit(rows, l2, coefficient):
    x = np.concatenate([np.ones((rows.shape[0], 1)), rows[:, :-1]], axis=1)
    y = rows[:, -1]

    def loss_and_grad(beta):
        margins = x @ beta
        loss = np.mean(np.logaddexp(0.0, margins) - y * margins) + 0.5 * l2 * beta @ beta
        grad = x.T @ (1 / (1 + np.exp(-margins)) - y) / x.shape[0] + l2 * beta
        return loss, grad

    return optimize.minimize(loss_and_grad, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B").x[coefficient]


def run(n, t, c, *, steps, loop_subsets, scipy_subsets, epsilon=1.0):
    data = _data(n)
    family = designs.block_design(n, t, c)
    k, kept = family.num_subsets, family.capacity
    oracle_fn = oracle.logistic_regression(1, steps=steps)
    load_before = _load()

    # Wait for the device before stopping the clock; the copy to the host (np.asarray) is not timed.
    start = time.perf_counter()
    values = jax.block_until_ready(oracle.evaluate(oracle_fn, data, family))
    first = time.perf_counter() - start
    start = time.perf_counter()
    values = jax.block_until_ready(oracle.evaluate(oracle_fn, data, family))
    ours = time.perf_counter() - start
    values = np.asarray(values)

    # Baseline 1: the same oracle, jitted once, called in a Python loop on gathered subsets (same canonical order).
    single = jax.jit(oracle_fn)
    order = np.lexsort(data.T[::-1])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    sorted_data = data[order]
    # family.subset(i): the kept rows of subset i, ascending (a row of designs.keep_matrix, without the k x n matrix).
    blocks = [sorted_data[np.sort(rank[family.subset(i)])] for i in range(min(k, loop_subsets))]
    valid = jnp.ones(kept, dtype=bool)
    single(jnp.asarray(blocks[0]), valid).block_until_ready()  # compile outside the timing
    start = time.perf_counter()
    loop_values = [float(single(jnp.asarray(b), valid)) for b in blocks]
    jit_loop = (time.perf_counter() - start) * k / len(blocks)
    np.testing.assert_allclose(loop_values, values[: len(blocks)], rtol=1e-9, atol=1e-12)

    # Baseline 2: SciPy L-BFGS on the same objective.
    start = time.perf_counter()
    scipy_values = [_scipy_fit(b, 1e-3, 1) for b in blocks[:scipy_subsets]]
    scipy_loop = (time.perf_counter() - start) * k / len(scipy_values)
    scipy_gap = float(np.max(np.abs(np.asarray(scipy_values) - values[: len(scipy_values)])))

    # Aggregation: exact F(0..C-1) for the pure-DP estimator (|Y| = 81, beta = 0.05) on this design and on S&A.
    grid = dict(lower=-2.0, upper=2.0, resolution=0.05)
    t_needed, cap = designs.required_t("pure", epsilon=epsilon, num_outputs=81, beta=0.05)
    indices, _ = blackbox.to_grid(values, **grid)
    aggregation = {}
    for name, fam, vals in [("block", family, indices),
                            ("sample_and_aggregate", designs.sample_and_aggregate(n, t), indices[: t + 1])]:
        plan = designs.aggregation_plan(fam, min(cap, t + 1))
        designs.robust_order_statistics(vals, fam, cap=plan.cap, plan=plan)  # compile / warm the cache
        start = time.perf_counter()
        designs.robust_order_statistics(vals, fam, cap=plan.cap, plan=plan)
        aggregation[name] = {"method": plan.method, "k": fam.num_subsets, "cap": plan.cap,
                             "seconds": time.perf_counter() - start}
    load_after = _load()
    return {
        "case": f"n={n} t={t} c={c} k={k} rows={kept} features={FEATURES} steps={steps}",
        "k": k, "rows_per_subset": kept, "ours_s": ours, "ours_first_call_s": first,
        "jit_loop_s": jit_loop, "jit_loop_scaled_from": len(blocks), "ratio_vs_jit_loop": jit_loop / ours,
        "ratio": jit_loop / ours,
        "scipy_loop_s": scipy_loop, "scipy_scaled_from": len(scipy_values), "ratio_vs_scipy": scipy_loop / ours,
        "scipy_max_abs_difference": scipy_gap, "aggregation": aggregation,
        "aggregation_fraction_block": aggregation["block"]["seconds"] / ours,
        "aggregation_fraction_sample_and_aggregate": aggregation["sample_and_aggregate"]["seconds"] / ours,
        "t_needed_at_epsilon_1": t_needed, "load_before": load_before, "load_after": load_after,
    }


def _describe(sizes):
    k = math.comb(sizes["t"] + sizes["c"], sizes["c"])
    return (f"n = {sizes['n']}, t = {sizes['t']}, c = {sizes['c']} (k = {k}); loops timed on "
            f"{sizes['loop_subsets']} (jitted) and {sizes['scipy_subsets']} (SciPy) subsets, scaled")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="GPU sizes: " + _describe(MODES["gpu"]))
    mode.add_argument("--quick", action="store_true", help="smallest sizes: " + _describe(MODES["quick"]))
    parser.add_argument("--n", type=int, default=None, help="default 6000 (--quick 2000, --gpu 5000)")
    parser.add_argument("--t", type=int, default=None, help="default 20 (--quick 14)")
    parser.add_argument("--c", type=int, default=None, help="default 4 (--quick 2, --gpu 5)")
    parser.add_argument("--steps", type=int, default=200, help="optax steps per fit (library default 200)")
    parser.add_argument("--loop-subsets", type=int, default=None, help="default 300 (--quick 50)")
    parser.add_argument("--scipy-subsets", type=int, default=None, help="default 100 (--quick 20)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    mode_name, sizes = mode_sizes(args, MODES)
    row = run(sizes["n"], sizes["t"], sizes["c"], steps=args.steps, loop_subsets=sizes["loop_subsets"],
              scipy_subsets=sizes["scipy_subsets"])
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "devices": [str(d) for d in jax.devices()], "jax": jax.__version__, "gpuprivacy": gpuprivacy.__version__,
            "python": platform.python_version(), "mode": mode_name, "sizes": sizes}
    row["targets"] = {"ratio_vs_jit_loop": 100.0 if jax.default_backend() == "gpu" else 3.0,
                      "aggregation_fraction": 0.10}
    if args.json:
        json.dump({"meta": meta, "results": [row]}, sys.stdout, indent=1)
        print()
        return
    print(f"# bench_blackbox_estimation  {meta['date']}  devices={meta['devices']}  jax {meta['jax']}  "
          f"cpus={meta['cpus']}  mode {mode_name}")
    print(f"load (1/5/15 min) before {row['load_before']}, after {row['load_after']}")
    print(row["case"])
    print(f"  ours (vmapped evaluate)   {row['ours_s']:9.3f} s   (first call {row['ours_first_call_s']:.2f} s)")
    print(f"  jitted single-fit loop    {row['jit_loop_s']:9.3f} s   ratio {row['ratio_vs_jit_loop']:6.1f}x  "
          f"(scaled from {row['jit_loop_scaled_from']})")
    print(f"  SciPy L-BFGS loop         {row['scipy_loop_s']:9.3f} s   ratio {row['ratio_vs_scipy']:6.1f}x  "
          f"(scaled from {row['scipy_scaled_from']}; max |diff| {row['scipy_max_abs_difference']:.2e})")
    for name, agg in row["aggregation"].items():
        print(f"  aggregation {name:22s} {agg['seconds']:9.4f} s  ({agg['method']}, k = {agg['k']}, C = {agg['cap']}) "
              f"= {agg['seconds'] / row['ours_s']:.2%} of the oracle time")


if __name__ == "__main__":
    main()
