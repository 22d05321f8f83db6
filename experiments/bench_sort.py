"""Benchmark: the backend-routed sort (``gpuprivacy._sort``) vs ``jnp.sort``, alone and inside the median releases.

On a CPU ``gpuprivacy._sort.sort`` runs NumPy's (SIMD) sort through a host callback; on a GPU it is
``jnp.sort`` (so with ``--gpu`` "ours" and "before" time the same program). "Before" is the same code
with the host route switched off (``HOST_SORT_PLATFORMS = ()``, every sort in XLA), which is what
the mechanisms ran before the sorts were routed. Every case prints ours, the baseline and their
ratio from the same run, and checks that ours equals the baseline bitwise.

(a) the sort alone (jitted) at n = 10^4, 10^6 and a batch [B, 10^4] (along the last axis), vs
    ``jnp.sort`` under ``jit`` and vs ``np.sort``;
(b) seed-003 private-median trials at n = 10^4 (``mechanisms.run_trials(median.private_median, ...,
    batched_args=True)``), before and after, vs the per-trial NumPy loop of
    ``experiments/bench_private_median.py`` (same parameters, same data);
(c) one release at n = 10^6 of the sort-based medians (``median.private_median``,
    ``instance_optimal.laplace_median``, ``median.exponential_mechanism_median``), before and after,
    vs ``np.sort`` of the same data.

Steady-state times (best of ``--repeats``, after a compiling call). The machine load (``uptime``) is
recorded with the numbers.

    python experiments/bench_sort.py            # batch [1000, 10^4], 1000 trials
    python experiments/bench_sort.py --quick    # batch [100, 10^4], 100 trials (n = 10^4, 10^6 as default)
    python experiments/bench_sort.py --gpu      # batch [10^4, 10^4], 10^4 trials, n = 10^7
    python experiments/bench_sort.py --json     # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

import gpuprivacy
from gpuprivacy import mechanisms
# The helper has no public face (a layer-0 private module); the benchmark measures it directly.
from gpuprivacy import _sort  # noqa: PLC2701
from gpuprivacy.mechanisms import instance_optimal, median
from _timing import best_of, load_average, mode_sizes  # experiments/_timing.py (the script's folder is on sys.path)
from bench_private_median import PARAMS, numpy_release  # the seed-003 parameters and per-trial NumPy loop

MODES = {
    "default": dict(n=[10_000, 1_000_000], batch=1000, row=10_000, trials=1000, large_n=1_000_000),
    "quick": dict(n=[10_000, 1_000_000], batch=100, row=10_000, trials=100, large_n=1_000_000),
    "gpu": dict(n=[10_000, 10_000_000], batch=10_000, row=10_000, trials=10_000, large_n=10_000_000),
}


class _Before:
    """Context: every sort of the package in XLA (the code before the routing), with fresh traces."""

    def __enter__(self):
        self.saved = _sort.HOST_SORT_PLATFORMS
        _sort.HOST_SORT_PLATFORMS = ()
        jax.clear_caches()

    def __exit__(self, *exc):
        _sort.HOST_SORT_PLATFORMS = self.saved
        jax.clear_caches()


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def case_sort(shape, repeats):
    x = jnp.asarray(np.random.default_rng(0).standard_normal(shape))
    host = np.asarray(x)
    ours_fn = jax.jit(lambda v: _sort.sort(v, axis=-1))
    xla_fn = jax.jit(lambda v: jnp.sort(v, axis=-1))
    ours_out, xla_out = ours_fn(x), xla_fn(x)
    ours = best_of(lambda: ours_fn(x), repeats)
    xla = best_of(lambda: xla_fn(x), repeats)
    numpy = best_of(lambda: np.sort(host, axis=-1), repeats)
    return {"case": f"sort {list(shape)} float64", "ours_s": ours, "jnp_sort_s": xla, "np_sort_s": numpy,
            "speedup_vs_jnp_sort": xla / ours, "jnp_sort_over_np_sort": xla / numpy, "ours_over_np_sort": ours / numpy,
            "bitwise_equal": _same(ours_out, xla_out)}


def _trials(key, data):
    return mechanisms.run_trials(median.private_median, key, data.shape[0], data, batched_args=True, **PARAMS)


def case_trials(trials, n, repeats):
    data = np.random.default_rng(0).standard_normal((trials, n))
    key = jax.random.key(0)
    out = _trials(key, data)
    ours = best_of(lambda: _trials(key, data).value, repeats)
    with _Before():
        before_out = _trials(key, data)
        before = best_of(lambda: _trials(key, data).value, repeats)
    cfg = median.median_parameters(n, **PARAMS)
    loop_rng = np.random.default_rng(1)
    loop = best_of(lambda: [numpy_release(loop_rng, x, cfg) for x in data], repeats)
    return {"case": f"private_median run_trials, {trials} trials, n={n}", "ours_s": ours, "before_s": before,
            "numpy_loop_s": loop, "speedup_vs_before": before / ours, "ratio_ours": loop / ours,
            "ratio_before": loop / before, "bitwise_equal": _same(out.value, before_out.value)
            and _same(out.info.nonprivate_median, before_out.info.nonprivate_median)}


RELEASES = {
    "median.private_median": lambda key, x: median.private_median(key, x, **PARAMS).value,
    "instance_optimal.laplace_median": lambda key, x: instance_optimal.laplace_median(
        key, x, epsilon=1.0, lower=-10.0, upper=10.0, clip=True).value,
    "median.exponential_mechanism_median": lambda key, x: median.exponential_mechanism_median(
        key, x, epsilon=1.0, lower=-10.0, upper=10.0, clip=True).value,
}


def case_large(n, repeats):
    data = np.random.default_rng(2).standard_normal(n)
    key = jax.random.key(1)
    sort = best_of(lambda: np.sort(data), repeats)
    rows = []
    for name, release in RELEASES.items():
        value = release(key, data)
        ours = best_of(lambda: release(key, data), repeats)
        with _Before():
            before_value = release(key, data)
            before = best_of(lambda: release(key, data), repeats)
        rows.append({"case": f"one release, n={n}: {name}", "ours_s": ours, "before_s": before, "np_sort_s": sort,
                     "speedup_vs_before": before / ours, "ours_over_np_sort": ours / sort,
                     "before_over_np_sort": before / sort, "bitwise_equal": _same(value, before_value)})
    return rows


def _uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return repr(os.getloadavg())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="GPU sizes: batch [10^4, 10^4], 10^4 trials, n = 10^7")
    mode.add_argument("--quick", action="store_true", help="smaller batches: [100, 10^4], 100 trials")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, nargs="+", default=None, help="sizes of the 1-D sorts")
    parser.add_argument("--batch", type=int, default=None, help="rows of the batched sort")
    parser.add_argument("--row", type=int, default=None, help="row length of the batched sort and of a trial")
    parser.add_argument("--trials", type=int, default=None, help="private-median trials")
    parser.add_argument("--large-n", type=int, default=None, help="n of the single releases")
    args = parser.parse_args(argv)
    mode_name, sizes = mode_sizes(args, MODES)
    load_before, loadavg_before = _uptime(), load_average()
    results = [case_sort((n,), args.repeats) for n in sizes["n"]]
    results.append(case_sort((sizes["batch"], sizes["row"]), args.repeats))
    results.append(case_trials(sizes["trials"], sizes["row"], args.repeats))
    results.extend(case_large(sizes["large_n"], args.repeats))
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "processor": _cpu_model(),
            "devices": [str(d) for d in jax.devices()], "backend": jax.default_backend(), "jax": jax.__version__,
            "numpy": np.__version__, "gpuprivacy": gpuprivacy.__version__, "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "uptime_before": load_before, "uptime_after": _uptime(),
            "load_before": loadavg_before, "load_after": load_average(), "mode": mode_name, "sizes": sizes,
            "host_sort_platforms": list(_sort.HOST_SORT_PLATFORMS), "min_host_sort_size": _sort.MIN_HOST_SORT_SIZE}
    if args.json:
        json.dump({"meta": meta, "results": results}, sys.stdout, indent=1)
        print()
        return
    print(f"# bench_sort  {meta['date']}  {meta['processor']} ({meta['cpu_count']} CPUs)  devices={meta['devices']}  "
          f"jax {meta['jax']}  numpy {meta['numpy']}  mode {mode_name}")
    print(f"# load before: {meta['uptime_before']}\n# load after:  {meta['uptime_after']}")
    for r in results:
        same = "bitwise equal" if r["bitwise_equal"] else "NOT BITWISE EQUAL"
        if "jnp_sort_s" in r:
            print(f"{r['case']}: ours {r['ours_s'] * 1e3:.2f} ms, jnp.sort {r['jnp_sort_s'] * 1e3:.2f} ms "
                  f"({r['speedup_vs_jnp_sort']:.1f}x faster), np.sort {r['np_sort_s'] * 1e3:.2f} ms "
                  f"(jnp.sort/np.sort {r['jnp_sort_over_np_sort']:.1f}x, ours/np.sort {r['ours_over_np_sort']:.2f}x); "
                  f"{same}")
        elif "numpy_loop_s" in r:
            print(f"{r['case']}: ours {r['ours_s']:.3f} s, before {r['before_s']:.3f} s "
                  f"({r['speedup_vs_before']:.1f}x faster), per-trial NumPy loop {r['numpy_loop_s']:.3f} s; "
                  f"ratio loop/ours {r['ratio_ours']:.2f}x (before {r['ratio_before']:.2f}x); {same}")
        else:
            print(f"{r['case']}: ours {r['ours_s'] * 1e3:.1f} ms, before {r['before_s'] * 1e3:.1f} ms "
                  f"({r['speedup_vs_before']:.1f}x faster), np.sort {r['np_sort_s'] * 1e3:.1f} ms; "
                  f"ours/np.sort {r['ours_over_np_sort']:.2f}x (before {r['before_over_np_sort']:.2f}x); {same}")


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
