"""The accelerator suite: bitwise canaries, then every ``experiments/bench_*.py`` on the device, in one command.

A session that is lent a GPU has little device time (15 minutes, the machine's start included), so this
script is built to be cut: it writes ``gpu_suite.json`` and ``gpu_suite_rows.md`` after every step, and
each step runs in its own process under its own time limit, so a step that hangs or fails is recorded and
the suite goes on.

    python experiments/gpu_suite.py --quick          # under 3 minutes: canaries + small benchmark sizes
    python experiments/gpu_suite.py                  # under 8 minutes: canaries + every bench_*.py --gpu
    python experiments/gpu_suite.py --out DIR        # where results go (default: $OUT, else experiments/results/gpu_suite)

On the device image (JAX with CUDA, no network)::

    pip install --no-deps -e . && XLA_PYTHON_CLIENT_PREALLOCATE=false python experiments/gpu_suite.py --quick

Canaries (the test suite's bitwise checks, run on the accelerator): jit == eager and vmap == loop for every
public release function and noise sampler, results independent of chunk size and device count, and a
subset gets bitwise the same oracle value in x and in a neighbour, and the order-statistic slot reads equal
the block path. They run with the XLA flags a user has (``--xla_gpu_deterministic_ops`` off): the engine
and the release paths use no floating-point scatter-add, the one XLA GPU operation whose result depends on
the order of atomics, so they must be bitwise reproducible without it (``docs/engine.md``). Pass
``--deterministic-ops`` to run everything with the flag on instead.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# The bitwise canaries: (test id, what it checks).
CANARIES = [
    ("tests/mechanisms/test_invariants.py::test_jit_of_vmap_equals_eager_loop", "jit == eager, vmap == loop (releases)"),
    ("tests/noise/test_invariants.py", "jit == eager, vmap == loop (noise samplers)"),
    ("tests/oracle/test_evaluate.py::test_results_do_not_depend_on_chunk_size", "chunk-size independence"),
    ("tests/oracle/test_evaluate.py::test_results_do_not_depend_on_device_count", "device-count independence"),
    ("tests/oracle/test_levels.py::test_a_subset_gets_bitwise_the_same_value_in_x_and_in_a_neighbour",
     "same subset, same value in x and a neighbour"),
    ("tests/subsets/test_families.py", "device unranking == exact Python"),
    ("tests/test_sort.py", "backend-routed sort == jnp.sort bitwise; no host callback in an accelerator program"),
    ("tests/mechanisms/test_median.py::test_jit_vmap_and_trials_equal_the_unbatched_release",
     "private median: jit, vmap, trials == unbatched"),
    ("tests/oracle/test_engine_scale.py", "order-statistic slot reads == block path; device results; plans"),
    ("tests/sweeps/test_study_engine.py::test_results_do_not_depend_on_the_chunk", "study trials: chunk independence"),
    ("tests/sweeps/test_study_engine.py::test_the_released_values_are_the_public_mechanism_s_own",
     "study trials == the public mechanism on the trial's data"),
]

# (script, arguments in quick mode, arguments in full mode, time limit quick, time limit full)
BENCHMARKS = [
    ("bench_oracle.py", ["--repeats", "2"], ["--gpu"], 60, 150),
    ("bench_privacy_wrappers.py", ["--loop-limit", "50000"], ["--gpu"], 40, 150),
    ("bench_audit.py", ["--repeats", "1"], ["--gpu"], 40, 90),
    ("bench_sandbox.py", [], ["--gpu"], 25, 40),
    ("bench_private_median.py", ["--repeats", "1"], [], 30, 60),
    ("bench_sort.py", ["--quick", "--repeats", "1"], ["--gpu", "--repeats", "2"], 60, 150),
    ("bench_piecewise_laplace.py", ["--repeats", "1"], [], 30, 60),
    ("bench_gaussian_selection.py", [], [], 30, 60),
    ("bench_blackbox_estimation.py", [], [], 30, 60),
    ("bench_sweepables.py", ["--quick"], ["--gpu"], 40, 120),
    ("bench_study.py", ["--ns", "1000", "10000", "--epsilons", "1.0", "--trials", "100000", "--skip-baseline"],
     ["--gpu", "--skip-baseline"], 90, 240),
]


def _environment(deterministic_ops):
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    flags = env.get("XLA_FLAGS", "")
    if deterministic_ops and "xla_gpu_deterministic_ops" not in flags:
        flags = (flags + " --xla_gpu_deterministic_ops=true").strip()
    env["XLA_FLAGS"] = flags
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _run(command, timeout, env):
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        status, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        status = "timeout"
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    return status, out, err, time.perf_counter() - start


def _device_info(env):
    code = ("import jax, json; d = jax.devices(); "
            "print(json.dumps({'jax': jax.__version__, 'backend': jax.default_backend(), "
            "'devices': [str(x) for x in d], 'kind': d[0].device_kind}))")
    status, out, err, _ = _run([sys.executable, "-c", code], 120, env)
    if status != 0:
        return {"error": (err or out)[-2000:]}
    return json.loads(out.strip().splitlines()[-1])


def _rows_markdown(report):
    meta = report["meta"]
    lines = [f"<!-- gpu_suite {meta['date']} {meta['device'].get('kind', '?')} jax {meta['device'].get('jax', '?')} "
             f"mode={meta['mode']} -->",
             "| step | status | seconds | key numbers |", "|---|---|---|---|"]
    for step in report["steps"]:
        lines.append(f"| {step['name']} | {step['status']} | {step['seconds']:.1f} | {step.get('summary', '')} |")
    return "\n".join(lines) + "\n"


def _write(report, out_dir):
    (out_dir / "gpu_suite.json").write_text(json.dumps(report, indent=1, default=str))
    (out_dir / "gpu_suite_rows.md").write_text(_rows_markdown(report))


def _summarise(name, payload):
    """A short line of ratios for the rows table (the JSON keeps everything)."""
    rows = payload.get("results") or payload.get("rows") or payload.get("samplers") or []
    parts = [f"ratio {payload['ratio']:.1f}x"] if isinstance(payload.get("ratio"), (int, float)) else []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and "ratio" in row:
            label = " ".join(str(row[k]) for k in ("case", "oracle", "n", "name") if k in row)
            rate = f", {row['ours_subsets_per_s']:.3g}/s" if isinstance(row.get("ours_subsets_per_s"), float) else ""
            parts.append(f"{label}: {row['ratio']:.1f}x{rate}")
    return "; ".join(parts)[:600]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="canaries and small benchmark sizes (under 3 minutes)")
    parser.add_argument("--out", default=None, help="results folder (default $OUT, else experiments/results/gpu_suite)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop starting new steps after this many seconds (default 170 quick, 470 full)")
    parser.add_argument("--deterministic-ops", action="store_true",
                        help="run with XLA_FLAGS=--xla_gpu_deterministic_ops=true (default: the flags a user has)")
    parser.add_argument("--only", default=None, help="comma-separated step names to run (e.g. canaries,bench_oracle)")
    args = parser.parse_args(argv)
    out_dir = Path(args.out or os.environ.get("OUT") or HERE / "results" / "gpu_suite")
    out_dir.mkdir(parents=True, exist_ok=True)
    budget = args.budget_s if args.budget_s is not None else (170.0 if args.quick else 470.0)
    only = set(args.only.split(",")) if args.only else None
    env = _environment(args.deterministic_ops)
    suite_start = time.perf_counter()
    report = {"meta": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "mode": "quick" if args.quick
                       else "full", "python": platform.python_version(), "xla_flags": env["XLA_FLAGS"],
                       "device": _device_info(env)}, "steps": []}
    print(f"# gpu_suite {report['meta']['mode']}: {report['meta']['device']}", flush=True)
    _write(report, out_dir)

    def left():
        return budget - (time.perf_counter() - suite_start)

    steps = [("canaries", None)] + [(b[0][:-3], b) for b in BENCHMARKS]
    for name, spec in steps:
        if only is not None and name not in only:
            continue
        if left() < 10:
            report["steps"].append({"name": name, "status": "skipped (budget)", "seconds": 0.0})
            _write(report, out_dir)
            continue
        if spec is None:
            tests = [t for t, _ in CANARIES]
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "--no-header", *tests]
            if importlib.util.find_spec("xdist") is not None:  # the canaries are compile-bound: use the host's cores
                command[4:4] = ["-n", "4"]
            timeout = min(left(), 75 if args.quick else 150)
        else:
            script, quick_args, full_args, t_quick, t_full = spec
            extra = quick_args if args.quick else full_args
            command = [sys.executable, str(HERE / script), "--json", *extra]
            timeout = min(left(), t_quick if args.quick else t_full)
        status, out, err, seconds = _run(command, timeout, env)
        step = {"name": name, "command": " ".join(command[1:]), "status": "ok" if status == 0 else str(status),
                "seconds": seconds}
        if spec is None:
            step["summary"] = (out.strip().splitlines() or [""])[-1][:300]
            step["output_tail"] = (out + err)[-4000:]
        else:
            try:
                payload = json.loads(out[out.index("{"):])
                step["result"] = payload
                step["summary"] = _summarise(name, payload)
            except ValueError:
                step["output_tail"] = (out + err)[-4000:]
                step["summary"] = "no JSON: " + (err or out).strip().splitlines()[-1][:200] if (err or out).strip() else ""
        report["steps"].append(step)
        print(f"{name:28s} {step['status']:8s} {seconds:7.1f} s  {step.get('summary', '')[:200]}", flush=True)
        _write(report, out_dir)
    report["meta"]["total_s"] = time.perf_counter() - suite_start
    _write(report, out_dir)
    print(f"# total {report['meta']['total_s']:.1f} s; results in {out_dir}", flush=True)


if __name__ == "__main__":
    main()
