"""Benchmark: the vmapped float64 quadrature for Gaussian RNM's pure epsilon vs the authors' method.

Evaluates eps_RNM (Lebensold, Precup & Balle, AISTATS 2024, Thm 8; spec 004 Sec 3.1) on a grid of
(sigma, d) points with ``gpuprivacy.accounting.gaussian_rnm_epsilon`` (one batched call), and
times the authors' method -- ``mpmath.quad`` over (-inf, inf) without breakpoints, at 50 digits,
per point (github jlebensold/pure-dp-gaussian-mech, utils.mpmath_mvn; spec 004 Sec 3.8) -- on a
random sample of the grid, scaled to the grid. Both are compared on the sample with an independent
60-digit reference (``mpmath.quad`` at 60 digits with breakpoints every third of the integrand's
width around its mode, located here with SciPy). Prints seconds per value, the speed ratio and the
largest relative disagreements, plus the machine, date, versions and load average.

    python experiments/bench_gaussian_selection.py             # 40 x 30 = 1200 grid points, 12 sampled
    python experiments/bench_gaussian_selection.py --quick     # 10 x 10 grid, 3 sampled (a smoke run)
    python experiments/bench_gaussian_selection.py --gpu       # 400 x 30 = 12000 grid points, 12 sampled
    python experiments/bench_gaussian_selection.py --json      # one JSON object on stdout

Explicit ``--num-sigma``, ``--num-d`` and ``--sampled`` override the mode's sizes. The authors' method and
the reference always run on the CPU, one sampled point at a time, whatever the mode.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time

import jax
import mpmath
import numpy as np
from scipy import optimize, special

import gpuprivacy
from _timing import mode_sizes  # experiments/_timing.py (the script's folder is on sys.path)
from gpuprivacy import accounting

SENSITIVITY, LOWER, UPPER = 1e-3, 0.0, 1.0
# Sizes per mode: grid points in sigma and in d (d is rounded and deduplicated), points timed with mpmath.
MODES = {
    "default": dict(num_sigma=40, num_d=30, sampled=12),
    "quick": dict(num_sigma=10, num_d=10, sampled=3),
    "gpu": dict(num_sigma=400, num_d=30, sampled=12),
}


def _grid(num_sigma: int, num_d: int):
    sigma = np.geomspace(0.05, 1.0, num_sigma)
    d = np.unique(np.round(np.geomspace(2, 4096, num_d)).astype(np.int64))
    return np.meshgrid(sigma, d, indexing="ij")


def _authors_epsilon(sigma: float, d: int, dps: int = 50) -> float:
    """The authors' evaluation: mp.quad over (-inf, inf), no breakpoints (spec 004 Sec 3.8)."""
    c = UPPER - LOWER
    with mpmath.workdps(dps):
        num = mpmath.quad(lambda z: mpmath.npdf(z) * mpmath.ncdf(z - (c - 2 * SENSITIVITY) / sigma) ** (d - 1),
                          [-mpmath.inf, mpmath.inf])
        den = mpmath.quad(lambda z: mpmath.npdf(z) * mpmath.ncdf(z - c / sigma) ** (d - 1), [-mpmath.inf, mpmath.inf])
        return float(mpmath.log(num) - mpmath.log(den))


def _reference_log_integral(shift: float, n: int, dps: int = 60):
    """log E_z[Phi(z - shift)^n] at `dps` digits, with breakpoints around the mode (located with SciPy)."""
    def log_f(z):
        return -0.5 * z * z + n * special.log_ndtr(z - shift)
    mode = optimize.minimize_scalar(lambda z: -log_f(z), bracket=(shift - 5.0, shift + 5.0)).x
    h = 1e-4
    curvature = -(log_f(mode + h) - 2 * log_f(mode) + log_f(mode - h)) / h**2
    width = 1.0 / math.sqrt(max(curvature, 1.0))
    points = sorted({mode + k * width / 3.0 for k in range(-45, 46)} | {mode - 25.0, mode + 25.0})
    with mpmath.workdps(dps):
        peak = mpmath.mpf(log_f(mode))

        def integrand(z):  # scaled by e^-peak so that mp.quad's absolute tolerance is relative
            return mpmath.exp(-z * z / 2 + n * mpmath.log(mpmath.ncdf(z - shift)) - peak)

        value = mpmath.quad(integrand, [-mpmath.inf] + points + [mpmath.inf], method="gauss-legendre")
        return mpmath.log(value) + peak - mpmath.log(2 * mpmath.pi) / 2


def _reference_epsilon(sigma: float, d: int) -> mpmath.mpf:
    c = UPPER - LOWER
    with mpmath.workdps(60):
        return (_reference_log_integral((c - 2 * SENSITIVITY) / sigma, d - 1)
                - _reference_log_integral(c / sigma, d - 1))


def _environment() -> dict:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        sha = None
    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": platform.machine(), "processor": platform.processor(), "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "load_average": os.getloadavg(), "gpuprivacy": gpuprivacy.__version__,
            "jax": jax.__version__, "mpmath": mpmath.__version__, "backend": jax.default_backend(),
            "device": str(jax.devices()[0].device_kind), "git_sha": sha}


def run(num_sigma: int = 40, num_d: int = 30, num_sampled: int = 12, repeats: int = 3, seed: int = 0) -> dict:
    load_before = os.getloadavg()
    sigma, d = _grid(num_sigma, num_d)
    size = sigma.size
    start = time.perf_counter()
    ours = accounting.gaussian_rnm_epsilon(sigma, d, SENSITIVITY, LOWER, UPPER)
    first_call = time.perf_counter() - start
    steady = []
    for _ in range(repeats):
        start = time.perf_counter()
        again = accounting.gaussian_rnm_epsilon(sigma, d, SENSITIVITY, LOWER, UPPER)
        steady.append(time.perf_counter() - start)
    np.testing.assert_array_equal(ours, again)
    ours_per_value = min(steady) / size

    rng = np.random.default_rng(seed)
    sample = rng.choice(size, size=min(num_sampled, size), replace=False)
    authors, authors_time, references = [], 0.0, []
    for i in sample:
        s, k = float(sigma.flat[i]), int(d.flat[i])
        start = time.perf_counter()
        authors.append(_authors_epsilon(s, k))
        authors_time += time.perf_counter() - start
        references.append(_reference_epsilon(s, k))
    authors_per_value = authors_time / len(sample)
    with mpmath.workdps(60):
        ours_rel = [float(abs(mpmath.mpf(float(ours.flat[i])) - r) / r) for i, r in zip(sample, references)]
        authors_rel = [float(abs(mpmath.mpf(a) - r) / r) for a, r in zip(authors, references)]
        below = [bool(mpmath.mpf(float(ours.flat[i])) < r) for i, r in zip(sample, references)]
    return {
        "grid": {"num_points": int(size), "sigma": [float(sigma.min()), float(sigma.max())],
                 "d": [int(d.min()), int(d.max())], "sensitivity": SENSITIVITY, "range": [LOWER, UPPER]},
        "ours_seconds_per_value": ours_per_value, "ours_total_seconds": min(steady),
        "ours_first_call_seconds": first_call,
        "authors_seconds_per_value": authors_per_value, "authors_sampled_points": len(sample),
        "authors_scaled_grid_seconds": authors_per_value * size,
        "ratio": authors_per_value / ours_per_value,
        "ours_max_relative_disagreement": max(ours_rel),
        "ours_values_below_reference": int(sum(below)),
        "authors_max_relative_disagreement": max(authors_rel),
        "sampled": [{"sigma": float(sigma.flat[i]), "d": int(d.flat[i]), "ours": float(ours.flat[i]),
                     "authors_dps50": a, "reference_dps60": float(r)}
                    for i, a, r in zip(sample, authors, references)],
        "environment": {**_environment(), "load_average_before": load_before},
    }


def _describe(sizes):
    return (f"{sizes['num_sigma']} x {sizes['num_d']} (sigma, d) grid, {sizes['sampled']} points timed with the "
            "authors' method")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="GPU sizes: " + _describe(MODES["gpu"]))
    mode.add_argument("--quick", action="store_true", help="smallest sizes: " + _describe(MODES["quick"]))
    parser.add_argument("--num-sigma", type=int, default=None, help="default 40 (--quick 10, --gpu 400)")
    parser.add_argument("--num-d", type=int, default=None, help="default 30 (--quick 10)")
    parser.add_argument("--sampled", type=int, default=None,
                        help="grid points timed with the authors' method (default 12, --quick 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    mode_name, sizes = mode_sizes(args, MODES)
    result = run(sizes["num_sigma"], sizes["num_d"], sizes["sampled"])
    result["mode"] = mode_name
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    env = result["environment"]
    print(f"{env['date']}  {env['machine']} ({env['cpu_count']} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in env['load_average_before'])} before, "
          f"{', '.join(f'{x:.2f}' for x in env['load_average'])} after)  jax {env['jax']} on {env['backend']} "
          f"({env['device']})  mpmath {env['mpmath']}  git {env['git_sha']}  mode {mode_name}")
    g = result["grid"]
    print(f"grid: {g['num_points']} (sigma, d) points, sigma in {g['sigma']}, d in {g['d']}, "
          f"Delta = {g['sensitivity']}")
    print(f"ours (vmapped float64 quadrature): {result['ours_seconds_per_value'] * 1e3:.3f} ms per value "
          f"({result['ours_total_seconds']:.2f} s for the grid; first call incl. compilation "
          f"{result['ours_first_call_seconds']:.2f} s)")
    print(f"authors (mp.quad over (-inf, inf), 50 digits): {result['authors_seconds_per_value']:.3f} s per value "
          f"on {result['authors_sampled_points']} sampled points (scaled to the grid: "
          f"{result['authors_scaled_grid_seconds'] / 3600:.2f} h)")
    print(f"ratio: {result['ratio']:.0f}x per value (target >= 1000x)")
    print(f"max relative disagreement with the 60-digit reference on the sample: ours "
          f"{result['ours_max_relative_disagreement']:.2e} (target <= 1e-9; {result['ours_values_below_reference']} "
          f"of ours below it), authors {result['authors_max_relative_disagreement']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
