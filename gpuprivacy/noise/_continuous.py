"""Continuous noise samplers at unit scale: ``(key, shape=(), dtype=None) -> Array``.

Samplers are keyed (no global state) and return float64 unless ``dtype`` is
given. Multiply by the scale in the caller. These are *idealized numerics*:
floating-point samples of a continuous law; see :mod:`gpuprivacy.noise` for
the ``secure`` release path that avoids Mironov's (2012) attack.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpuprivacy._checks import check_key


def _dtype(dtype):
    return jnp.float64 if dtype is None else dtype


def laplace(key, shape=(), dtype=None) -> jax.Array:
    """Standard Laplace samples, density :math:`\\tfrac12 e^{-|x|}`."""
    return jax.random.laplace(check_key(key), shape, _dtype(dtype))


def gaussian(key, shape=(), dtype=None) -> jax.Array:
    """Standard normal samples."""
    return jax.random.normal(check_key(key), shape, _dtype(dtype))


def gumbel(key, shape=(), dtype=None) -> jax.Array:
    """Standard Gumbel samples, CDF :math:`\\exp(-e^{-x})` (high-resolution tails)."""
    return jax.random.gumbel(check_key(key), shape, _dtype(dtype), mode="high")


def exponential(key, shape=(), dtype=None) -> jax.Array:
    """Standard exponential samples, density :math:`e^{-x}` on :math:`x \\ge 0`."""
    return jax.random.exponential(check_key(key), shape, _dtype(dtype))
