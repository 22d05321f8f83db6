"""Study engine vs a hand-written loop over cells that jits each cell separately (same run, same trials).

The study: 4 median mechanisms (piecewise Laplace, inverse sensitivity, exponential mechanism, smooth
sensitivity) x len(ns) sample sizes x len(epsilons) x 3 data laws (normal, Cauchy, Laplace), ``trials`` per
cell, one TOML-shaped config run by :func:`gpuprivacy.sweeps.run_sweep`. The baseline is what a researcher
writes without the engine: for each cell, ``jax.jit(jax.vmap(trial))`` with the cell's parameters closed over,
run on the same trial keys (so it compiles once per cell). Prints both wall times, the ratio and the number of
programs each compiled.

    python experiments/bench_study.py --quick        # 4 x 3 x 2 x 3 cells, 1000 trials (minutes on 2 cores)
    python experiments/bench_study.py                # the issue's 4 x 6 x 4 x 3 cells at 10^4 trials
    python experiments/bench_study.py --gpu          # 10^5 trials per cell

``--split`` also times where the engine's run goes: compiling, drawing (and sorting) the datasets, each
mechanism's programs, and the rest (planning, guarantees, metrics, writing rows). The mechanism programs
are the work that depends on each cell's epsilon, which the baseline must do as well, so
``baseline / mechanism programs`` bounds the ratio of an engine that cost nothing else (printed as
``bound_free_engine``). The split blocks on each program call (the engine does too: it copies each chunk's
results to the host before the next).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import load_average, mode_sizes  # noqa: E402

from gpuprivacy import datasets, sweeps  # noqa: E402
from gpuprivacy.mechanisms import batched_implementation  # noqa: E402
from gpuprivacy.sweeps import _trials  # noqa: E402

MECHANISMS = ["piecewise-laplace-median", "inverse-sensitivity-median", "exponential-mechanism-median",
              "smooth-sensitivity-median"]
LAWS = ["normal", "cauchy", "laplace"]
MODES = {
    "quick": {"ns": [100, 300, 1000], "epsilons": [0.5, 2.0], "trials": 1000},
    "default": {"ns": [50, 100, 200, 500, 1000, 2000], "epsilons": [0.25, 0.5, 1.0, 2.0], "trials": 10_000},
    "gpu": {"ns": [50, 100, 200, 500, 1000, 2000], "epsilons": [0.25, 0.5, 1.0, 2.0], "trials": 100_000},
}
PARAMS = {"lower": -50.0, "upper": 50.0, "clip": True}


FIVE_MEDIANS = pathlib.Path(__file__).resolve().parent / "configs" / "five_medians.toml"
FIVE_MEDIAN_MODES = {  # the config's grid (3 laws x 3 epsilons x 5 mechanisms) at these n and trials
    "quick": {"ns": [100, 1000, 10000], "trials": 100},
    "default": {"ns": [100, 1000, 10000], "trials": 1000},
    "gpu": {"ns": [100, 1000, 10000], "trials": 100_000},
}


def five_medians_config(ns, trials, laws=LAWS):
    """experiments/configs/five_medians.toml with its n axis, trials and laws replaced."""
    import tomllib

    cfg = tomllib.loads(FIVE_MEDIANS.read_text())
    cfg["trials"] = trials
    cfg["dataset"] = {**cfg["dataset"], "n": list(ns), "name": list(laws)}
    return cfg


def config(ns, epsilons, trials, laws=LAWS):
    return {"name": "bench-study", "seed": 1, "trials": trials,
            "mechanism": {"name": MECHANISMS, "epsilon": epsilons, **PARAMS},
            "dataset": {"name": list(laws), "n": ns}}


def baseline(cells):
    """One jitted, vmapped program per cell, parameters closed over: the loop a user writes by hand (in chunks
    of the size the engine would give that cell alone, so that both stay within the same memory budget)."""
    mechanisms = sweeps._mechanisms.builtin_sweepables()
    compiled, compile_s = 0, 0.0
    start = time.perf_counter()
    for cell in cells:
        mech = mechanisms[cell.mechanism].release
        dist = datasets.distribution(cell.dataset)
        n, eps = cell.dataset_params["n"], cell.mechanism_params["epsilon"]

        def trial(key, mech=mech, dist=dist, n=n, eps=eps):
            data_key, mechanism_key = jax.random.split(key)
            x = dist.draw(data_key, (n,))
            return mech(mechanism_key, x, epsilon=eps, **PARAMS).value

        keys = jax.random.split(sweeps.cell_key(cell.seed, cell.cell_id), cell.num_trials)
        chunk = _trials.plan_chunk(n, cell.num_trials, 1, jax.devices()[0].platform)
        # The last chunk is padded to the full size (its extra trials dropped), as the engine does, so the cell
        # compiles one program: a jit called on a shorter last chunk would compile a second one.
        pad = (-cell.num_trials) % chunk
        keys = jnp.concatenate([keys, keys[:pad]]) if pad else keys
        t0 = time.perf_counter()
        run = jax.jit(jax.vmap(trial)).lower(keys[:chunk]).compile()  # what jit does on the first call, timed
        compile_s += time.perf_counter() - t0
        compiled += 1
        for s in range(0, cell.num_trials, chunk):
            np.asarray(run(keys[s:s + chunk]))
    return time.perf_counter() - start, compiled, compile_s


def smart_baseline(cells, params_of=lambda cell: {**PARAMS, **cell.mechanism_params}):
    """The smart hand loop: epsilon a traced argument, so one compiled program per mechanism and n.

    What a researcher who knows JAX writes without the engine: for each (mechanism, n), one
    ``jax.jit(jax.vmap(trial))`` taking the trial keys, the datasets and epsilon; per (law, n) one jitted draw;
    then a loop over the cells (law x epsilon) that draws each cell's datasets and runs the program on them, in
    chunks of the size the engine would give the cell. A mechanism that cannot be vmapped (the private median,
    host-routed) runs through its public batched path, :func:`gpuprivacy.mechanisms.run_trials` with
    ``batched_args=True``, on the same drawn datasets.
    """
    mechanisms = sweeps._mechanisms.builtin_sweepables()
    programs, compiled, compile_s = {}, 0, 0.0

    def program(key, build, *example):
        nonlocal compiled, compile_s
        if key not in programs:
            t0 = time.perf_counter()
            programs[key] = jax.jit(build()).lower(*example).compile()
            compile_s += time.perf_counter() - t0
            compiled += 1
        return programs[key]

    start = time.perf_counter()
    for cell in cells:
        mech = mechanisms[cell.mechanism]
        dist = datasets.distribution(cell.dataset)
        n = cell.dataset_params["n"]
        params = dict(params_of(cell))
        eps = params.pop("epsilon", None)  # None: the nonprivate baseline, which takes no epsilon
        chunk = _trials.plan_chunk(n, cell.num_trials, 1, jax.devices()[0].platform)
        keys = jax.random.split(sweeps.cell_key(cell.seed, cell.cell_id), cell.num_trials)
        pad = (-cell.num_trials) % chunk  # pad the last chunk (one program per shape), as the engine does
        keys = jnp.concatenate([keys, keys[:pad]]) if pad else keys
        data_keys, mech_keys = jax.vmap(jax.random.split, out_axes=1)(keys)
        draw = program(("draw", cell.dataset, n, chunk),
                       lambda dist=dist, n=n: jax.vmap(lambda k: dist.draw(k, (n,))), data_keys[:chunk])
        hook = batched_implementation(mech.release)
        if hook is None:
            static = tuple(sorted(params.items()))
            traced = {} if eps is None else {"epsilon": eps}
            run = program(("mechanism", cell.mechanism, static, n, chunk),
                          lambda rel=mech.release, p=params: jax.vmap(
                              lambda k, x, e: rel(k, x, **e, **p).value, in_axes=(0, 0, None)),
                          mech_keys[:chunk], jax.ShapeDtypeStruct((chunk, n), jnp.float64),
                          {k: jnp.float64(v) for k, v in traced.items()})
        for s in range(0, cell.num_trials, chunk):
            t0 = time.perf_counter()
            x = jax.block_until_ready(draw(data_keys[s:s + chunk]))
            t1 = time.perf_counter()
            if hook is None:
                np.asarray(run(mech_keys[s:s + chunk], x, {k: jnp.float64(v) for k, v in traced.items()}))
            else:
                np.asarray(hook(mech_keys[s:s + chunk], x, batched_args=True, epsilon=eps, **params).value)
            SMART_SPLIT["drawing"] = SMART_SPLIT.get("drawing", 0.0) + t1 - t0
            SMART_SPLIT[cell.mechanism] = SMART_SPLIT.get(cell.mechanism, 0.0) + time.perf_counter() - t1
    return time.perf_counter() - start, compiled, compile_s


SMART_SPLIT: dict = {}  # seconds of the smart loop's draws and of each mechanism's calls (compiling excluded)

# Every XLA compile of the process, the programs each side builds itself and those compiled inside the calls it
# makes (the private median's host-routed driver jits its own steps, and a release jits its guarantee): JAX
# reports each backend compile's duration. Each side starts with JAX's in-memory caches cleared, so that
# neither runs on programs the other compiled.
_XLA_COMPILE = {"seconds": 0.0, "count": 0}


def _on_duration(event: str, duration: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _XLA_COMPILE["seconds"] += duration
        _XLA_COMPILE["count"] += 1


jax.monitoring.register_event_duration_secs_listener(_on_duration)


def _fresh_side() -> None:
    """Clears JAX's compiled-program caches and the compile counters before one side of the comparison."""
    jax.clear_caches()
    _trials._PROGRAMS.clear()
    _XLA_COMPILE.update(seconds=0.0, count=0)


class _EngineSplit:
    """Times the engine's dataset draws and mechanism programs while active (wraps its program builders;
    each call blocks until its results are ready). Its compiling is in the sweep summary."""

    def __enter__(self):
        self.seconds = {"drawing": 0.0}
        self._saved = _trials._draw_program, _trials._mechanism_program, _trials._hook_release
        draw_program, mechanism_program = self._saved[:2]

        def timed(part, program):
            def run(*args):
                start = time.perf_counter()
                out = jax.block_until_ready(program(*args))
                self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - start
                return out
            return run

        def draw(*args, **kwargs):
            program, seconds = draw_program(*args, **kwargs)
            return timed("drawing", program), seconds

        def mechanism(mech, *args, **kwargs):
            program, seconds = mechanism_program(mech, *args, **kwargs)
            return timed(mech.name, program), seconds

        hook_release = _trials._hook_release

        def hooked(hook, params, pieces):  # a host-routed mechanism's own driver (the private median)
            start = time.perf_counter()
            out = hook_release(hook, params, pieces)
            name = getattr(hook, "__name__", "hook")
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            return out

        _trials._draw_program, _trials._mechanism_program, _trials._hook_release = draw, mechanism, hooked
        return self

    def __exit__(self, *exc):
        _trials._draw_program, _trials._mechanism_program = self._saved[:2]
        _trials._hook_release = self._saved[2]

    def result(self, total, compiling, baseline):
        mechanisms = sum(v for k, v in self.seconds.items() if k != "drawing")
        split = {"compiling": round(compiling, 2), **{k: round(v, 2) for k, v in self.seconds.items()}}
        split["rest"] = round(total - compiling - sum(self.seconds.values()), 2)
        return {"split_s": split, "mechanism_programs_s": round(mechanisms, 2),
                "bound_free_engine": round(baseline / mechanisms, 2) if baseline == baseline else None}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--ns", type=int, nargs="+")
    parser.add_argument("--epsilons", type=float, nargs="+")
    parser.add_argument("--trials", type=int)
    parser.add_argument("--laws", nargs="+", default=LAWS, choices=LAWS, help="data laws (default: all three)")
    parser.add_argument("--study", choices=["five-medians", "four-medians"], default="five-medians",
                        help="five-medians: experiments/configs/five_medians.toml (default); four-medians: the grid "
                             "of earlier rounds (ns x epsilons of the mode)")
    parser.add_argument("--baseline", choices=["smart", "per-cell", "both"], default="smart",
                        help="smart: epsilon traced, one program per mechanism and n (default); per-cell: one "
                             "program per cell")
    parser.add_argument("--skip-baseline", action="store_true", help="time the engine only")
    parser.add_argument("--split", action="store_true", help="time the engine's parts (module docstring)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.study == "five-medians":
        mode, sizes = mode_sizes(args, FIVE_MEDIAN_MODES)
        cfg = five_medians_config(sizes["ns"], sizes["trials"], args.laws)
        sizes["epsilons"] = cfg["mechanism"][0]["epsilon"]
        params_of = lambda cell: dict(cell.mechanism_params)  # noqa: E731  (the config's own parameters)
    else:
        mode, sizes = mode_sizes(args, MODES)
        cfg = config(sizes["ns"], sizes["epsilons"], sizes["trials"], args.laws)
        params_of = lambda cell: {**PARAMS, **cell.mechanism_params}  # noqa: E731
    cells = sweeps.expand_sweep(cfg)
    load_before = load_average()
    split = _EngineSplit() if args.split else contextlib.nullcontext()
    _fresh_side()
    with tempfile.TemporaryDirectory() as tmp, split:
        start = time.perf_counter()
        summary = sweeps.run_sweep(cfg, results_path=pathlib.Path(tmp) / "r.jsonl", progress=True)
        ours = time.perf_counter() - start
    ours_programs, compile_ours = summary.num_programs_compiled, summary.compile_s
    xla_ours = dict(_XLA_COMPILE)
    skipped = (float("nan"), 0, float("nan"))
    _fresh_side()
    smart = skipped if args.skip_baseline or args.baseline == "per-cell" else smart_baseline(cells, params_of)
    xla_smart = dict(_XLA_COMPILE)
    per_cell = skipped
    if not args.skip_baseline and args.baseline != "smart":
        per_cell = baseline(cells) if args.study == "four-medians" else skipped
    base, base_programs, base_compile = smart if args.baseline != "per-cell" else per_cell
    result = {
        "benchmark": "study", "study": args.study, "baseline": args.baseline, "mode": mode, "cells": len(cells),
        "trials_per_cell": sizes["trials"], "ns": sizes["ns"], "epsilons": sizes["epsilons"],
        "mechanisms": sorted({c.mechanism for c in cells}), "laws": args.laws,
        "programs_loaded_ours": summary.num_programs_loaded,
        **({"per_cell_baseline_s": round(per_cell[0], 2), "per_cell_ratio": round(per_cell[0] / ours, 2)}
           if per_cell[0] == per_cell[0] and args.baseline == "both" else {}),
        "ours_s": round(ours, 2), "ours_programs": ours_programs,
        "baseline_s": round(base, 2), "baseline_programs": base_programs,
        "ratio": round(base / ours, 2) if base == base else None,
        "compile_s_ours": round(compile_ours, 2), "compile_s_baseline": round(base_compile, 2),
        "xla_compiles_ours": xla_ours["count"], "xla_compile_s_ours": round(xla_ours["seconds"], 2),
        "xla_compiles_smart": xla_smart["count"], "xla_compile_s_smart": round(xla_smart["seconds"], 2),
        "ratio_without_compiling": (round((base - base_compile) / (ours - compile_ours), 2)
                                    if base == base else None),
        **(split.result(ours, compile_ours, base) if args.split else {}),
        "smart_split_s": {k: round(v, 2) for k, v in SMART_SPLIT.items()},
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {jax.devices()[0].device_kind}",
        "load_before": load_before, "load_after": load_average(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "jax": jax.__version__,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"study {len(cells)} cells x {sizes['trials']} trials ({mode}):")
        print(f"  engine   {ours:9.2f} s  ({ours_programs} programs compiled in {compile_ours:.1f} s)")
        kind = "one per mechanism and n" if args.baseline != "per-cell" else "one per cell"
        print(f"  baseline {base:9.2f} s  ({base_programs} programs, {kind}, compiled in {base_compile:.1f} s)")
        print(f"  ratio    {result['ratio']}x   (without compiling: {result['ratio_without_compiling']}x)   "
              f"load {load_before} -> {result['load_after']}")
        print(f"  every XLA compile of each side (its programs and those inside its calls): engine "
              f"{xla_ours['count']} in {xla_ours['seconds']:.1f} s, smart loop {xla_smart['count']} in "
              f"{xla_smart['seconds']:.1f} s")
        if args.split:
            parts = ", ".join(f"{k} {v} s" for k, v in result["split_s"].items())
            print(f"  engine split: {parts}")
            print(f"  an engine that cost nothing but the mechanism programs: {result['bound_free_engine']}x")
        if SMART_SPLIT:
            parts = ", ".join(f"{k} {v:.2f} s" for k, v in SMART_SPLIT.items())
            print(f"  smart loop split (its compiles apart): {parts}")
    return result


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
