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
