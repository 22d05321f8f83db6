"""Importing gpuprivacy has no side effects on JAX beyond enabling float64."""

import subprocess
import sys


def test_import_does_not_start_the_xla_backend():
    # jax.distributed.initialize() must run before any backend exists (oracle.initialize_distributed),
    # so no module may create a device array at import time (e.g. a jnp constant).
    code = ("import jax._src.xla_bridge as xb, gpuprivacy, gpuprivacy.cli._main, gpuprivacy.reproduce\n"
            "import gpuprivacy.designs, gpuprivacy.mechanisms.wrappers, gpuprivacy.mechanisms.median\n"
            "assert not xb._backends, 'a module created a device array at import'\n"
            "import jax; assert jax.config.jax_enable_x64\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_import_and_the_cli_leave_scipy_and_optax_until_a_function_needs_them():
    # Every `gpuprivacy` command, notebook kernel and worker process pays for what importing the package loads:
    # SciPy and optax were 0.3 s of 1.05 s (2026-11-30), for one planner constant, one fit of the
    # private-median study and two oracles. Loading them where they are used keeps them out of that cost.
    code = ("import sys, gpuprivacy, gpuprivacy.cli._main, gpuprivacy.reproduce, gpuprivacy.designs\n"
            "import gpuprivacy.mechanisms.wrappers, gpuprivacy.oracle, gpuprivacy.sweeps, gpuprivacy.audit\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'optax'))\n"
            "assert not loaded, loaded[:10]\n"
            "from gpuprivacy import designs, oracle\n"
            "designs.zcdp_search_parameters(rho=1.0, num_outputs=16, beta=0.1)\n"
            "oracle.logistic_regression()\n"
            "assert 'scipy.special' in sys.modules and 'optax' in sys.modules  # power: the check sees them\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
