"""Validation and sanitising helpers shared by the mechanisms (directed rounding lives in gpuprivacy._rounding).

Everything here is private. The public mechanisms call the ``check_*``
helpers on concrete inputs at the curator's boundary (STYLE "errors vs
totality"); on JAX tracers the value checks are skipped, but shape checks
still run because shapes are static.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_real_array, is_tracer, refuse_traced_data
# Re-exported for the selection modules that still import them from here; new code imports
# gpuprivacy._rounding directly (the one home of directed rounding).

# Kernels are total on data: NaN scores become -SCORE_BOUND and +-inf are
# clamped to +-SCORE_BOUND. A quarter of the largest float64 keeps every
# difference of two clamped scores finite.
SCORE_BOUND = float(np.finfo(np.float64).max / 4)


def sanitize(scores: jax.Array) -> jax.Array:
    """Maps NaN to ``-SCORE_BOUND`` and clamps to ``[-SCORE_BOUND, SCORE_BOUND]`` (1-Lipschitz)."""
    scores = jnp.where(jnp.isnan(scores), -SCORE_BOUND, scores)
    return jnp.clip(scores, -SCORE_BOUND, SCORE_BOUND)


def unit_noise(sampler: Callable[..., jax.Array], key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Unit-scale noise behind an optimization barrier.

    Without the barrier, XLA may fold a scale that is a compile-time constant
    (as it is under a caller's ``jax.jit``) into the sampler's own constants,
    for example the sqrt(2) of the normal sampler, and round differently; jit
    and eager releases would then differ in the last bit. The barrier keeps
    ``value + scale * noise`` the same computation in every context.
    """
    return jax.lax.optimization_barrier(sampler(key, shape))


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}.")
    return bool(value)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}.")
    return value


def check_value(value: Any, name: str = "value", *, allow_nonfinite: bool = False) -> jax.Array:
    """A real scalar or array with no NaN or inf, returned as a float64 JAX array.

    Tracers are cast to float64 without value checks. ``allow_nonfinite``: NaN and inf pass (the caller's
    kernel maps them to public values, as its user asked with ``clip=True``).
    """
    if is_tracer(value):
        if not (jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer)
                or value.dtype == jnp.bool_):
            raise TypeError(f"{name} must hold real numbers, got dtype {value.dtype}.")
        return value.astype(jnp.float64)
    arr = check_real_array(value, name, allow_nonfinite=allow_nonfinite)
    return jnp.asarray(arr, dtype=jnp.float64)


def check_scores(scores: Any, name: str = "scores", *, clip: Any = False,
                 what: str = "NaN or inf") -> jax.Array:
    """A non-empty 1-D real vector ``[num_candidates]`` as float64 (see :func:`check_value`).

    ``clip=True`` lets NaN and inf through (the kernels map them to public values: :func:`sanitize`); traced
    scores are refused at trace time without it (gpuprivacy._checks.refuse_traced_data), ``what`` naming what
    the eager check would have checked.
    """
    clip = check_bool("clip", clip)
    refuse_traced_data(scores, name, what=what, clip=clip)
    shape = np.shape(scores)
    if len(shape) != 1:
        hint = (" For a batch of score vectors use jax.vmap (or run_trials(..., batched_args=True))."
                if len(shape) > 1 else "")
        raise ValueError(f"{name} must be a 1-D array [num_candidates], got shape {tuple(shape)}.{hint}")
    if shape[0] < 1:
        raise ValueError(f"{name} must hold at least one candidate, got an empty array.")
    return check_value(scores, name, allow_nonfinite=clip)


def concrete(name: str, value: Any, where: str) -> None:
    """Raises a TypeError if ``value`` is a tracer; for parameters calibrated in Python."""
    if is_tracer(value):
        raise TypeError(f"{where} computes its noise scale in Python, exactly or in high precision, and needs a "
                        f"concrete {name}, got a JAX tracer. Vmap over keys and data only.")
