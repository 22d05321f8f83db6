"""Strict test configuration (STYLE rule 24)."""

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
