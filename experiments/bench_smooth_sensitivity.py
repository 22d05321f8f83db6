"""Benchmark: the smooth-sensitivity median, O(n log n) divide and conquer vs the old O(n^2) definition.

For each n, ``--trials`` datasets of n standard normal values (domain [-10, 10], epsilon = 1,
Cauchy noise, so beta = 1/6), one per trial, and three ways to release all of them:

(a) ``run_trials(smooth_sensitivity_median, ..., batched_args=True)``: the package, batched by
    ``jax.vmap`` (an exact search of Nissim, Raskhodnikova & Smith 2007, §3.1: on CPU the largest gaps up
    to 2^23 pairs, then the blocked search; on accelerators the divide and conquer);
(b) a Python loop calling ``smooth_sensitivity_median`` once per trial (timed on ``--loop-limit``
    trials and scaled to all, as stated in the output);
(c) the old batched path: the same mechanism with the quadratic computation of the smooth
    sensitivity (max over every distance k <= n of the largest gap at that distance, as the package
    computed it before), vmapped the same way. Its code is copied below (the baseline);
(d) where the kernel takes the largest gaps (CPU, n <= 5789, at most 2^23 pairs), (a) again with the divide and
    conquer forced: the choice's own gain, and the check that both give the same release bitwise.

Each time is the best of ``--repeats`` steady-state runs; first (compiling) calls are reported apart.
The released values of (a) and (c) are compared (same keys, same noise): the smooth sensitivities
agree to 2 ulps, most bitwise (XLA's float64 ``exp`` differs between the two programs;
tests/mechanisms/test_smooth_sensitivity_fast.py). ``uptime`` load is printed with the numbers: the
machine may be shared.

    python experiments/bench_smooth_sensitivity.py           # n = 10^3, 10^4; 100 trials; 3 repeats
    python experiments/bench_smooth_sensitivity.py --quick   # same sizes, 1 repeat, loop timed on 20 trials
    python experiments/bench_smooth_sensitivity.py --gpu     # 1000 trials, n = 10^3, 10^4 (loop on 100)
    python experiments/bench_smooth_sensitivity.py --json    # one JSON object on stdout
    python experiments/bench_smooth_sensitivity.py --sizes 100 500 1000 2000 --trials 1000   # with (d)

Explicit ``--trials``, ``--sizes``, ``--loop-limit`` and ``--repeats`` override the mode's values.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import os
import platform
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

import gpuprivacy
from gpuprivacy import mechanisms
from gpuprivacy.mechanisms import instance_optimal as io
from gpuprivacy.mechanisms._instance_optimal import _smooth_kernel
from gpuprivacy.mechanisms._instance_optimal._smooth_sensitivity import (smooth_sensitivity_by_definition,
                                                                        takes_largest_gaps)
from _timing import best_of, first_call, load_average, mode_sizes  # experiments/_timing.py

LOWER, UPPER, EPSILON, SEED = -10.0, 10.0, 1.0, 0
MODES = {
    "default": dict(trials=100, sizes=(1000, 10_000), loop_limit=100, repeats=3),
    "quick": dict(trials=100, sizes=(1000, 10_000), loop_limit=20, repeats=1),
    "gpu": dict(trials=1000, sizes=(1000, 10_000), loop_limit=100, repeats=3),
}


# ---------------------------------------------------------------- the baseline: the old quadratic path

def _numpy_sort(values):
    return np.sort(np.asarray(values), axis=-1)


def _sort(x):
    # As the package sorts: NumPy through a host callback on CPU, jnp.sort on accelerators.
    if jax.default_backend() != "cpu":
        return jnp.sort(x, axis=-1)
    return jax.pure_callback(_numpy_sort, jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="expand_dims")


@functools.partial(jax.jit, static_argnames=("rank", "max_distance"))
def quadratic_smooth_sensitivity(sorted_data, beta, lower, upper, rank, max_distance):
    """The old computation, O(n * max_distance), and the median."""
    return (smooth_sensitivity_by_definition(sorted_data, beta, lower, upper, rank, max_distance),
            sorted_data[rank - 1])


@functools.partial(jax.jit, static_argnames=("rank",))
def _quadratic_release(key, x, alpha, beta, lower, upper, rank):
    smooth, median = quadratic_smooth_sensitivity(_sort(x), beta, lower, upper, rank, x.shape[0])
    return median + smooth / alpha * jax.random.cauchy(key, (), jnp.float64), smooth


def quadratic_release(key, x):
    """The old mechanism (Cauchy noise, alpha = beta = epsilon / 6) on one dataset: (value, smooth sensitivity)."""
    scale = jnp.asarray(EPSILON / 6.0, jnp.float64)
    return _quadratic_release(key, x, scale, scale, jnp.asarray(LOWER), jnp.asarray(UPPER), (x.shape[0] + 1) // 2)


# ---------------------------------------------------------------- the three timings

def _ulps(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.abs(a.view(np.int64) - b.view(np.int64))


def case(n, trials, repeats, loop_limit):
    data = np.random.default_rng(SEED + n).normal(0.0, 1.0, (trials, n)).clip(LOWER, UPPER)
    key = jax.random.key(SEED)
    params = dict(epsilon=EPSILON, lower=LOWER, upper=UPPER)

    def batched():
        # Traced data need clip=True (refused otherwise); the data are inside [LOWER, UPPER], so it changes nothing.
        return mechanisms.run_trials(io.smooth_sensitivity_median, key, trials, data, batched_args=True, clip=True,
                                     **params)

    ours_release, ours_first = first_call(batched)
    ours = best_of(batched, repeats)

    keys = jax.random.split(key, trials)  # the keys run_trials gives the trials
    limit = min(trials, loop_limit)
    jax.block_until_ready(io.smooth_sensitivity_median(keys[0], data[0], **params))  # compile outside the clock

    def loop():
        return [io.smooth_sensitivity_median(keys[i], data[i], **params).value for i in range(limit)]

    loop_s = best_of(loop, repeats) * trials / limit

    old = jax.vmap(quadratic_release)
    device_data = jnp.asarray(data)
    (old_values, old_smooth), old_first = first_call(lambda: old(keys, device_data))
    old_s = best_of(lambda: old(keys, device_data), repeats)

    ulps = _ulps(ours_release.info.nonprivate_smooth_sensitivity, old_smooth)
    forced = {}
    if takes_largest_gaps(n, (n + 1) // 2, n):
        with _divide_and_conquer_forced():
            dc_release, dc_first = first_call(batched)
            dc = best_of(batched, repeats)
        forced = {"divide_and_conquer_batched_s": dc, "divide_and_conquer_first_call_s": dc_first,
                  "ratio_divide_and_conquer_over_ours": dc / ours,
                  "divide_and_conquer_release_bitwise": bool(np.array_equal(np.asarray(dc_release.value),
                                                                            np.asarray(ours_release.value)))}
    return {**forced, "case": f"{trials} trials x n={n}", "n": n, "trials": trials,
            "ours_batched_s": ours, "ours_first_call_s": ours_first,
            "loop_s": loop_s, "loop_timed_on": limit,
            "quadratic_batched_s": old_s, "quadratic_first_call_s": old_first,
            "ratio_loop_over_ours": loop_s / ours, "ratio_quadratic_over_ours": old_s / ours,
            "ratio_quadratic_over_loop": old_s / loop_s,
            "smooth_sensitivity_max_ulps": int(ulps.max()),
            "smooth_sensitivity_bitwise_fraction": float(np.mean(ulps == 0)),
            "value_max_abs_diff": float(np.max(np.abs(np.asarray(ours_release.value) - np.asarray(old_values))))}


@contextlib.contextmanager
def _divide_and_conquer_forced():
    """The kernel with its largest-gaps budget at 0 and the divide and conquer in place of the CPU's blocked search
    (programs traced before and after are dropped)."""
    saved = _smooth_kernel._LARGEST_GAPS_PAIRS, _smooth_kernel._blocked_search
    _smooth_kernel._LARGEST_GAPS_PAIRS, _smooth_kernel._blocked_search = 0, _smooth_kernel._divide_and_conquer
    jax.clear_caches()
    try:
        yield
    finally:
        _smooth_kernel._LARGEST_GAPS_PAIRS, _smooth_kernel._blocked_search = saved
        jax.clear_caches()


def _uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return repr(load_average())


def _git_sha():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
    except OSError:
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="1000 trials, loop timed on 100")
    mode.add_argument("--quick", action="store_true", help="1 repeat, loop timed on 20 trials (scaled)")
    parser.add_argument("--trials", type=int, default=None, help="default 100 (--gpu 1000)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="n per dataset, default 1000 10000")
    parser.add_argument("--loop-limit", type=int, default=None, help="trials the loop is timed on, scaled to all")
    parser.add_argument("--repeats", type=int, default=None, help="steady-state runs per time, best kept")
    args = parser.parse_args(argv)
    mode_name, sizes = mode_sizes(args, MODES)
    load_before, loadavg_before = _uptime(), load_average()
    start = time.perf_counter()
    results = [case(n, sizes["trials"], sizes["repeats"], sizes["loop_limit"]) for n in sizes["sizes"]]
    payload = {"results": results, "uptime_before": load_before, "uptime_after": _uptime(),
               "load_before": loadavg_before, "load_after": load_average(), "total_s": time.perf_counter() - start,
               "date": datetime.datetime.now().isoformat(timespec="seconds"), "mode": mode_name,
               "config": {**sizes, "sizes": list(sizes["sizes"]), "epsilon": EPSILON, "noise": "cauchy",
                          "domain": [LOWER, UPPER], "data": "normal(0, 1), clipped"},
               "seed": SEED, "git_sha": _git_sha(),
               "device": jax.devices()[0].device_kind, "devices": [str(d) for d in jax.devices()],
               "backend": jax.default_backend(), "jax": jax.__version__,
               "jaxlib": getattr(__import__("jaxlib"), "__version__", None),
               "gpuprivacy": gpuprivacy.__version__, "platform": platform.platform(), "cpu_count": os.cpu_count()}
    if args.json:
        print(json.dumps(payload, indent=1))
        return
    print(f"# bench_smooth_sensitivity  {payload['date']}  mode {mode_name}  git {payload['git_sha']}")
    print(f"device: {payload['device']} ({payload['backend']}), jax {payload['jax']}, {payload['cpu_count']} CPUs")
    print(f"load before: {load_before}")
    for r in results:
        print(r["case"])
        print(f"  (a) ours, batched run_trials : {r['ours_batched_s']:.4g} s  "
              f"(first call {r['ours_first_call_s']:.4g} s)")
        print(f"  (b) per-trial Python loop     : {r['loop_s']:.4g} s  (timed on {r['loop_timed_on']} trials, scaled)")
        print(f"  (c) old quadratic, batched    : {r['quadratic_batched_s']:.4g} s  "
              f"(first call {r['quadratic_first_call_s']:.4g} s)")
        if "divide_and_conquer_batched_s" in r:
            print(f"  (d) (a), divide and conquer   : {r['divide_and_conquer_batched_s']:.4g} s  "
                  f"(first call {r['divide_and_conquer_first_call_s']:.4g} s; the largest gaps are "
                  f"{r['ratio_divide_and_conquer_over_ours']:.3g}x faster; same releases: "
                  f"{r['divide_and_conquer_release_bitwise']})")
        print(f"  ratios: loop/ours {r['ratio_loop_over_ours']:.3g}x, quadratic/ours "
              f"{r['ratio_quadratic_over_ours']:.3g}x, quadratic/loop {r['ratio_quadratic_over_loop']:.3g}x")
        print(f"  smooth sensitivity vs quadratic: max {r['smooth_sensitivity_max_ulps']} ulp, "
              f"{100 * r['smooth_sensitivity_bitwise_fraction']:.0f}% bitwise; released values max |diff| "
              f"{r['value_max_abs_diff']:.3g}")
    print(f"load after: {payload['uptime_after']}")


if __name__ == "__main__":
    main()
