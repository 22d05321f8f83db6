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
    python experiments/bench_private_median.py --json     # one JSON object on stdout
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
from _timing import best_of  # experiments/_timing.py (the script's folder is on sys.path)

PARAMS = dict(epsilon=1.0, min_density=0.24, radius=1.0, median_bound=10.0, constant=6.0)


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


def case_trials(trials, n, repeats):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((trials, n))
    cfg = median.median_parameters(n, **PARAMS)
    key = jax.random.key(0)
    start = time.perf_counter()
    out = median.private_median_trials(key, data, **PARAMS)
    first = time.perf_counter() - start
    steady = best_of(lambda: median.private_median_trials(key, data, **PARAMS).values, repeats)
    start = time.perf_counter()
    loop_rng = np.random.default_rng(1)
    reference = [numpy_release(loop_rng, x, cfg) for x in data]
    loop = time.perf_counter() - start
    return {"case": f"{trials} trials, n={n}", "ours_s": steady, "ours_first_call_s": first, "numpy_loop_s": loop,
            "ratio": loop / steady, "fast_path_rate": out.fast_path_rate, "overflow_rate": out.overflow_rate,
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--large-n", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    load_before = _uptime()
    results = [case_trials(args.trials, args.n, args.repeats), case_large(args.large_n, args.repeats)]
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.machine(),
            "devices": [str(d) for d in jax.devices()], "jax": jax.__version__, "gpuprivacy": gpuprivacy.__version__,
            "python": platform.python_version(), "uptime_before": load_before, "uptime_after": _uptime(),
            "cpu_count": os.cpu_count(), "opendp": "not installed: compared with the exponential-mechanism median"}
    if args.json:
        json.dump({"meta": meta, "results": results}, sys.stdout, indent=1)
        print()
        return
    print(f"# bench_private_median  {meta['date']}  devices={meta['devices']}  jax {meta['jax']}")
    print(f"# load before: {meta['uptime_before']}\n# load after:  {meta['uptime_after']}")
    a, b = results
    print(f"{a['case']}: ours {a['ours_s']:.3f} s (first call {a['ours_first_call_s']:.1f} s), NumPy loop "
          f"{a['numpy_loop_s']:.3f} s, ratio {a['ratio']:.2f}x (target >= 1x on CPU, >= 50x on a GPU); "
          f"fast path {a['fast_path_rate']:.3f}, overflow {a['overflow_rate']:.3f}")
    print(f"{b['case']}: ours {b['ours_s']:.4f} s (first call {b['ours_first_call_s']:.1f} s), np.sort "
          f"{b['np_sort_s']:.4f} s, ratio {b['ratio_to_sort']:.2f}x (target <= 3x); exponential-mechanism median "
          f"{b['exponential_median_s']:.4f} s, ratio {b['ratio_to_exponential_median']:.2f}x; route {b['route']}")


if __name__ == "__main__":
    main()
