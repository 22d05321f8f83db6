"""Strict test configuration (STYLE rule 24)."""

import os
import shutil
import tempfile

import jax
import numpy as np
import pytest

import gpuprivacy  # noqa: F401  (enables x64)

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

# Statistical tests fail with this probability when the code is right (STYLE rule 23).
TEST_FAILURE_RATE = 1e-6

TOL = {np.float32: 1e-6, np.float64: 1e-12}


# One persistent XLA compilation cache per test run, shared by the pytest-xdist workers and by the command-line
# runs the tests start: a program compiled once (in one module, one worker or one subprocess) is read back
# instead of compiled again after the per-module cache release below. Compiling is most of the suite's time.
# Programs under this many seconds to compile are not worth a file.
_CACHE_ENV = "GPUPRIVACY_TEST_COMPILATION_CACHE"
_MIN_COMPILE_SECONDS = "0.1"


def pytest_configure(config):
    if not hasattr(config, "workerinput") and _CACHE_ENV not in os.environ:  # the run's first process owns it
        config._gpuprivacy_compilation_cache = tempfile.mkdtemp(prefix="gpuprivacy-tests-xla-cache-")
        os.environ[_CACHE_ENV] = config._gpuprivacy_compilation_cache
    path = os.environ[_CACHE_ENV]
    os.environ["JAX_COMPILATION_CACHE_DIR"] = path  # inherited by the CLI runs of the tests
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = _MIN_COMPILE_SECONDS
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(_MIN_COMPILE_SECONDS))


def pytest_unconfigure(config):
    path = getattr(config, "_gpuprivacy_compilation_cache", None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
        os.environ.pop(_CACHE_ENV, None)


@pytest.fixture
def key():
    return jax.random.key(20261123)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Frees every compiled program after each test module.

    XLA:CPU maps a few memory regions for each compiled program. The whole suite in one process compiles
    tens of thousands of them, which passes the kernel's ``vm.max_map_count`` (65,530 on Linux), and then
    the next compilation segfaults (seen at 82% of the suite). Only caches are dropped: later modules
    recompile what they use.
    """
    yield
    from gpuprivacy.sweeps import _trials

    _trials._PROGRAMS.clear()
    jax.clear_caches()


def _sandbox_workers() -> dict[int, int]:
    """pid -> parent pid of every process running the sandbox worker (the template and its tracing children)."""
    import os

    found = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if b"_sandbox_worker.py" not in fh.read():
                    continue
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found[int(entry)] = int(fields[1])
    return found


@pytest.fixture(autouse=True)
def _no_orphaned_sandbox_process(request):
    """After every test, the only sandbox process of this run is at most one template, a child of this one.

    A tracing child is killed by its template as soon as it answers; a template dies with its engine. Anything
    else is a process we started that outlives its purpose.
    """
    yield
    import os
    import time

    from gpuprivacy.oracle import _sandbox

    workers = _sandbox_workers()
    templates = {pid for pid, parent in workers.items() if parent == os.getpid()}
    children = {pid for pid, parent in workers.items() if parent in templates}
    current = _sandbox._WORKER.process.pid if _sandbox._WORKER.process is not None else None
    stray = (templates - {current}) | children
    assert not stray, f"{request.node.nodeid} left sandbox processes behind: {sorted(stray)}"
    orphans = {pid for pid, parent in workers.items() if parent == 1}
    for _ in range(40):  # a worker whose engine just exited is reparented for the moment its SIGKILL takes
        if not orphans:
            break
        time.sleep(0.05)
        orphans = {pid for pid, parent in _sandbox_workers().items() if parent == 1}
    assert not orphans, f"orphaned sandbox workers (parent 1) after {request.node.nodeid}: {sorted(orphans)}"
