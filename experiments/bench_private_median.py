"""Benchmark: the optimal private median (seed 003) batched vs a per-trial NumPy loop, and at n = 10^6.

Case 1 (issue 8): 10^3 trials at n = 10^4 (standard normal data, L = 0.24, r = 1, R = 10, C = 6, eps = 1)
with :func:`gpuprivacy.mechanisms.median.private_median_trials` vs a per-trial NumPy loop doing the
same work for each trial: sort, the certified fast-path check (H membership and the dominance
certificate of spec 003 Sec. 2.6.6, integer lattice), and the flattened-Laplace draw. Every trial of
this data is certified (checked), so the loop never needs the full path.

Case 2: one release at n = 10^6 vs ``np.sort`` of the same data (target <= 3x) and vs the
exponential-mechanism median on the same data (OpenDP is not installed here; the issue allows this).

Our times are steady state (best of ``--repeats``); first (compiling) calls are reported separately.
The machine load (``uptime``) is recorded with the numbers.

    python experiments/bench_private_median.py            # CPU sizes of issue 8
    python experiments/bench_private_median.py --quick    # smallest sizes (a smoke run, under ~20 s on a CPU)
    python experiments/bench_private_median.py --gpu      # 10^4 trials (loop timed on 1000, scaled), n = 10^7
    python experiments/bench_private_median.py --json     # one JSON object on stdout

Explicit ``--trials``, ``--n``, ``--large-n`` and ``--loop-limit`` override the mode's sizes.
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
import numpy as np

import gpuprivacy
from gpuprivacy.mechanisms import median
from _timing import best_of, load_average, mode_sizes  # experiments/_timing.py (the script's folder is on sys.path)

PARAMS = dict(epsilon=1.0, min_density=0.24, radius=1.0, median_bound=10.0, constant=6.0)
# Sizes per mode: trials, n per trial, n of the single release, trials the NumPy loop is timed on (None: all).
MODES = {
    "default": dict(trials=1000, n=10_000, large_n=1_000_000, loop_limit=None),
    "quick": dict(trials=100, n=10_000, large_n=100_000, loop_limit=None),
    "gpu": dict(trials=10_000, n=10_000, large_n=10_000_000, loop_limit=1000),
}


def numpy_release(rng, x, cfg):
    """One release on the certified fast path in NumPy (sort, lattice certificate, Algorithm 2 draw)."""
    s = np.sort(np.round(np.clip(x / cfg.unit, -cfg.clip_bound, cfg.clip_bound)).astype(np.int64))
    l, K, Q, xi = cfg.median_index, cfg.num_windows, cfg.grid_resolution, cfg.xi_bound
    m = s[l - 1]
    p, q = np.searchsorted(s, m, "left"), np.searchsorted(s, m, "right")
    j = np.arange(2, K + 2)
    ok = abs(m) <= xi and np.all(s[np.minimum(p + j - 1, len(s) - 1)] <= m + (j - 1) * Q) and np.all(
        s[np.maximum(q - j, 0)] >= m - (j - 1) * Q) and p + K < len(s) and q - K - 1 >= 0
    k = np.arange(1, math.ceil(cfg.cap / 2))
    hi = np.minimum(np.where(l + k - 1 < len(s), s[np.minimum(l + k - 1, len(s) - 1)], xi), xi)
    lo = np.maximum(np.where(l - k - 1 >= 0, s[np.maximum(l - k - 1, 0)], -xi), -xi)
    ok = ok and np.all(hi - m <= 6 * k * Q) and np.all(m - lo <= 6 * k * Q)
    if not ok:
        raise RuntimeError("benchmark data must be certified (typical)")
    centre, lam, cap_e = m * cfg.unit, 1 / cfg.scale, cfg.epsilon * cfg.cap / 4
    flat, support = 3 * cfg.constant * cfg.radius, cfg.support
    logits = np.array([np.log(max(centre - flat + support, 1e-300)) - cap_e,
                       np.log(2 / lam) + np.log(-np.expm1(-cap_e)), np.log(max(support - centre - flat, 1e-300)) - cap_e])
    piece = np.argmax(logits + rng.gumbel(size=3))
    u = rng.random()
    if piece == 1:
        return centre + rng.choice([-1.0, 1.0]) * (-np.log1p(u * np.expm1(-cap_e)) / lam)
    if piece == 0:
        return -support + u * (centre - flat + support)
    return centre + flat + u * (support - centre - flat)


def case_trials(trials, n, repeats, loop_limit=None):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((trials, n))
    cfg = median.median_parameters(n, **PARAMS)
    key = jax.random.key(0)
    start = time.perf_counter()
    out = median.private_median_trials(key, data, **PARAMS)
    first = time.perf_counter() - start
    steady = best_of(lambda: median.private_median_trials(key, data, **PARAMS).values, repeats)
    limit = trials if loop_limit is None else min(trials, loop_limit)
    start = time.perf_counter()
    loop_rng = np.random.default_rng(1)
    reference = [numpy_release(loop_rng, x, cfg) for x in data[:limit]]
    loop = (time.perf_counter() - start) * trials / limit  # timed on the first `limit` trials, scaled
    return {"case": f"{trials} trials, n={n}", "ours_s": steady, "ours_first_call_s": first, "numpy_loop_s": loop,
            "loop_timed_on": limit, "ratio": loop / steady, "fast_path_rate": out.fast_path_rate,
            "overflow_rate": out.overflow_rate,
            "error_q90_ours": float(np.quantile(np.abs(out.values), 0.9)),
            "error_q90_numpy": float(np.quantile(np.abs(reference), 0.9)), "target": 1.0}


def case_large(n, repeats):
    rng = np.random.default_rng(2)
    data = rng.standard_normal(n)
    key = jax.random.key(1)
    start = time.perf_counter()
    out = median.private_median(key, data, **PARAMS)
    first = time.perf_counter() - start
    ours = best_of(lambda: median.private_median(key, data, **PARAMS).value, repeats)
    sort = best_of(lambda: np.sort(data), repeats)
    median.exponential_mechanism_median(key, data, epsilon=1.0, lower=-10.0, upper=10.0)
    em = best_of(lambda: median.exponential_mechanism_median(key, data, epsilon=1.0, lower=-10.0, upper=10.0).value,
                  repeats)
    return {"case": f"one release, n={n}", "ours_s": ours, "ours_first_call_s": first, "np_sort_s": sort,
            "ratio_to_sort": ours / sort, "exponential_median_s": em, "ratio_to_exponential_median": ours / em,
            "route": int(out.info.nonprivate_route), "target_ratio_to_sort": 3.0}


def _uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return os.getloadavg().__repr__()


def _describe(sizes):
    loop = "all trials" if sizes["loop_limit"] is None else f"{sizes['loop_limit']} trials, scaled"
    return (f"{sizes['trials']} trials of n = {sizes['n']}, one release at n = {sizes['large_n']}; NumPy loop timed on "
            f"{loop}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="GPU sizes: " + _describe(MODES["gpu"]))
    mode.add_argument("--quick", action="store_true", help="smallest sizes: " + _describe(MODES["quick"]))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=None, help="default 1000 (--quick 100, --gpu 10000)")
    parser.add_argument("--n", type=int, default=None, help="rows per trial, default 10000")
    parser.add_argument("--large-n", type=int, default=None, help="default 10^6 (--quick 10^5, --gpu 10^7)")
    parser.add_argument("--loop-limit", type=int, default=None,
                        help="trials the NumPy loop is timed on, scaled to all (default all; --gpu 1000)")
    args = parser.parse_args(argv)
    mode_name, sizes = mode_sizes(args, MODES)
    load_before, loadavg_before = _uptime(), load_average()
    results = [case_trials(sizes["trials"], sizes["n"], args.repeats, sizes["loop_limit"]),
               case_large(sizes["large_n"], args.repeats)]
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.machine(),
            "devices": [str(d) for d in jax.devices()], "jax": jax.__version__, "gpuprivacy": gpuprivacy.__version__,
            "python": platform.python_version(), "uptime_before": load_before, "uptime_after": _uptime(),
            "load_before": loadavg_before, "load_after": load_average(), "mode": mode_name, "sizes": sizes,
            "cpu_count": os.cpu_count(), "opendp": "not installed: compared with the exponential-mechanism median"}
    if args.json:
        json.dump({"meta": meta, "results": results}, sys.stdout, indent=1)
        print()
        return
    print(f"# bench_private_median  {meta['date']}  devices={meta['devices']}  jax {meta['jax']}  mode {mode_name}")
    print(f"# load before: {meta['uptime_before']}\n# load after:  {meta['uptime_after']}")
    a, b = results
    scaled = "" if a["loop_timed_on"] == sizes["trials"] else f" (timed on {a['loop_timed_on']} trials, scaled)"
    print(f"{a['case']}: ours {a['ours_s']:.3f} s (first call {a['ours_first_call_s']:.1f} s), NumPy loop "
          f"{a['numpy_loop_s']:.3f} s{scaled}, ratio {a['ratio']:.2f}x (target >= 1x on CPU, >= 50x on a GPU); "
          f"fast path {a['fast_path_rate']:.3f}, overflow {a['overflow_rate']:.3f}")
    print(f"{b['case']}: ours {b['ours_s']:.4f} s (first call {b['ours_first_call_s']:.1f} s), np.sort "
          f"{b['np_sort_s']:.4f} s, ratio {b['ratio_to_sort']:.2f}x (target <= 3x); exponential-mechanism median "
          f"{b['exponential_median_s']:.4f} s, ratio {b['ratio_to_exponential_median']:.2f}x; route {b['route']}")


if __name__ == "__main__":
    main()
