"""XLA:CPU's fusion emitters against its loop emitters: compile CPU time, run time and values of every sweepable
mechanism (issue 30, the compile-time item).

XLA:CPU compiles each fusion with its MLIR fusion emitters by default; ``XLA_FLAGS=--xla_cpu_use_fusion_emitters=false``
selects its older loop emitters. This script measures, for each mechanism of the study engine that runs batched,
with the parameters and data of ``bench_sweepables.py``, the two programs of ``bench_compile.py`` (``single``: one
jitted release on one dataset; ``batched``: ``run_trials`` over T datasets under ``jax.jit``), each setting in a
process of its own (the flag is read once, when XLA starts):

* compile: the process CPU seconds of ``lowered.compile()`` (every compiler thread; on a busy machine, such as
  the 2-core CI where two test workers compile at once, CPU time is what a compile costs), the least of
  ``--repeat`` cold compiles, and the wall seconds of that compile;
* run: the steady-state wall time of the compiled program, the best of 5 calls;
* values: whether the two settings release the same values bitwise.

Ours is the loop emitters, which importing gpuprivacy asks for on a CPU (``gpuprivacy/_config.py``); the baseline
is XLA's default, the fusion emitters. Both are set explicitly in ``XLA_FLAGS`` (``=false`` and ``=true``), since an
import with no such option would ask for the loop emitters in either process. Ratios are ours / the baseline,
loop / fusion (below 1: the loop emitters are cheaper). The values differ in the last bits where a fusion computes
a transcendental function (``exp``) otherwise (BENCHMARKS.md, "XLA:CPU emitters").

    python experiments/bench_cpu_emitters.py --quick     # n = 200, T = 64, the least of 3 compiles
    python experiments/bench_cpu_emitters.py             # n = 1000, T = 1000
    python experiments/bench_cpu_emitters.py --only piecewise-laplace smooth-sensitivity-median --json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
LOOP_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
SETTINGS = {"fusion": "--xla_cpu_use_fusion_emitters=true", "loop": LOOP_EMITTERS}
MODES = {"quick": {"n": 200, "trials": 64}, "default": {"n": 1000, "trials": 1000}}
RUN_CALLS = 5


def _child(names, mode, repeat, out):
    """Measures every program under this process's XLA_FLAGS; writes ``out.json`` and ``out.npz``."""
    sys.path.insert(0, str(HERE))
    import jax
    import numpy as np

    from bench_compile import programs
    from gpuprivacy.sweeps._mechanisms import builtin_sweepables

    jax.config.update("jax_enable_compilation_cache", False)
    table = builtin_sweepables()
    rows, values = [], {}
    for name in names:
        n, _, parts = programs(name, table[name], **mode)
        for part, (fn, args) in parts.items():
            fn = jax.jit(fn)
            try:
                fn.lower(*args)
            except Exception as exc:  # a host-routed release (the private median's batched driver) does not trace
                rows.append({"mechanism": name, "n": n, "part": part, "error": f"{type(exc).__name__}"})
                continue
            best = None
            for _ in range(repeat):
                jax.clear_caches()
                lowered = fn.lower(*args)
                cpu, wall = time.process_time(), time.perf_counter()
                compiled = lowered.compile()
                run = (time.process_time() - cpu, time.perf_counter() - wall)
                best = run if best is None or run < best else best
            values[f"{name}/{part}"] = np.asarray(compiled(*args))
            times = []
            for _ in range(RUN_CALLS):
                start = time.perf_counter()
                jax.block_until_ready(compiled(*args))
                times.append(time.perf_counter() - start)
            rows.append({"mechanism": name, "n": n, "part": part, "compile_cpu_s": best[0], "compile_wall_s": best[1],
                         "run_s": min(times)})
    pathlib.Path(out + ".json").write_text(json.dumps(rows))
    np.savez(out + ".npz", **values)


def _measure(setting, names, mode, repeat, scratch):
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_cpu_use_fusion_emitters" not in f)
    env = {**os.environ, "XLA_FLAGS": f"{flags} {SETTINGS[setting]}".strip()}
    out = os.path.join(scratch, setting)
    command = [sys.executable, __file__, "--child", out, "--repeat", str(repeat), "--only", *names]
    if mode is MODES["quick"]:
        command.append("--quick")
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the {setting} emitters' run failed:\n{proc.stderr[-3000:]}")
    import numpy as np

    with np.load(out + ".npz") as arrays:
        return json.loads(pathlib.Path(out + ".json").read_text()), {k: arrays[k] for k in arrays.files}


def _geomean(ratios):
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="n = 200, T = 64")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="mechanisms (default: every batched sweepable)")
    parser.add_argument("--repeat", type=int, default=3, help="cold compiles of each program; the least is kept")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    mode = MODES["quick" if args.quick else "default"]
    if args.child:
        _child(args.only, mode, args.repeat, args.child)
        return 0
    sys.path.insert(0, str(HERE))
    import numpy as np

    from _timing import load_average
    from bench_sweepables import PARAMS
    from gpuprivacy.sweeps._mechanisms import builtin_sweepables

    table = builtin_sweepables()
    names = args.only or sorted(name for name, mech in table.items() if mech.batched and name in PARAMS)
    unknown = [name for name in names if name not in table or name not in PARAMS]
    if unknown:
        print(f"unknown mechanism(s) {unknown}; choose from {sorted(set(table) & set(PARAMS))}", file=sys.stderr)
        return 2
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-cpu-emitters-") as scratch:
        (fusion, fusion_values), (loop, loop_values) = (_measure(s, names, mode, args.repeat, scratch)
                                                         for s in ("fusion", "loop"))
    rows = []
    for ours, base in zip(fusion, loop):
        row = {"mechanism": ours["mechanism"], "n": ours["n"], "part": ours["part"]}
        if "error" in ours or "error" in base:
            rows.append({**row, "error": ours.get("error") or base.get("error")})
            continue
        key = f"{ours['mechanism']}/{ours['part']}"
        same = key in fusion_values and np.array_equal(fusion_values[key], loop_values[key], equal_nan=True)
        rows.append({**row, "fusion": ours, "loop": base, "same_values": bool(same),
                     "compile_cpu_ratio": base["compile_cpu_s"] / ours["compile_cpu_s"],
                     "run_ratio": base["run_s"] / ours["run_s"]})
    timed = [r for r in rows if "error" not in r]
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.platform(), "cpus": os.cpu_count(), "load_average": [load_before, load_average()],
        "mode": mode, "repeat": args.repeat, "baseline_flag": LOOP_EMITTERS, "rows": rows,
        "compile_cpu_s": {s: sum(r[s]["compile_cpu_s"] for r in timed) for s in ("fusion", "loop")},
        "compile_cpu_geomean_ratio": _geomean([r["compile_cpu_ratio"] for r in timed]),
        "run_geomean_ratio": _geomean([r["run_ratio"] for r in timed]),
        "values_differ": [f"{r['mechanism']}/{r['part']}" for r in timed if not r["same_values"]],
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"ours: XLA:CPU loop emitters ({LOOP_EMITTERS}); baseline: XLA's default fusion emitters; n = {mode['n']}, "
          f"T = {mode['trials']}; compile: least of {args.repeat} cold compiles, CPU s (wall s); run: best of "
          f"{RUN_CALLS}; ratio = loop / fusion")
    print(f"{'mechanism':36s} {'n':>5s} {'part':8s} | {'fusion cpu (wall)':>18s} {'loop cpu (wall)':>18s} "
          f"{'ratio':>6s} | {'fusion ms':>9s} {'loop ms':>9s} {'ratio':>6s} | values")
    for r in rows:
        head = f"{r['mechanism']:36s} {r['n']:5d} {r['part']:8s} |"
        if "error" in r:
            print(f"{head} {'does not trace (' + r['error'] + ')':>45s}")
            continue
        f, b = r["fusion"], r["loop"]
        print(f"{head} {f['compile_cpu_s']:9.3f} ({f['compile_wall_s']:5.2f}) {b['compile_cpu_s']:9.3f} "
              f"({b['compile_wall_s']:5.2f}) {r['compile_cpu_ratio']:6.2f} | {f['run_s'] * 1e3:9.2f} "
              f"{b['run_s'] * 1e3:9.2f} {r['run_ratio']:6.2f} | {'same' if r['same_values'] else 'DIFFER'}")
    cpu = summary["compile_cpu_s"]
    print(f"compile CPU: fusion {cpu['fusion']:.1f} s, loop {cpu['loop']:.1f} s (ratio "
          f"{cpu['loop'] / cpu['fusion']:.2f}; geomean {summary['compile_cpu_geomean_ratio']:.2f}); run geomean "
          f"ratio {summary['run_geomean_ratio']:.2f}; values differ: {summary['values_differ'] or 'none'}; "
          f"load {summary['load_average']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
