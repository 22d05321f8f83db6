"""Eager argument checks shared by the noise samplers.

The generic validators live in :mod:`gpuprivacy._checks`; these add the
sampler-specific ones (shapes, floating dtypes, truncation bounds that may be
infinite). Like the generic ones they run on concrete values only and are
skipped on JAX tracers, so a validated parameter array can be vmapped.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import is_tracer
from gpuprivacy._config import require_x64
from gpuprivacy._rounding import cast_down, cast_up

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_shape(shape: Any) -> tuple[int, ...]:
    """A sample shape: a non-negative int or a sequence of them, returned as a tuple."""
    if isinstance(shape, (numbers.Integral, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be a tuple of non-negative ints, got {shape!r}. "
                        "Pass e.g. shape=(1000,).") from None
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, (numbers.Integral, np.integer)) or dim < 0:
            raise TypeError(f"shape must be a tuple of non-negative ints, got {shape!r}. "
                            "Pass e.g. shape=(1000,).")
    return tuple(int(dim) for dim in dims)


def check_float_dtype(dtype: Any) -> np.dtype:
    """float32 or float64 (the default); raises if float64 is requested without x64."""
    resolved = np.dtype(np.float64) if dtype is None else np.dtype(dtype)
    if resolved not in FLOAT_DTYPES:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}. "
                        "Pass dtype=jnp.float64 (the default) or dtype=jnp.float32.")
    if resolved == np.float64:
        require_x64("gpuprivacy.noise")
    return resolved


def check_bound(name: str, value: Any) -> Any:
    """A real scalar that may be +-inf but not NaN, returned as a Python float."""
    if is_tracer(value):
        return value
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}.")
    array = np.asarray(value)
    if array.shape != () or not (np.issubdtype(array.dtype, np.floating)
                                 or np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"{name} must be a real scalar, got {value!r}. Use jax.vmap to batch over bounds.")
    value = float(array)
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN. Pass a real number or +-inf.")
    return value


def round_inward(value: float, dtype: np.dtype, *, up: bool) -> float:
    """The nearest ``dtype`` value on the inside of a truncation bound.

    A lower bound rounds up and an upper bound rounds down, so every sample
    that lies in the rounded window also lies in the window the caller asked
    for. Exact for float64 (Python floats already are float64).
    """
    return cast_up(value, dtype) if up else cast_down(value, dtype)


def as_parameter(value: Any, dtype: Any) -> Any:
    """A validated scalar as a 0-d array of ``dtype`` (tracers are cast too)."""
    return jnp.asarray(value).astype(dtype)
