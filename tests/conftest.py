"""Strict test configuration (STYLE rule 24)."""

import gc
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
# Every program is written, however small: the suite compiles about 7,300 programs of under 0.1 s each (eager
# operations on constants, key splits: 15-25 ms apiece), again in each module after the release below, and
# reading one back costs less (the `-m "not slow"` set: 93-94 s against 98 s with a 0.1 s floor, 2026-11-30).
_CACHE_ENV = "GPUPRIVACY_TEST_COMPILATION_CACHE"
_MIN_COMPILE_SECONDS = "0"


def pytest_configure(config):
    if not hasattr(config, "workerinput") and _CACHE_ENV not in os.environ:  # the run's first process owns it
        config._gpuprivacy_compilation_cache = tempfile.mkdtemp(prefix="gpuprivacy-tests-xla-cache-")
        os.environ[_CACHE_ENV] = config._gpuprivacy_compilation_cache
    path = os.environ[_CACHE_ENV]
    os.environ["JAX_COMPILATION_CACHE_DIR"] = path  # inherited by the CLI runs of the tests
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = _MIN_COMPILE_SECONDS
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(_MIN_COMPILE_SECONDS))


# The test modules that took over 13 s on the 2-core development VM when they were listed, with their worker wall
# seconds in a profiled run of the whole suite (`pytest -n 2`, 2026-11-30; 23 of them now take 5-13 s there, and
# stay listed so that the inner loop stays as it is): they compile many programs or run statistical studies or
# command-line runs. They are marked ``slow``, so ``pytest -m "not slow"`` is the inner loop (the rest, about
# 90 s); CI runs everything. A module not listed here counts as fast: list a new one here if it takes more than
# 13 s. The seconds order the run (below), so that it ends on short modules.
SLOW_MODULES = {
    "tests/mechanisms/test_smooth_sensitivity_fast.py": 193,
    "tests/audit/test_audit.py": 165,
    "tests/sweeps/test_study_engine.py": 116,
    "tests/notebooks/test_notebooks.py": 99,
    "tests/mechanisms/test_instance_optimal.py": 74,
    "tests/mechanisms/test_invariants.py": 67,
    "tests/audit/test_audit_engine.py": 62,
    "tests/reproduce/test_piecewise_laplace_study.py": 62,
    "tests/reproduce/test_private_median_study.py": 55,
    "tests/oracle/test_engine_scale.py": 50,
    "tests/sweeps/test_cell_blocks.py": 50,
    "tests/mechanisms/test_fail_closed.py": 45,
    "tests/cli/test_sweep_plan_and_rerun.py": 40,
    "tests/oracle/test_evaluate.py": 40,
    "tests/mechanisms/test_wrappers.py": 37,
    "tests/sweeps/test_every_mechanism_sweepable.py": 37,
    "tests/mechanisms/test_median.py": 35,
    "tests/mechanisms/test_order_statistic_levels.py": 12,
    "tests/test_threefry.py": 15,
    "tests/oracle/test_confinement.py": 31,
    "tests/test_doctests.py": 31,
    "tests/sweeps/test_exact_errors.py": 31,
    "tests/mechanisms/test_median_density.py": 28,
    "tests/subsets/test_powerset_scale.py": 26,
    "tests/reproduce/test_gaussian_selection_study.py": 26,
    "tests/mechanisms/test_selection_batched.py": 23,
    "tests/accounting/test_gaussian_selection.py": 20,
    "tests/test_sort.py": 20,
    "tests/oracle/test_isolation.py": 20,
    "tests/mechanisms/test_wrappers_properties.py": 19,
    "tests/bad_inputs/test_traced_data.py": 18,
    "tests/bad_inputs/test_cli_and_sweep_errors.py": 18,
    "tests/mechanisms/test_blackbox.py": 17,
    "tests/mechanisms/test_wrappers_applications.py": 16,
    "tests/reproduce/test_privacy_wrappers_study.py": 16,
    "tests/mechanisms/test_median_convention.py": 15,
    "tests/mechanisms/test_gaussian_selection.py": 15,
    "tests/reproduce/test_parallel_studies.py": 15,
    "tests/cli/test_cli.py": 14,
    "tests/mechanisms/test_piecewise_sampler.py": 14,
    "tests/datasets/test_distributions.py": 14,
    "tests/audit/test_instance_optimal_controls.py": 13,
    "tests/audit/test_claims_from_release.py": 12,
    "tests/oracle/test_sandbox.py": 11,
    "tests/oracle/test_rebuild_params.py": 11,
    "tests/cli/test_guarantee_from_release.py": 11,
    "tests/audit/test_wrappers_controls.py": 10,
    "tests/mechanisms/test_filters.py": 10,
    "tests/audit/test_median_controls.py": 10,
    "tests/cli/test_compilation_cache.py": 9,
    "tests/mechanisms/test_selection.py": 8,
    "tests/sweeps/test_paired_and_nonprivate.py": 8,
    "tests/sweeps/test_sweeps.py": 8,
    "tests/crosscheck/test_selection_laws.py": 7,
    "tests/reproduce/test_reproduce.py": 7,
    "tests/accounting/test_gaussian_selection_properties.py": 7,
    "tests/audit/test_gaussian_selection_controls.py": 7,
    "tests/bad_inputs/test_sweep_and_cli_errors.py": 7,
    "tests/oracle/test_levels.py": 6,
    "tests/noise/test_discrete.py": 6,
    "tests/cli/test_untrusted_clamp.py": 6,
    "tests/reproduce/test_blackbox_estimation_study.py": 5,
    "tests/sweeps/test_results_binding.py": 5,
    "tests/crosscheck/test_median.py": 5,
}


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        if item.nodeid.split("::")[0] in SLOW_MODULES:
            item.add_marker(slow)
    # The longest modules first, in their measured order (a stable sort: the rest keep the collection order).
    # pytest-xdist hands a free worker the next module in this order (the README's command passes
    # --no-loadscope-reorder, else it orders them by their number of tests), so the run ends on short modules
    # instead of leaving one worker alone on a six-minute module at the end.
    items.sort(key=lambda item: -SLOW_MODULES.get(item.nodeid.split("::")[0], 0))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    # What is alive once the tests are collected (JAX, SciPy, matplotlib, the test modules) lives to the end:
    # moved out of the collector's reach, so that its full collections walk only what the tests allocate.
    # GC time in eight mid-sized modules: 6.3 -> 4.4 s of ~190 s (2026-11-30).
    gc.collect()
    gc.freeze()


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
