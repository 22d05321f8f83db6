"""The one place where gpuprivacy configures JAX.

gpuprivacy enables 64-bit floats (``jax_enable_x64``) when it is imported.
Every accounting and release path computes in float64; simulation kernels
that may run in float32 ask for it explicitly through their ``dtype``
argument. Importing gpuprivacy therefore changes JAX's default dtypes for
the whole process, exactly as ``jax.config.update("jax_enable_x64", True)``
would. Code that needs 32-bit defaults elsewhere should pass dtypes
explicitly.
"""

import jax

jax.config.update("jax_enable_x64", True)


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
    try:
        from jax._src import xla_bridge  # no public query; without it the update below is simply too late
        started = xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):  # pragma: no cover  (another JAX layout)
        started = False
    if started:
        raise RuntimeError("use_cpu_cores must be called before JAX starts its backends (before the first array "
                           "is created or jax.devices() is called). Call it right after importing gpuprivacy, or "
                           f"set XLA_FLAGS=--xla_force_host_platform_device_count={count} in the environment.")
    jax.config.update("jax_num_cpu_devices", count)
    return count
