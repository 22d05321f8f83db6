"""Benchmark (seed 001): batched piecewise-Laplace median releases vs a per-dataset NumPy loop.

Case 1: 10^4 datasets of n = 10^3 (closed-form bounds + Algorithm 1), our
``jax.vmap``-ed :func:`piecewise_laplace_median` vs a Python loop over the
datasets running the same algorithm in NumPy (sort, bounds, log-weights,
inverse-CDF piece choice, truncated exponential). The loop is timed on a part of the
datasets and scaled (stated in the output).
Case 2: one release at n = 10^6 vs the time of ``np.sort`` on the same data.

Each time is the best of ``--repeats`` steady-state runs (the first,
compiling call is reported separately). ``uptime`` load is printed with the
numbers: the machine may be shared.

    python experiments/bench_piecewise_laplace.py           # CPU
    python experiments/bench_piecewise_laplace.py --quick   # smallest sizes (a smoke run, under ~20 s on a CPU)
    python experiments/bench_piecewise_laplace.py --gpu     # 10^5 datasets of n = 10^3, one release at n = 10^7
    python experiments/bench_piecewise_laplace.py --json    # one JSON object on stdout

Explicit ``--datasets``, ``--n``, ``--single-n`` and ``--loop-limit`` override the mode's sizes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

import gpuprivacy
from gpuprivacy.mechanisms import instance_optimal as io
from _timing import best_of, load_average, mode_sizes  # experiments/_timing.py (the script's folder is on sys.path)

LOWER, UPPER, EPSILON = 0.0, 1.0, 1.0
# Sizes per mode: batched datasets, n per dataset, n of the single release, datasets the NumPy loop is timed on.
MODES = {
    "default": dict(datasets=10**4, n=10**3, single_n=10**6, loop_limit=2000),
    "quick": dict(datasets=10**3, n=10**3, single_n=10**5, loop_limit=500),
    "gpu": dict(datasets=10**5, n=10**3, single_n=10**7, loop_limit=2000),
}


def numpy_plm_median(rng, x, epsilon, lower, upper):
    """The same mechanism in NumPy, one dataset (the baseline)."""
    x = np.sort(x)
    n = x.shape[0]
    r = (n + 1) // 2
    up = np.concatenate([x[r - 1:], np.full(n + 2 - (n - r + 1), upper)])[: n + 2]
    low = np.concatenate([x[:r][::-1], np.full(n + 2 - r, lower)])[: n + 2]
    up[-1], low[-1] = upper, lower
    a = epsilon / 2
    levels = np.arange(1, n + 2)
    with np.errstate(divide="ignore"):
        lw = np.concatenate([-levels * a + np.log(np.diff(up)), -levels * a + np.log(-np.diff(low))])
    weights = np.cumsum(np.exp(lw - lw.max()))
    j = min(int(np.searchsorted(weights, rng.random() * weights[-1], side="right")), lw.shape[0] - 1)
    length = np.concatenate([np.diff(up), -np.diff(low)])[j]
    start = np.concatenate([up[:-1], low[:-1]])[j]
    sign = 1.0 if j < n + 1 else -1.0
    z = -length / a * np.log1p(rng.random() * np.expm1(-a))
    return start + sign * min(max(z, 0.0), length)


def _uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return os.getloadavg().__repr__()


def case_batched(num_datasets, n, repeats, loop_limit):
    rng = np.random.default_rng(0)
    data = jnp.asarray(rng.uniform(LOWER, UPPER, (num_datasets, n)))
    keys = jax.random.split(jax.random.key(0), num_datasets)
    release = jax.jit(jax.vmap(lambda k, x: io.piecewise_laplace_median(k, x, epsilon=EPSILON, lower=LOWER,
                                                                        upper=UPPER).value))
    start = time.perf_counter()
    values = np.asarray(release(keys, data))
    first = time.perf_counter() - start
    ours = best_of(lambda: release(keys, data), repeats)
    host = np.asarray(data)
    limit = min(num_datasets, loop_limit)
    start = time.perf_counter()
    baseline_values = [numpy_plm_median(rng, host[i], EPSILON, LOWER, UPPER) for i in range(limit)]
    baseline = (time.perf_counter() - start) * num_datasets / limit
    # Sanity: both release near the medians (n = 1000, eps = 1: errors ~ 1e-3).
    med = np.median(host[:limit], axis=1)
    return {"case": f"{num_datasets} datasets x n={n} median (bounds + Alg 1)", "ours_s": ours, "first_call_s": first,
            "numpy_loop_s": baseline, "loop_timed_on": limit, "ratio_numpy_over_ours": baseline / ours,
            "ratio": baseline / ours,
            "ours_mean_abs_err": float(np.mean(np.abs(values[:limit] - med))),
            "numpy_mean_abs_err": float(np.mean(np.abs(np.asarray(baseline_values) - med)))}


def case_single(n, repeats):
    rng = np.random.default_rng(1)
    host = rng.uniform(LOWER, UPPER, n)
    data = jnp.asarray(host)
    release = jax.jit(lambda k, x: io.piecewise_laplace_median(k, x, epsilon=EPSILON, lower=LOWER, upper=UPPER).value)
    key = jax.random.key(1)
    start = time.perf_counter()
    jax.block_until_ready(release(key, data))
    first = time.perf_counter() - start
    ours = best_of(lambda: release(key, data), repeats)
    sort_np = min(_timed(lambda: np.sort(host)) for _ in range(repeats))
    sort_jax = best_of(lambda: jnp.sort(data), repeats)
    return {"case": f"single release n={n}", "ours_s": ours, "first_call_s": first, "np_sort_s": sort_np,
            "jnp_sort_s": sort_jax, "ratio_ours_over_np_sort": ours / sort_np,
            "ratio_ours_over_jnp_sort": ours / sort_jax}


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _describe(sizes):
    return (f"{sizes['datasets']} datasets of n = {sizes['n']} (NumPy loop timed on {sizes['loop_limit']}, scaled), "
            f"one release at n = {sizes['single_n']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="GPU sizes: " + _describe(MODES["gpu"]))
    mode.add_argument("--quick", action="store_true", help="smallest sizes: " + _describe(MODES["quick"]))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", type=int, default=None, help="default 10^4 (--quick 10^3, --gpu 10^5)")
    parser.add_argument("--n", type=int, default=None, help="rows per dataset, default 10^3")
    parser.add_argument("--single-n", type=int, default=None, help="default 10^6 (--quick 10^5, --gpu 10^7)")
    parser.add_argument("--loop-limit", type=int, default=None,
                        help="datasets the NumPy loop is timed on, scaled to all (default 2000, --quick 500)")
    args = parser.parse_args(argv)
    mode_name, sizes = mode_sizes(args, MODES)
    load_before, loadavg_before = _uptime(), load_average()
    results = [case_batched(sizes["datasets"], sizes["n"], args.repeats, sizes["loop_limit"]),
               case_single(sizes["single_n"], args.repeats)]
    payload = {"results": results, "uptime_before": load_before, "uptime_after": _uptime(),
               "load_before": loadavg_before, "load_after": load_average(),
               "date": datetime.datetime.now().isoformat(timespec="seconds"), "mode": mode_name, "sizes": sizes,
               "device": jax.devices()[0].device_kind, "devices": [str(d) for d in jax.devices()],
               "backend": jax.default_backend(), "jax": jax.__version__,
               "gpuprivacy": gpuprivacy.__version__, "platform": platform.platform(),
               "cpu_count": os.cpu_count()}
    if args.json:
        print(json.dumps(payload, indent=1))
        return
    print(f"# bench_piecewise_laplace  {payload['date']}  mode {mode_name}")
    print(f"device: {payload['device']} ({payload['backend']}), jax {payload['jax']}")
    print(f"load before: {load_before}")
    for r in results:
        print(r["case"])
        for k, v in r.items():
            if k != "case":
                print(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}")
    print(f"load after: {payload['uptime_after']}")


if __name__ == "__main__":
    main()
