"""XLA compile time of every sweepable mechanism's programs on this machine (issue 30: <= 0.5 s each on CPU).

For each mechanism of the study engine that runs batched (``batched=True``), with the parameters and data of
``bench_sweepables.py`` (one valid parameter set per mechanism), it compiles, after ``jax.clear_caches()`` and
with the persistent compilation cache off:

* ``single``: one release, ``jax.jit(release)(key, x)`` on one dataset of ``n`` rows (what a user's loop or a
  notebook compiles);
* ``batched``: ``mechanisms.run_trials(release, key, T, data, batched_args=True)`` under ``jax.jit`` (what a
  user's jitted batch compiles: the split of one key into T trial keys, then the trials);
* ``keys given``: ``jax.vmap(release)(keys, data)`` under ``jax.jit`` with the T trial keys an argument, as the
  study engine's cell programs receive them (split once per cell outside the program, gpuprivacy/sweeps);
* ``2nd eps``: the programs that one eager release builds at a second epsilon (1.5 times the first), after a
  release at the first on the same data: 0 when the mechanism's compiled programs take epsilon as an
  argument, so that an epsilon grid compiles them once per data size (``-``: no ``epsilon`` parameter).

Each figure is the XLA backend compile time (``/jax/core/compile/backend_compile_duration``), beside tracing
and lowering, the least of ``--repeat`` cold compiles (default 3; each run is in the JSON, ``compile_s_runs``):
one compile on a shared 2-core machine varies by 20% or more with the load, and the least is the program's
own cost, as ``timeit`` takes it. ``prog s`` is the mechanism program itself, the jitted release (what the
0.5 s target is about);
``other s`` sums the other programs its first call compiles while tracing, with their count: the release's
guarantee computed on the host (the Gaussian selection mechanisms' float64 quadrature kernel, compiled once per
process for every parameter set, then reused), key handling and small eager operations on constants. The baseline, compiled in
the same run, is the floor of XLA:CPU: a program of one ``jax.random.uniform`` draw and a sort of ``n``
values. The ratio column is compile time / the 0.5 s target (<= 1 meets it).

    python experiments/bench_compile.py --quick          # n = 200, T = 64, the least of 3 compiles
    python experiments/bench_compile.py                  # n = 1000, T = 1000
    python experiments/bench_compile.py --only piecewise-laplace-median private-median --json
"""

from __future__ import annotations

import argparse
import collections
import datetime
import inspect
import json
import pathlib
import platform
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import load_average  # noqa: E402
from bench_sweepables import FIXED_N, MIN_N, PARAMS, trial_data  # noqa: E402

from gpuprivacy import mechanisms  # noqa: E402
# The sweepables' release functions have no public accessor; this client reads the engine's table, as
# bench_sweepables.py does.
from gpuprivacy.sweeps._mechanisms import builtin_sweepables  # noqa: E402

TARGET_S = 0.5
MODES = {"quick": {"n": 200, "trials": 64}, "default": {"n": 1000, "trials": 1000}}

_EVENTS = collections.defaultdict(lambda: [0.0, 0])
_BY_PROGRAM = collections.defaultdict(float)  # backend compile seconds by jitted function name


def _listener(event, duration, **kwargs):
    if event.startswith("/jax/core/compile/"):
        _EVENTS[event.rsplit("/", 1)[-1]][0] += duration
        _EVENTS[event.rsplit("/", 1)[-1]][1] += 1
        if event == "/jax/core/compile/backend_compile_duration":
            _BY_PROGRAM[kwargs.get("fun_name", "?")] += duration


jax.monitoring.register_event_duration_secs_listener(_listener)


REPEAT = 3


def compiled(fn, *args, repeat: int = REPEAT) -> dict:
    """The first call of ``fn(*args)`` made ``repeat`` times cold: the call whose own program compiled fastest,
    with every call's compile time of that program (``compile_s_runs``). The other programs are the first
    call's: later calls may find them in the library's own caches (compiled accounting kernels), which
    ``jax.clear_caches()`` leaves."""
    runs = [_first_call(fn, *args) for _ in range(repeat)]
    best = min(runs, key=lambda run: run["compile_s"])
    first = runs[0]
    return {**best, "other_compile_s": first["other_compile_s"], "other_programs": first["other_programs"],
            "total_compile_s": best["compile_s"] + first["other_compile_s"],
            "compile_s_runs": [run["compile_s"] for run in runs]}


def _first_call(fn, *args) -> dict:
    """The compile events of the first call of ``fn(*args)`` (cold: in-memory caches cleared)."""
    jax.clear_caches()
    _EVENTS.clear()
    _BY_PROGRAM.clear()
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    wall = time.perf_counter() - start
    backend = _EVENTS["backend_compile_duration"]
    name = f"jit({fn.__name__})"
    if name not in _BY_PROGRAM:  # a renamed event field would otherwise read as a program compiled in 0 s
        raise RuntimeError(f"no compile event for {name} among {sorted(_BY_PROGRAM)}")
    own = _BY_PROGRAM[name]
    return {"compile_s": own, "other_compile_s": backend[0] - own, "other_programs": backend[1] - 1,
            "total_compile_s": backend[0], "programs": backend[1],
            "trace_s": _EVENTS["jaxpr_trace_duration"][0], "lower_s": _EVENTS["jaxpr_to_mlir_module_duration"][0],
            "first_call_s": wall}


def second_epsilon_programs(mech, params: dict, key, x) -> int | None:
    """Programs built by an eager release at 1.5 x epsilon after one at epsilon (module docstring)."""
    if "epsilon" not in params:
        return None
    jax.block_until_ready(mech.release(key, x, **params).value)
    before = _EVENTS["backend_compile_duration"][1]  # (a release at the same epsilon compiles nothing)
    jax.block_until_ready(mech.release(key, x, **{**params, "epsilon": 1.5 * params["epsilon"]}).value)
    return _EVENTS["backend_compile_duration"][1] - before


def floor_program(n: int, repeat: int = REPEAT) -> dict:
    def draw_and_sort(key):
        return jnp.sort(jax.random.uniform(key, (n,), jnp.float64))
    return compiled(jax.jit(draw_and_sort), jax.random.key(0), repeat=repeat)


def programs(name, mech, *, n, trials) -> tuple[int, dict, dict]:
    """``(n, params, {"single": (fn, args), "batched": (fn, args)})``: a mechanism's two programs (module
    docstring), unjitted, with the bench's parameters and data (``bench_sweepables.py``)."""
    n = max(FIXED_N.get(name, n), MIN_N.get(name, 0))
    params = dict(PARAMS[name])
    if "clip" in inspect.signature(mech.release).parameters:
        params.setdefault("clip", True)  # traced data need clip=True
    key = jax.random.key(1)
    data = trial_data(jax.random.key(2), mech.target, trials, n)

    def single_release(k, x):
        return mech.release(k, x, **params).value

    def batched_releases(k, x):
        return mechanisms.run_trials(mech.release, k, trials, x, batched_args=True, **params).value

    def keyed_releases(keys, x):
        return jax.vmap(lambda k, row: mech.release(k, row, **params).value)(keys, x)
    return n, params, {"single": (single_release, (key, data[0])), "batched": (batched_releases, (key, data)),
                       "keys given": (keyed_releases, (jax.random.split(key, trials), data))}


def measure(name, mech, *, n, trials, repeat: int = REPEAT) -> dict:
    n, params, parts = programs(name, mech, n=n, trials=trials)
    key, data = parts["batched"][1]
    row = {"mechanism": name, "n": n, "trials": trials}
    try:
        single_release, args = parts["single"]
        row["single"] = compiled(jax.jit(single_release), *args, repeat=repeat)
    except Exception as exc:  # a mechanism whose single release does not trace (host-routed)
        row["single"] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
    try:
        row["second_epsilon_programs"] = second_epsilon_programs(mech, params, key, data[0])
    except Exception as exc:  # an eager release that needs other arguments than the bench's
        row["second_epsilon_programs"] = f"{type(exc).__name__}"
    try:
        batched_releases, args = parts["batched"]
        row["batched"] = compiled(jax.jit(batched_releases), *args, repeat=repeat)
    except jax.errors.TracerArrayConversionError as exc:  # a host-routed batched hook (the private median's)
        row["batched"] = {"error": f"does not trace (host-routed?): {str(exc).splitlines()[0][:120]}",
                          "host_routed": True}
    except Exception as exc:
        row["batched"] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
    if row["batched"].get("host_routed"):
        row["keys given"] = dict(row["batched"])
    else:
        try:
            keyed_releases, args = parts["keys given"]
            row["keys given"] = compiled(jax.jit(keyed_releases), *args, repeat=repeat)
        except Exception as exc:
            row["keys given"] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
    return row


def _cell(part: dict) -> str:
    if part.get("host_routed"):
        return f"{'does not trace':>27s}"
    if "error" in part:
        return f"{'error':>6s} {'':>7s} {'':>12s}"
    other = f"{part['other_compile_s']:.2f} ({part['other_programs']})"
    return f"{part['compile_s']:6.2f} {part['compile_s'] / TARGET_S:7.2f} {other:>12s}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", help="mechanism names (default: every batched sweepable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeat", type=int, default=REPEAT,
                        help=f"cold compiles of each program; the least is reported (default {REPEAT})")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    jax.config.update("jax_enable_compilation_cache", False)
    mode = MODES["quick" if args.quick else "default"]
    table = builtin_sweepables()
    names = args.only or sorted(name for name, mech in table.items() if mech.batched)
    unknown = [name for name in names if name not in table]
    if unknown:
        print(f"unknown mechanism(s) {unknown}; choose from {sorted(table)}", file=sys.stderr)
        return 2
    floor = floor_program(mode["n"], args.repeat)
    rows = []
    if not args.json:
        print(f"baseline (XLA:CPU floor: uniform draw + sort of n = {mode['n']}): {floor['compile_s']:.3f} s, "
              f"{floor['programs']} program(s); target {TARGET_S} s per mechanism program; each the least of "
              f"{args.repeat} cold compiles")
        print(f"{'':42s} | {'single':^27s} | {'batched':^27s} | {'keys given':^27s} |")
        column = f"{'prog s':>6s} {'/target':>7s} {'other s (n)':>12s}"
        print(f"{'mechanism':36s} {'n':>5s} | {column} | {column} | {column} | {'2nd eps':>7s}")
    for name in names:
        row = measure(name, table[name], **mode, repeat=args.repeat)
        rows.append(row)
        if not args.json:
            second = row["second_epsilon_programs"]
            print(f"{name:36s} {row['n']:5d} | {_cell(row['single'])} | {_cell(row['batched'])} | "
                  f"{_cell(row['keys given'])} | {'-' if second is None else second:>7}", flush=True)
    over = [r["mechanism"] for r in rows for part in ("single", "batched")
            if r[part].get("compile_s", 0.0) > TARGET_S]
    over_keys_given = [r["mechanism"] for r in rows if r["keys given"].get("compile_s", 0.0) > TARGET_S]
    summary = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": platform.platform(), "device": jax.devices()[0].device_kind, "jax": jax.__version__,
               "load_average": load_average(), "mode": mode, "repeat": args.repeat, "baseline": floor,
               "target_s": TARGET_S, "rows": rows, "over_target": sorted(set(over)),
               "over_target_keys_given": sorted(over_keys_given)}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"over the {TARGET_S} s target (single or batched): {sorted(set(over)) or 'none'}; with the keys "
              f"given: {sorted(over_keys_given) or 'none'}; load {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
