"""Several reproduction studies at once, each in a process of its own.

On a CPU most of a quick study is compiling XLA programs and Python (planning, mpmath bounds, plots), which
keeps one core busy while the other idles: ``reproduce all --quick`` on 2 cores ran its six studies one after
the other in 136 s (189 s of CPU time). Run side by side, two at a time, they finish in the time of the
CPU work shared over both cores. Each study runs in a fresh Python process
(``python -m gpuprivacy.reproduce._worker``), not a thread: the studies' NumPy, mpmath and tracing hold the
GIL, and a process keeps each study's JAX state (caches, counters) its own, as when run alone. A study's
numbers do not depend on where it runs: the same seeds, the same programs (the same result files: tested
on one study, and on all of them by ``experiments/bench_reproduce.py``).

No process outlives the caller: each worker reads its standard input, a pipe whose other end only this process
holds, and exits at once when it reaches end-of-file, which the kernel delivers however this process ends
(an exception, Ctrl-C, ``kill -9``); a worker still running when :func:`run_in_processes` leaves is killed and
reaped.

An accelerator runs one study at a time (:func:`default_jobs`): a second process would claim the device's
memory a first one holds.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple, Sequence

# JAX settings a worker takes from the caller, so that its programs are the caller's (64-bit values) and the
# persistent compilation cache is the caller's.
_JAX_SETTINGS = ("jax_enable_x64", "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                 "jax_compilation_cache_max_size", "jax_platforms")


class StudyFailed(RuntimeError):
    """A study's process ended with an error; the message names the study and ends with its output."""


def default_jobs(num_studies: int) -> int:
    """Studies run at once when the caller does not say: one per CPU core on a host whose JAX devices are CPUs,
    one with an accelerator (a second process would claim the device memory the first holds)."""
    import jax

    if jax.default_backend() != "cpu":
        return 1
    return max(1, min(num_studies, os.cpu_count() or 1))


class _Running(NamedTuple):
    name: str
    process: subprocess.Popen
    stdout: object
    stderr: object
    started: float


def _spec(name: str, module: str, quick: bool, out_dir: pathlib.Path, progress: bool) -> str:
    import jax

    settings = {key: getattr(jax.config, key) for key in _JAX_SETTINGS if getattr(jax.config, key, None) is not None}
    return json.dumps({"name": name, "module": module, "quick": quick, "out_dir": str(out_dir),
                       "progress": progress, "jax": settings})


def _start(name: str, module: str, quick: bool, out_dir: pathlib.Path, progress: bool) -> _Running:
    stdout, stderr = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    # The worker imports what this process can (gpuprivacy itself, the module registering the study): its path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen([sys.executable, "-m", "gpuprivacy.reproduce._worker",
                                _spec(name, module, quick, out_dir, progress)],
                               stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, close_fds=True, env=env)
    return _Running(name, process, stdout, stderr, time.perf_counter())


def _output(stream) -> str:
    stream.seek(0)
    return stream.read().decode("utf-8", errors="replace")


def _stop(running: list[_Running]) -> None:
    for run in running:
        if run.process.poll() is None:
            run.process.kill()
    for run in running:
        run.process.wait()
        if run.process.stdin is not None:
            run.process.stdin.close()
        run.stdout.close()
        run.stderr.close()


def run_in_processes(names: Sequence[str], modules: Sequence[str], *, quick: bool, out_dir: pathlib.Path,
                     jobs: int, progress: bool) -> None:
    """Runs study ``names[i]`` (registered by importing ``modules[i]``) in worker processes, ``jobs`` at a time,
    in the order given; each writes ``out_dir/<name>/`` as :func:`gpuprivacy.reproduce.reproduce` does.

    Each worker's standard output and error are passed on when it finishes (whole, not interleaved). Every
    study runs even if one fails; then :class:`StudyFailed` names the failed ones with their output.
    """
    queue = list(zip(names, modules))
    running: list[_Running] = []
    failed: list[str] = []
    finished = 0
    try:
        while queue or running:
            while queue and len(running) < jobs:
                name, module = queue.pop(0)
                running.append(_start(name, module, quick, out_dir, progress))
                if progress:
                    print(f"reproduce: started {name}", file=sys.stderr, flush=True)
            time.sleep(0.05)
            for run in [r for r in running if r.process.poll() is not None]:
                running.remove(run)
                finished += 1
                out, err = _output(run.stdout), _output(run.stderr)
                _stop([run])
                sys.stdout.write(out)
                sys.stdout.flush()
                sys.stderr.write(err)
                code = run.process.returncode
                if progress or code:
                    state = "done" if code == 0 else f"FAILED (exit status {code})"
                    print(f"reproduce: {run.name} {state} in {time.perf_counter() - run.started:.1f} s "
                          f"({finished} of {len(names)})", file=sys.stderr, flush=True)
                if code:
                    tail = "\n".join((out + err).strip().splitlines()[-40:])
                    failed.append(f"study {run.name!r} failed in its process (exit status {code}); its last "
                                  f"output:\n{tail}")
    finally:
        _stop(running)
    if failed:
        raise StudyFailed("\n\n".join(failed) + "\n\nRun the failed studies alone (jobs=1, or --jobs 1) to debug "
                          "them in this process; the other studies' folders are written.")
