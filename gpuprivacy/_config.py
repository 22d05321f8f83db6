"""The one place where gpuprivacy configures JAX.

gpuprivacy enables 64-bit floats (``jax_enable_x64``) when it is imported.
Every accounting and release path computes in float64; simulation kernels
that may run in float32 ask for it explicitly through their ``dtype``
argument. Importing gpuprivacy therefore changes JAX's default dtypes for
the whole process, exactly as ``jax.config.update("jax_enable_x64", True)``
would. Code that needs 32-bit defaults elsewhere should pass dtypes
explicitly.

On a CPU, gpuprivacy also asks XLA for its loop emitters
(``--xla_cpu_use_fusion_emitters=false``, added to ``XLA_FLAGS`` at import, before
JAX starts its backends): the mechanisms' programs compile with 0.58 times the CPU
time and run in 0.80 times the time of XLA's default fusion emitters (geometric
means over 57 programs of the 29 sweepable mechanisms, n = 200;
``experiments/bench_cpu_emitters.py``, BENCHMARKS.md). It is read once per process,
so it applies to every XLA:CPU program of the process, as ``jax_enable_x64`` does;
values agree bitwise but where a fusion computes a transcendental function
(``exp``) otherwise, in its last bits. It is not added when ``XLA_FLAGS`` already
names the option (yours wins), when JAX's backends have started (too late to take
effect), on a jaxlib series it was not measured with (another may not know the
option, and XLA aborts on an unknown flag), or when ``GPUPRIVACY_XLA_DEFAULTS=1``.
:data:`CPU_EMITTERS` says which applies.
"""

import os

import jax

jax.config.update("jax_enable_x64", True)

LOOP_EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters=false"
KEEP_XLA_DEFAULTS_ENV = "GPUPRIVACY_XLA_DEFAULTS"
# jaxlib (major, minor) series the option was measured with (it exists there; the loop emitters pass the suite).
_LOOP_EMITTER_JAXLIBS = {(0, 10)}


def _backends_started(unknown: bool) -> bool:
    """Whether JAX's backends have started (``unknown`` where this JAX does not say)."""
    try:
        from jax._src import xla_bridge  # no public query
        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # pragma: no cover  (another JAX layout)
        return unknown


def _jaxlib_series() -> tuple[int, int] | None:
    try:
        import jaxlib

        major, minor = jaxlib.__version__.split(".")[:2]
        return int(major), int(minor)
    except (ImportError, ValueError, AttributeError):  # pragma: no cover
        return None


def prefer_cpu_loop_emitters(environ=os.environ) -> str:
    """Adds :data:`LOOP_EMITTERS_FLAG` to ``XLA_FLAGS`` where the module docstring says; returns which CPU
    emitters XLA will use: ``"loop"`` (this process asked for them, now or before), ``"flags"`` (``XLA_FLAGS``
    names the option: yours), or ``"default"`` (XLA's fusion emitters: opted out, an unmeasured jaxlib, or
    backends already started)."""
    flags = environ.get("XLA_FLAGS", "")
    if LOOP_EMITTERS_FLAG in flags.split():
        return "loop"
    if "xla_cpu_use_fusion_emitters" in flags:
        return "flags"
    if (environ.get(KEEP_XLA_DEFAULTS_ENV, "") not in ("", "0") or _jaxlib_series() not in _LOOP_EMITTER_JAXLIBS
            or _backends_started(unknown=True)):
        return "default"
    environ["XLA_FLAGS"] = f"{flags} {LOOP_EMITTERS_FLAG}".strip()
    return "loop"


CPU_EMITTERS = prefer_cpu_loop_emitters()


def x64_enabled() -> bool:
    """Whether JAX currently produces 64-bit floats by default."""
    return bool(jax.config.read("jax_enable_x64"))


def require_x64(where: str) -> None:
    """Raises if a caller switched float64 off after importing gpuprivacy."""
    if not x64_enabled():
        raise RuntimeError(
            f"{where} computes privacy-relevant quantities in float64, but "
            "jax_enable_x64 is off. Call jax.config.update('jax_enable_x64', True) "
            "(gpuprivacy does this at import; something switched it off)."
        )


def use_cpu_cores(count: int | None = None) -> int:
    """Gives JAX one CPU device per core, so :func:`gpuprivacy.oracle.evaluate` splits its work over them.

    XLA runs one CPU device's program on about one core; the engine splits
    subsets over devices (docs/engine.md), so on a CPU-only machine more
    devices use more cores. Call it before anything runs on JAX (it sets
    ``jax_num_cpu_devices``, which is read when the backend starts); it has
    no effect on accelerators. ``gpuprivacy`` never does this by itself: it
    changes ``jax.devices()`` for the whole process.

    Args:
      count: the number of CPU devices (default: ``os.cpu_count()``).

    Returns:
      The number of CPU devices asked for.

    Raises:
      RuntimeError: if JAX's backends have already started.
    """
    import os

    count = (os.cpu_count() or 1) if count is None else int(count)
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}.")
    if _backends_started(unknown=False):  # unknown: the update below is simply too late
        raise RuntimeError("use_cpu_cores must be called before JAX starts its backends (before the first array "
                           "is created or jax.devices() is called). Call it right after importing gpuprivacy, or "
                           f"set XLA_FLAGS=--xla_force_host_platform_device_count={count} in the environment.")
    jax.config.update("jax_num_cpu_devices", count)
    return count
