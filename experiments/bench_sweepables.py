"""Every sweepable mechanism: batched ``run_trials`` vs a per-trial Python loop of the same release (same run).

The claim checked: no batched path is slower than a per-trial loop of the same mechanism. For each
mechanism of ``gpuprivacy.sweeps`` (the built-in sweepables, or those named with ``--only``), with the
parameters of :data:`PARAMS` and a distinct data set per trial (``data [T, n]``: ``datasets.draw(key,
"normal", (T, n))``, or scores ``Uniform[0, 10)`` for the selections), it times

* batched: ``mechanisms.run_trials(release, key, T, data, batched_args=True, **params).value``, jitted
  with the parameters closed over where that traces (a mechanism with its own batched hook, such as
  ``private_median``'s host-routed driver, runs its hook eagerly). Steady state: one call to compile,
  then the best of 3 (1 if the first call took over 10 s);
* loop: ``for i in range(L): release(keys[i], data[i], **params).value`` eagerly, blocking on each,
  with ``keys = jax.random.split(key, T)`` (the keys ``run_trials`` uses, so trial ``i`` is the same
  release on both sides) and the rows sliced before the clock starts. After one warm-up call, the
  best of 1-3 passes (3 under 2 s a pass, 2 under 10 s, else 1), on ``L = min(T, loop_trials)``
  trials and scaled linearly to ``T`` (stated in the output).

It prints name, n, T, whether the batched path was jitted, both times, the ratio loop / batched and
PASS (ratio >= 1) or FAIL, plus whether the batched values equal the loop's on the ``L`` timed trials.
A mechanism that raises is reported with its error; the others still run.

Mechanisms registered with ``batched=False`` (the privacy wrappers and the black-box estimators, whose
oracle engine runs on the host and cannot be traced under ``jax.vmap``) have no batched path: the
study engine calls them once per trial on device-drawn data, so the per-trial loop IS the engine's path.
Only the loop is timed for them (on ``host_trials`` trials, scaled to T), with verdict ``LOOP``; they
run at the fixed small n of :data:`FIXED_N` (the wrappers evaluate the oracle on subsets of the rows).
The mechanisms reached through the adapters of ``gpuprivacy/sweeps/_adapters.py`` are timed through
their adapters, which call the public mechanism.

    python experiments/bench_sweepables.py --quick            # n = 200, T = 200, loop on 50 (host-side: 16) trials
    python experiments/bench_sweepables.py                    # n = 1000, T = 1000, loop on 200 (host-side: 64)
    python experiments/bench_sweepables.py --gpu              # n = 1000, T = 10^4, loop on 200 (host-side: 64)
    python experiments/bench_sweepables.py --only private-median laplace-mechanism --json
    python experiments/bench_sweepables.py --sizes 100 1000 10000 --trials 200 --loop-trials 50

Exits with status 1, naming them, when any batched path is slower than its loop or any mechanism errors.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import pathlib
import platform
import sys
import time

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import best_of, load_average, mode_sizes  # noqa: E402

from gpuprivacy import datasets, mechanisms, sweeps  # noqa: E402
# The sweepables' release functions have no public accessor (sweeps.describe_sweepables() gives names,
# parameters and targets only), so this client reads the engine's own table, as bench_study.py does.
from gpuprivacy.sweeps._mechanisms import builtin_sweepables  # noqa: E402

MODES = {
    "quick": {"n": 200, "trials": 200, "loop_trials": 50, "host_trials": 16},
    "default": {"n": 1000, "trials": 1000, "loop_trials": 200, "host_trials": 64},
    "gpu": {"n": 1000, "trials": 10_000, "loop_trials": 200, "host_trials": 64},
}
_BOUNDED = {"epsilon": 1.0, "lower": -10.0, "upper": 10.0, "clip": True}
_SELECTION = {"epsilon": 1.0}
_GAUSS = {"sigma_threshold": 0.05, "sigma_query": 0.1, "sensitivity": 0.01, "lower": 0.0, "upper": 1.0}
# One valid parameter set per mechanism (data: normal samples; selections: scores in [0, 10)).
PARAMS = {
    "piecewise-laplace-median": _BOUNDED,
    "inverse-sensitivity-median": _BOUNDED,
    "laplace-median": _BOUNDED,
    "smooth-sensitivity-median": _BOUNDED,
    "exponential-mechanism-median": _BOUNDED,
    "private-median": {"epsilon": 1.0, "min_density": 0.25, "radius": 0.5, "median_bound": 10.0},
    "nonprivate": {"statistic": "median"},  # the studies' non-private baseline (no guarantee): timed all the same
    "piecewise-laplace-quantile": {**_BOUNDED, "quantile": 0.3},
    "inverse-sensitivity-quantile": {**_BOUNDED, "quantile": 0.3},
    "piecewise-laplace-clipped-mean": _BOUNDED,
    "inverse-sensitivity-clipped-mean": _BOUNDED,
    "report-noisy-max": _SELECTION,
    "exponential-mechanism": _SELECTION,
    "permute-and-flip": _SELECTION,
    "laplace-report-noisy-max": _SELECTION,
    "gaussian-report-noisy-max": {"sigma": 1.0, "sensitivity": 1.0, "lower": 0.0, "upper": 10.0},
    "laplace-mechanism": {"epsilon": 1.0},
    "gaussian-mechanism": {"epsilon": 1.0, "delta": 1e-6},
    "gaussian-mechanism-zcdp": {"rho": 0.5},
    # Stopping-index mechanisms on a query stream in [0, 1) (uniform data).
    "above-threshold": {"threshold": 0.9, "epsilon": 1.0, "sensitivity": 0.01},
    "sparse-vector": {"threshold": 0.9, "epsilon": 1.0, "max_positives": 3, "sensitivity": 0.01},
    "gaussian-above-threshold": {"threshold": 0.9, **_GAUSS},
    "gaussian-sparse-vector": {"threshold": 0.9, "epsilon": 10.0, "delta": 1e-6, **_GAUSS},
    "gaussian-sparse-vector-whitehouse": {"threshold": 0.9, "epsilon": 60.0, "delta_prime": 1e-6,
                                          "delta_double_prime": 1e-6, **_GAUSS},
    # Adapters of the instance-optimal family (normal data).
    "piecewise-laplace": {**_BOUNDED, "statistic": "median"},
    "inverse-sensitivity": {**_BOUNDED, "statistic": "quantile", "quantile": 0.3},
    "piecewise-laplace-count": {"epsilon": 1.0, "cutoff": 0.0},
    "inverse-sensitivity-count": {"epsilon": 1.0, "cutoff": 0.0},
    "piecewise-laplace-vector": {**_BOUNDED, "dim": 2},
    # Host-side (batched=False): named oracles on uniform data.
    "sens-o-matic": {"oracle": "mean", "grid_lower": 0.0, "grid_upper": 1.0, "grid_size": 11, "epsilon": 1.0,
                     "beta": 0.1},
    "shifted-inverse": {"oracle": "count", "grid_lower": 0.0, "grid_upper": 8.0, "grid_size": 9, "epsilon": 1.0,
                        "beta": 0.1},
    "cummings-durfee": {"oracle": "mean", "c": 0.2, "epsilon": 1.0},
    "double-monotonization": {"oracle": "count", "r": 2000.0, "c": 1.0, "epsilon": 8.0, "beta": 0.05},
    "small-diameter-subset-extension": {"oracle": "mean", "r": 1.0, "c": 0.2, "epsilon": 1.0},
    "subset-extension": {"oracle": "mean", "c": 0.2, "epsilon": 1.0, "delta": 1e-6},
    "tahoe": {"oracle": "mean", "c": 0.2, "epsilon": 1.0, "delta": 1e-6},
    "white-box-laplace": {"oracle": "mean", "sensitivity": 0.125, "epsilon": 1.0},
    "blackbox-estimate": {"oracle": "median", "epsilon": 1.0, "lower": 0.0, "upper": 1.0, "resolution": 0.25,
                          "beta": 0.1},
    "blackbox-estimate-zcdp": {"oracle": "median", "rho": 0.5, "lower": 0.0, "upper": 1.0, "resolution": 0.25,
                               "beta": 0.1},
    "blackbox-binary": {"oracle": "mean", "cutoff": 0.5, "epsilon": 1.0, "beta": 0.1},
}
MIN_N = {"private-median": 128}  # min_density * radius * n must leave the typical set non-trivial
# The wrappers evaluate the oracle on subsets of the rows (up to the whole power set, 2^n), and the black-box
# estimators need n >= t + 1 for their sample-and-aggregate design: each runs at one fixed n in every mode.
_WRAPPERS = ("sens-o-matic", "shifted-inverse", "cummings-durfee", "double-monotonization",
             "small-diameter-subset-extension", "subset-extension", "tahoe", "white-box-laplace")
FIXED_N = {**{name: 8 for name in _WRAPPERS}, "blackbox-estimate": 64, "blackbox-estimate-zcdp": 64,
           "blackbox-binary": 64}
SCORE_RANGE = (0.0, 10.0)  # within gaussian-report-noisy-max's [lower, upper]
# Targets whose mechanisms take data in [0, 1) (query streams in the Gaussian selections' [0, 1], oracle rows).
_UNIT_TARGETS = ("first-above-threshold", "stopping-time", "threshold-answers", "oracle", "oracle-indicator")
_LONG_FIRST_CALL_S = 10.0


def _error(exc):
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text if len(text) <= 160 else text[:157] + "..."


def trial_data(key, target, trials, n):
    """``float64[trials, n]``: a distinct data set per trial (scores for the selections, [0, 1) for streams)."""
    if target == "argmax":
        return datasets.draw(key, "uniform", (trials, n), low=SCORE_RANGE[0], high=SCORE_RANGE[1])
    if target in _UNIT_TARGETS:
        return datasets.draw(key, "uniform", (trials, n), low=0.0, high=1.0)
    return datasets.draw(key, "normal", (trials, n))


def batched_runner(release, trials, params, key, data):
    """``(fn, jitted, note, first_s)``: a zero-argument call of the batched path, jitted if it traces.

    ``fn`` has been called once (``first_s`` seconds: the compiling call, including a failed trace).
    """
    if "clip" in inspect.signature(release).parameters and "clip" not in params:
        # Traced data need clip=True (refused otherwise); the data are the same in-range rows the loop sees.
        params = {**params, "clip": True}

    def run(k, x):
        return mechanisms.run_trials(release, k, trials, x, batched_args=True, **params).value

    jitted = jax.jit(run)
    start = time.perf_counter()
    try:
        jax.block_until_ready(jitted(key, data))
        return (lambda: jitted(key, data)), True, "", time.perf_counter() - start
    except Exception as exc:  # a host-routed hook cannot be traced: run run_trials eagerly
        note = f"runs eagerly, as it does not trace under jit ({_error(exc)})"
    jax.block_until_ready(run(key, data))
    return (lambda: run(key, data)), False, note, time.perf_counter() - start


def loop_pass(release, keys, rows, params):
    """Seconds of one pass of the per-trial loop, and its values (as NumPy)."""
    values = []
    start = time.perf_counter()
    for k, x in zip(keys, rows):
        values.append(jax.block_until_ready(release(k, x, **params).value))
    seconds = time.perf_counter() - start
    return seconds, np.stack([np.asarray(v) for v in values])


def _agree(batched, loop):
    if batched.shape != loop.shape:
        return False, f"shapes {batched.shape} vs {loop.shape}"
    if np.issubdtype(batched.dtype, np.integer) or batched.dtype == bool:
        mismatches = int(np.sum(batched != loop))
        return mismatches == 0, f"{mismatches} of {batched.size} differ"
    diff = float(np.max(np.abs(batched - loop))) if batched.size else 0.0
    return bool(np.allclose(batched, loop, rtol=1e-9, atol=1e-12)), f"max |diff| {diff:.2e}"


def _timed_loop(mech, keys_part, rows, params):
    """``(best seconds of 1-3 passes, the passes, values)`` of the per-trial loop, after one warm-up call."""
    jax.block_until_ready(mech.release(keys_part[0], rows[0], **params).value)  # warm-up (compiles)
    seconds, loop_values = loop_pass(mech.release, keys_part, rows, params)
    passes = [seconds]
    extra = 2 if seconds < 2.0 else 1 if seconds < 10.0 else 0
    for _ in range(extra):
        passes.append(loop_pass(mech.release, keys_part, rows, params)[0])
    return min(passes), len(passes), loop_values


def run_mechanism(name, mech, *, n, trials, loop_trials, host_trials=4, seed=0):
    n = FIXED_N.get(name, n)
    row = {"mechanism": name, "n": n, "trials": trials, "target": mech.target, "engine_batched": mech.batched}
    params = PARAMS.get(name)
    if params is None:
        row["error"] = "no parameter set in PARAMS for this mechanism (add one)"
        return row
    row["params"] = params
    if n < MIN_N.get(name, 0):
        row["verdict"] = "SKIP"  # its parameters need more rows (MIN_N): not a failure of the batched path
        row["skip_reason"] = f"needs n >= {MIN_N[name]}"
        return row
    data_key, mechanism_key = jax.random.split(jax.random.key(seed))
    # Host-side mechanisms: only the rows the loop times are drawn (each trial costs seconds, not microseconds).
    drawn = trials if mech.batched else min(trials, host_trials)
    try:
        data = jax.block_until_ready(trial_data(data_key, mech.target, drawn, n))
    except Exception as exc:
        row["error"] = f"data: {_error(exc)}"
        return row
    if not mech.batched:
        # No batched path: the study engine runs this mechanism once per trial, so the loop is its path.
        keys = jax.random.split(mechanism_key, trials)
        try:
            seconds, passes, _ = _timed_loop(mech, [keys[i] for i in range(drawn)], [data[i] for i in range(drawn)],
                                             params)
        except Exception as exc:
            row["error"] = f"loop: {_error(exc)}"
            return row
        row.update(jitted=False, batched_note="batched=False: the engine calls it once per trial (the loop is its "
                                              "path)", loop_s=seconds * trials / drawn, loop_timed_on=drawn,
                   loop_passes=passes, verdict="LOOP")
        return row
    # Batched path.
    try:
        fn, jitted, note, first = batched_runner(mech.release, trials, params, mechanism_key, data)
        reps = 3 if first < _LONG_FIRST_CALL_S else 1
        steady = best_of(fn, reps)
        batched_values = np.asarray(fn())  # outside the timed calls
        row.update(jitted=jitted, batched_note=note, batched_first_call_s=first, batched_s=steady,
                   batched_repeats=reps)
    except Exception as exc:
        row["error"] = f"batched: {_error(exc)}"
        return row
    # Per-trial loop, on the keys run_trials splits, rows sliced before the clock starts.
    limit = min(trials, loop_trials)
    keys = jax.random.split(mechanism_key, trials)
    keys_part = [keys[i] for i in range(limit)]
    rows = [data[i] for i in range(limit)]
    try:
        seconds, passes, loop_values = _timed_loop(mech, keys_part, rows, params)
    except Exception as exc:
        row["error"] = f"loop: {_error(exc)}"
        return row
    loop = seconds * trials / limit
    agree, detail = _agree(batched_values[:limit], loop_values)
    row.update(loop_s=loop, loop_timed_on=limit, loop_passes=passes, ratio=loop / row["batched_s"],
               verdict="PASS" if loop >= row["batched_s"] else "FAIL", values_agree=agree, agree_detail=detail)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 200, T = 200, loop timed on 50 trials (host-side: 16)")
    parser.add_argument("--gpu", action="store_true", help="n = 1000, T = 10^4, loop timed on 200 trials")
    parser.add_argument("--n", type=int, help="records (or candidates) per trial")
    parser.add_argument("--sizes", type=int, nargs="+", metavar="N",
                        help="run every mechanism at each of these n in turn (e.g. --sizes 100 1000 10000); "
                             "overrides --n")
    parser.add_argument("--trials", type=int, help="T, trials of the batched path")
    parser.add_argument("--loop-trials", type=int, help="trials the loop is timed on (scaled to T)")
    parser.add_argument("--host-trials", type=int,
                        help="trials the loop of a batched=False (host-side) mechanism is timed on (scaled to T)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="mechanisms to run (default: every sweepable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    mode, sizes = mode_sizes(args, MODES)
    table = builtin_sweepables()
    names = list(table) if args.only is None else args.only
    unknown = [name for name in names if name not in table]
    if unknown:
        parser.error(f"unknown mechanism(s) {unknown}; sweepable: {sorted(table)}")
    env = sweeps.environment_info()
    meta = {"benchmark": "sweepables", "mode": mode, **sizes, "seed": args.seed,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()} {os.cpu_count()} cores, {jax.devices()[0].device_kind}",
            "platform": platform.platform(), "devices": [str(d) for d in jax.devices()],
            "jax": env["jax_version"], "jaxlib": env["jaxlib_version"], "gpuprivacy": env["gpuprivacy_version"],
            "git_sha": env["git_sha"], "git_dirty": env["git_dirty"], "load_before": load_average()}
    if not args.json:
        print(f"# bench_sweepables ({mode})  {meta['date']}  {meta['machine']}  jax {meta['jax']}  "
              f"load before {meta['load_before']}")
        print(f"# batched: jitted run_trials(batched_args=True), best of 3 after compiling; loop: eager per-trial "
              f"calls on {min(sizes['trials'], sizes['loop_trials'])} of T trials, scaled linearly to T")
        print(f"# LOOP: a batched=False (host-side) mechanism: the engine calls it once per trial, so only that "
              f"loop is timed (on {min(sizes['trials'], sizes['host_trials'])} trials, scaled to T; n fixed)")
        print(f"{'mechanism':34s} {'n':>5s} {'T':>6s} {'jit':>4s} {'batched s':>10s} {'loop s':>10s} "
              f"{'loop/batched':>12s} {'verdict':>7s}  values")
    results = []
    jobs = [(name, n) for n in (args.sizes or [sizes["n"]]) for name in names]
    meta["sizes"] = args.sizes or [sizes["n"]]
    fixed_done = set()
    for name, n in jobs:
        if name in FIXED_N:
            if name in fixed_done:
                continue  # a mechanism with one fixed n (FIXED_N) runs once, whatever the sizes
            fixed_done.add(name)
        row = run_mechanism(name, table[name], n=n, trials=sizes["trials"],
                            loop_trials=sizes["loop_trials"], host_trials=sizes["host_trials"], seed=args.seed)
        results.append(row)
        if args.json:
            continue
        if "error" in row:
            print(f"{name:34s} {row['n']:5d} {sizes['trials']:6d}  ERROR  {row['error']}")
            continue
        if row.get("verdict") == "SKIP":
            print(f"{name:34s} {row['n']:5d} {sizes['trials']:6d}  SKIP   {row['skip_reason']}")
            continue
        if row["verdict"] == "LOOP":
            print(f"{name:34s} {row['n']:5d} {row['trials']:6d} {'-':>4s} {'-':>10s} {row['loop_s']:10.4f} "
                  f"{'-':>12s} {'LOOP':>7s}  (engine's per-trial path, timed on {row['loop_timed_on']} trials)")
            continue
        print(f"{name:34s} {row['n']:5d} {row['trials']:6d} {'yes' if row['jitted'] else 'no':>4s} "
              f"{row['batched_s']:10.4f} {row['loop_s']:10.4f} {row['ratio']:11.1f}x {row['verdict']:>7s}  "
              f"{'equal' if row['values_agree'] else 'DIFFER'} ({row['agree_detail']})")
    meta["load_after"] = load_average()
    failed = [r["mechanism"] for r in results if r.get("verdict") == "FAIL"]
    errored = [r["mechanism"] for r in results if "error" in r]
    per_trial = [r["mechanism"] for r in results if r.get("verdict") == "LOOP"]
    meta.update(failed=failed, errored=errored, per_trial=per_trial)
    if args.json:
        json.dump({"meta": meta, "results": results}, sys.stdout, indent=1)
        print()
    else:
        for row in results:
            if row.get("batched_note") and row.get("verdict") != "LOOP":  # LOOP rows say so on their line
                print(f"  {row['mechanism']}: batched path {row['batched_note']}")
        print(f"# loop timed on {min(sizes['trials'], sizes['loop_trials'])} trials per mechanism and scaled "
              f"linearly to T = {sizes['trials']}; load after {meta['load_after']}")
        skipped = sum(r.get("verdict") == "SKIP" for r in results)
        print(f"# {len(results) - len(failed) - len(errored) - len(per_trial) - skipped} PASS, {skipped} SKIP, "
              f"{len(failed)} FAIL {failed}, "
              f"{len(per_trial)} per-trial only (batched=False), {len(errored)} errors {errored}")
    return {"meta": meta, "results": results}


if __name__ == "__main__":
    outcome = main()
    # Fails loudly: a batched path slower than its loop (or a mechanism that errors) is a defect of the engine.
    if outcome["meta"]["failed"] or outcome["meta"]["errored"]:
        print(f"FAIL: batched slower than the loop: {outcome['meta']['failed']}; errors: "
              f"{outcome['meta']['errored']}", file=sys.stderr)
        sys.exit(1)
