"""Importing gpuprivacy has no side effects on JAX beyond enabling float64 and, on a CPU, XLA's loop emitters."""

import os
import subprocess
import sys

import pytest

from gpuprivacy import _config


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


# A program whose values tell XLA:CPU's emitters apart: their float64 exp differ in the last bit at some of these
# points (jaxlib 0.10.2).
_EMITTER_PROBE = ("import hashlib, jax, jax.numpy as jnp, numpy as np\n"
                  "x = np.asarray(jax.jit(jnp.exp)(jnp.linspace(-30.0, 30.0, 100001)))\n"
                  "digest = hashlib.sha256(x.tobytes()).hexdigest()\n"
                  "print(gp._config.CPU_EMITTERS, os.environ.get('XLA_FLAGS', ''), digest)\n")


def _probe(before="", **env):
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", _config.KEEP_XLA_DEFAULTS_ENV)}
    code = f"import os\n{before}import gpuprivacy as gp\n{_EMITTER_PROBE}"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**base, "JAX_PLATFORMS": "cpu", **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    emitters, *flags, digest = proc.stdout.split()
    return emitters, " ".join(flags), digest


@pytest.mark.skipif(_config._jaxlib_series() not in _config._LOOP_EMITTER_JAXLIBS,
                    reason="the loop emitters are asked for on the jaxlib series they were measured with only")
def test_import_asks_xla_cpu_for_its_loop_emitters_and_they_take_effect():
    ours = _probe()
    assert ours[:2] == ("loop", _config.LOOP_EMITTERS_FLAG)
    # The same program as under the flag set by hand, and (the power of the check) not XLA's default's.
    by_hand = _probe(XLA_FLAGS=_config.LOOP_EMITTERS_FLAG, GPUPRIVACY_XLA_DEFAULTS="1")
    default = _probe(GPUPRIVACY_XLA_DEFAULTS="1")
    assert default[:2] == ("default", "")
    assert ours[2] == by_hand[2] != default[2]
    # A choice in XLA_FLAGS wins, and so do backends started before the import (too late to change): both
    # compute as XLA's default.
    assert _probe(XLA_FLAGS="--xla_cpu_use_fusion_emitters=true") == ("flags", "--xla_cpu_use_fusion_emitters=true",
                                                                      default[2])
    started = _probe(before="import jax.numpy as jnp; jnp.zeros(1)\n")
    assert started == ("default", "", default[2])


def test_the_loop_emitters_are_asked_for_only_where_they_can_take_effect(monkeypatch):
    monkeypatch.setattr(_config, "_backends_started", lambda unknown: False)
    monkeypatch.setattr(_config, "_jaxlib_series", lambda: (0, 10))
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    assert _config.prefer_cpu_loop_emitters(env) == "loop"
    assert env["XLA_FLAGS"] == f"--xla_force_host_platform_device_count=4 {_config.LOOP_EMITTERS_FLAG}"
    assert _config.prefer_cpu_loop_emitters(env) == "loop" and env["XLA_FLAGS"].count("emitters") == 1
    for env, why in (({_config.KEEP_XLA_DEFAULTS_ENV: "1"}, "opted out"), ({}, "unmeasured jaxlib"),
                     ({}, "backends started")):
        if why == "unmeasured jaxlib":
            monkeypatch.setattr(_config, "_jaxlib_series", lambda: (0, 11))
        if why == "backends started":
            monkeypatch.setattr(_config, "_jaxlib_series", lambda: (0, 10))
            monkeypatch.setattr(_config, "_backends_started", lambda unknown: True)
        assert _config.prefer_cpu_loop_emitters(env) == "default" and "XLA_FLAGS" not in env, why
