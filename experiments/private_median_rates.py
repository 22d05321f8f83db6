"""Seed 003: error quantiles of the private median vs n and epsilon (spec 003 Sec. 3.3), a CPU-sized grid.

The same measurement as ``gpuprivacy reproduce tzamos2020-private-median`` (rates part), on a grid between quick and full:
n in {1e2, 1e3, 1e4, 1e5}, epsilon in {0.1, 0.25, 0.5, 1}, four admissible distributions with median 0
(L = 0.15, r = 1, R = 10, C = 6). Reports the 90% quantile of |estimate - median|, the fast-path and
overflow rates. Public API only.

    python experiments/private_median_rates.py [--trials 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import jax
import numpy as np

from gpuprivacy.mechanisms import median

MODEL = dict(min_density=0.15, radius=1.0, median_bound=10.0, constant=6.0)


def draw(rng, name, shape):
    if name == "uniform":
        return rng.uniform(-1, 1, shape)
    if name == "normal":
        return rng.standard_normal(shape)
    if name == "cauchy":
        return rng.standard_cauchy(shape)
    # Prop. 3.8's D1: atoms at +-(r + R) with mass 1/2 - L r each, and 2 L r Unif[-r, r].
    atoms = np.where(rng.random(shape) < 0.5, -11.0, 11.0)
    return np.where(rng.random(shape) < 0.3, rng.uniform(-1, 1, shape), atoms)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--ns", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    rows = []
    for n in args.ns:
        trials = min(args.trials, max(20, 10_000_000 // n))
        for eps in args.epsilons:
            for di, name in enumerate(("uniform", "normal", "cauchy", "mixture")):
                data = draw(np.random.default_rng([n, di]), name, (trials, n))
                out = median.private_median_trials(jax.random.key(di), data, epsilon=eps, **MODEL)
                rows.append(dict(distribution=name, n=n, epsilon=eps, trials=trials,
                                 error_q90=float(np.quantile(np.abs(out.values), 0.9)),
                                 fast_path_rate=out.fast_path_rate, overflow_rate=out.overflow_rate))
    if args.json:
        json.dump({"uptime": load, "model": MODEL, "rows": rows}, sys.stdout, indent=1)
        print()
        return
    print(f"# load: {load}; model {MODEL}")
    print("90% error quantile (fast-path rate) by n (rows) and distribution x epsilon (columns)")
    for n in args.ns:
        cells = [f"{r['distribution'][:4]}@{r['epsilon']}: {r['error_q90']:.3g} ({r['fast_path_rate']:.2f})"
                 for r in rows if r["n"] == n]
        print(f"n={n:>7d}  " + "  ".join(cells))
    print(f"overflow rate over all trials: {np.mean([r['overflow_rate'] for r in rows]):.4f}")


if __name__ == "__main__":
    main()
