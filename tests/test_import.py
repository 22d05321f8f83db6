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
