"""Eager validators for public entry points.

Each check runs on concrete Python / NumPy values at the curator's boundary
and raises a ``ValueError`` or ``TypeError`` that names the argument, shows
the value and says how to fix it. Checks are skipped (not failed) on JAX
tracers, so a validated parameter array can be vmapped through a kernel.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import zlib
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy
import numpy as np


def is_tracer(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def check_finite_real(name: str, value: Any) -> float:
    """A finite real scalar, returned as a Python float."""
    if is_tracer(value):
        return value
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        arr = np.asarray(value) if not isinstance(value, (str, bytes)) else None
        if arr is None or arr.shape != () or not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}.")
        value = arr.item()
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}. Pass a finite real number.")
    return value


def check_positive(name: str, value: Any) -> float:
    """A finite real scalar > 0."""
    value = check_finite_real(name, value)
    if not is_tracer(value) and value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")
    return value


def check_nonnegative(name: str, value: Any) -> float:
    value = check_finite_real(name, value)
    if not is_tracer(value) and value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}.")
    return value


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    value = check_finite_real(name, value)
    if not is_tracer(value) and value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}. A privacy budget of 0 or less "
                         "releases nothing; pass e.g. epsilon=1.0.")
    return value


def check_delta(value: Any, name: str = "delta") -> float:
    value = check_finite_real(name, value)
    if not is_tracer(value) and not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {value!r}. "
                         "Typical choices are well below 1/n, e.g. delta=1e-6.")
    return value


def check_probability(name: str, value: Any, *, open_interval: bool = True) -> float:
    value = check_finite_real(name, value)
    if is_tracer(value):
        return value
    ok = 0.0 < value < 1.0 if open_interval else 0.0 <= value <= 1.0
    if not ok:
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}.")
    return value


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (Python or NumPy, not bool) within [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}.")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}.")
    return value


def check_key(key: Any, name: str = "key") -> jax.Array:
    """A single JAX PRNG key (typed ``jax.random.key`` or legacy uint32[2])."""
    if not isinstance(key, jax.Array):
        raise TypeError(f"{name} must be a JAX PRNG key from jax.random.key(seed), got {type(key).__name__}.")
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"{name} must be a single key, got a key array of shape {key.shape}. "
                             "Use jax.vmap for batching.")
        return key
    if key.dtype == np.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key)
    raise TypeError(f"{name} must be a single JAX PRNG key (jax.random.key(seed)), got dtype {key.dtype} "
                    f"and shape {key.shape}. Use jax.vmap for batching.")


def check_real_array(value: Any, name: str, *, allow_nonfinite: bool = False) -> np.ndarray:
    """A NumPy array of real numbers (or bools) with no NaN or inf; the value is not copied if it need not be.

    ``allow_nonfinite``: NaN and inf pass (the caller maps them to public values, as its user asked).
    """
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a real number or array of real numbers, got {value!r}.")
    if isinstance(value, jax.Array) and jax.numpy.issubdtype(value.dtype, jax.numpy.floating):
        value = value.astype(jax.numpy.float64)  # e.g. bfloat16, which NumPy does not see as a number
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as err:  # ragged lists and the like
        raise TypeError(f"{name} must be an array-like of real numbers, got {type(value).__name__}: {err}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}. Convert it, e.g. "
                        f"np.asarray({name}, dtype=np.float64).")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real-valued, got complex dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.floating) and not allow_nonfinite:
        bad = ~np.isfinite(arr)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{name} contains {int(bad.sum())} non-finite value(s) (NaN or inf), the first at "
                             f"index {where}: {arr[where]!r}. Remove or impute them before release; gpuprivacy "
                             "never drops rows silently.")
    return arr


# --- traced data ------------------------------------------------------------------------------------
# Under jax.jit, jax.vmap or run_trials(..., batched_args=True) the data are tracers: their values are
# unknown while tracing, so the eager checks (NaN, inf, rows outside the domain) cannot raise, and turning
# them into a withheld release would make the withholding itself depend on the data (a leak). So traced
# data are refused at trace time unless the caller chose ``clip=True``: a documented map of every value
# outside the mechanism's range (NaN and inf included) to a public value, the same map with or without
# tracing. docs/fail_closed.md "Traced data".
_CALLER_CHECKS_DATA: contextvars.ContextVar[bool] = contextvars.ContextVar("gpuprivacy_caller_checks_data",
                                                                           default=False)


@contextlib.contextmanager
def data_checked_by_caller() -> Iterator[None]:
    """Private: while tracing inside, traced data are accepted without ``clip=True``.

    Only for gpuprivacy's own engines that check the same data themselves and report what they found (the
    study engine counts every trial's rows outside the domain and marks the cell, gpuprivacy/sweeps). It is
    never a way to skip a check: whoever enters it owns the check.
    """
    token = _CALLER_CHECKS_DATA.set(True)
    try:
        yield
    finally:
        _CALLER_CHECKS_DATA.reset(token)


def caller_checks_data() -> bool:
    """Whether a :func:`data_checked_by_caller` block is active."""
    return _CALLER_CHECKS_DATA.get()


def refuse_traced_data(data: Any, name: str, *, what: str, clip: bool) -> None:
    """Raises a TypeError at trace time for traced ``data`` unless ``clip`` (or a checking caller) allows it.

    ``what`` says what the eager check would have checked, e.g. "NaN, inf or rows outside [lower, upper]".
    """
    if clip or not is_tracer(data) or _CALLER_CHECKS_DATA.get():
        return
    raise TypeError(
        f"{name} is traced (under jax.jit, jax.vmap or run_trials(..., batched_args=True)), so its values cannot "
        f"be checked for {what} while tracing, and a check that depended on them would itself leak. Pass "
        f"clip=True: every value outside the range (NaN and inf included) is then mapped to a public value, "
        f"the same way with or without tracing, and values inside are untouched. Or call the mechanism on "
        f"concrete data, where the checks raise.")


def check_data(data: Any, name: str = "data", *, min_rows: int = 1) -> np.ndarray:
    """A real-valued array ``[n, ...]`` with n >= min_rows and no NaN or inf.

    Returns a NumPy array (float, integer or bool as given). Data checks run
    once, here, before any release (STYLE "errors vs totality").
    """
    if isinstance(data, jax.core.Tracer):
        return data
    arr = check_real_array(data, name)
    if arr.ndim == 0:
        raise ValueError(f"{name} must have a leading rows axis [n, ...], got a scalar {arr!r}.")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} row(s), got shape {arr.shape}.")
    return arr


def check_chunk_size(chunk_size: Any) -> int | None:
    if chunk_size is None:
        return None
    return check_int("chunk_size", chunk_size, minimum=1)


def check_rows_in_domain(data: Any, lower: Any, upper: Any, clip: Any, name: str = "data") -> Any:
    """Every private median's rule for rows outside the public domain ``[lower, upper]``.

    ``data`` has been through :func:`check_data` (so NaN/inf were already
    rejected with the shared message). With ``clip=False`` a row outside
    ``[lower, upper]`` is a ``ValueError`` naming the argument, how many rows
    and the first offending value; with ``clip=True`` rows are clamped to
    ``[lower, upper]``. Infinite ends (an unbounded domain) never reject and
    never clamp. Traced data (or a traced domain) cannot be checked: with
    ``clip=False`` they are refused at trace time (:func:`refuse_traced_data`),
    with ``clip=True`` they are mapped by :func:`clamp_to_domain`.

    Returns:
      ``data`` clamped to ``[lower, upper]`` (a NumPy array, or a JAX array for
      traced data); unchanged when both ends are infinite.
    """
    if not isinstance(clip, (bool, np.bool_)):
        raise TypeError(f"clip must be True or False, got {clip!r} of type {type(clip).__name__}.")
    clip = bool(clip)
    if is_tracer(data) or is_tracer(lower) or is_tracer(upper):
        # The values cannot be checked while tracing: refused unless the caller chose clip=True.
        refuse_traced_data(data if is_tracer(data) else lower if is_tracer(lower) else upper, name,
                           what="NaN, inf or rows outside the domain [lower, upper]", clip=clip)
        return clamp_to_domain(data, lower, upper)
    lower, upper = float(lower), float(upper)
    if math.isinf(lower) and math.isinf(upper):
        return data
    arr = np.asarray(data)
    outside = (arr < lower) | (arr > upper)
    if outside.any() and not clip:
        where = tuple(int(i) for i in np.argwhere(outside)[0])
        index = where[0] if len(where) == 1 else where
        raise ValueError(
            f"{name} has {int(outside.sum())} row(s) outside the declared domain [lower, upper] = "
            f"[{lower!r}, {upper!r}]; the first is {float(arr[where])!r} at index {index}. Widen lower/upper "
            "(they must be public, not computed from the data) or pass clip=True to clamp rows to [lower, upper].")
    return np.clip(arr.astype(np.float64), lower, upper)


def clamp_to_domain(data: Any, lower: Any, upper: Any) -> jax.Array:
    """``clip=True`` on traced data: rows clamped to ``[lower, upper]`` (+-inf to the ends), NaN rows to ``lower``.

    Data-independent and 1-Lipschitz in every finite row, so neighbouring datasets stay neighbours. (Eager calls
    raise on NaN and inf before this: they can.)
    """
    x = jax.numpy.asarray(data, jax.numpy.float64)
    return jax.numpy.clip(jax.numpy.where(jax.numpy.isnan(x), lower, x), lower, upper)


# --- noise scales that overflow --------------------------------------------------------------------
# One rule for every mechanism: a noise scale ``numerator / epsilon`` is refused when its samples could
# overflow float64, with the smallest epsilon that works. A sampler's draw reaches ``tail`` scales at most:
# 2**10 for Laplace, exponential and Gumbel noise (-log of a uniform is below 745), 2**53 for the Cauchy-like
# noise of the smooth-sensitivity median (tan near pi/2 of a 53-bit uniform).
LAPLACE_TAIL = 2.0 ** 10
CAUCHY_TAIL = 2.0 ** 53


def check_noise_scale(numerator: Any, epsilon: Any, *, what: str, name: str = "epsilon",
                      tail: float = LAPLACE_TAIL) -> None:
    """Refuses a concrete ``epsilon`` for which ``tail * numerator / epsilon`` is not a finite float64.

    The message names the smallest ``epsilon`` that works. Traced values pass (they are checked by value
    inside the computation, :func:`epsilon_ok`).
    """
    if is_tracer(numerator) or is_tracer(epsilon):
        return
    from fractions import Fraction

    largest = Fraction(np.finfo(np.float64).max)
    if Fraction(float(tail)) * Fraction(float(numerator)) <= largest * Fraction(float(epsilon)):
        return
    smallest = Fraction(float(tail)) * Fraction(float(numerator)) / largest
    smallest_float = math.nextafter(float(smallest), math.inf)
    raise ValueError(f"{what}: {name}={epsilon!r} makes the noise scale {numerator!r} / {name} so large that "
                     f"its draws (up to {tail:.3g} scales) overflow float64. The smallest {name} that works is "
                     f"{smallest_float:.6g}; pass {name} >= that.")


# XLA flushes subnormal floats to zero (on CPU and accelerators), and a noise scale is multiplied by draws
# down to 2**-53 and divided into differences of the data: a scale below this bound (2**62 times the smallest
# normal float64, about 1.0e-289) can become 0 inside a kernel, which then releases garbage (a 0/0 selection
# or a median outside its range) instead of a noisy answer. Refused up front, with the largest epsilon that works.
SMALLEST_NOISE_SCALE = 2.0 ** -960


def check_scale_not_flushed(scale: Any, epsilon: Any, *, what: str, name: str = "epsilon") -> None:
    """Refuses a concrete ``epsilon`` whose noise ``scale`` (proportional to 1/epsilon) is below
    :data:`SMALLEST_NOISE_SCALE`; the message names the largest ``epsilon`` that works. Tracers pass."""
    if is_tracer(scale) or is_tracer(epsilon) or float(scale) >= SMALLEST_NOISE_SCALE:
        return
    largest = math.nextafter(float(epsilon) * float(scale) / SMALLEST_NOISE_SCALE, 0.0)
    raise ValueError(f"{what}: {name}={epsilon!r} makes the noise scale {float(scale):.3g}, below "
                     f"{SMALLEST_NOISE_SCALE:.3g}, where XLA's flush of subnormal floats to zero would turn the "
                     f"noise into 0/0. The largest {name} that works is about {largest:.6g}; pass {name} <= that "
                     "(the noise is already negligible there).")


# A depth, level or design size the wrappers derive from epsilon (they grow like 1/epsilon) counts rows or
# subsets: past 2**31 nothing can be evaluated, and past 2**63 it does not even fit an index.
LEVEL_LIMIT = 2 ** 31


def check_level(level: Any, *, epsilon: float, what: str, name: str = "epsilon",
                numerator: float | None = None) -> None:
    """Refuses an epsilon whose derived depth or level (proportional to 1/epsilon) exceeds :data:`LEVEL_LIMIT`.

    ``numerator``: the level times epsilon, when the caller knows it (the level itself may be inf).
    """
    if is_tracer(epsilon) or level is None:
        return
    level = float(level)
    if level <= LEVEL_LIMIT:
        return
    per_unit = float(numerator) if numerator is not None else float(epsilon) * level
    smallest = math.nextafter(per_unit / LEVEL_LIMIT, math.inf) if math.isfinite(per_unit) else None
    hint = f"the smallest {name} that works is about {smallest:.6g}" if smallest and math.isfinite(smallest) \
        else f"use a much larger {name}"
    raise ValueError(f"{what}: {name}={epsilon!r} needs a depth of about {level:.3g} rows, more than the "
                     f"{LEVEL_LIMIT} any dataset can have; {hint}.")


# --- fail closed under jit / vmap -------------------------------------------------------------------
# The checks above raise on concrete values and let tracers through (a validated parameter may be
# vmapped). A traced parameter is checked by value inside the computation instead: the release is
# replaced by a NaN (or -1 for an index) that does not depend on the data, ``info.valid`` is False, and
# the same message is raised by ``jax.experimental.checkify`` when the caller checkifies
# (``checkify.checkify(f, errors=checkify.user_checks)``). docs/fail_closed.md.

def traced_ok(ok: Any, message: str, **values: Any) -> Any:
    """``ok`` as a traced boolean, also registered with ``checkify`` (a no-op unless the caller checkifies)."""
    _debug_check(ok, message, **values)
    return ok


def _check_code(message: str) -> int:
    """The checkify error code of a check: a function of its message, in [1, 2^30]."""
    return zlib.crc32(message.encode()) % (1 << 30) + 1


def _debug_check(ok: Any, message: str, **values: Any) -> None:
    """``jax.experimental.checkify.debug_check(ok, message, **values)`` with an error code that depends on the
    message alone.

    JAX numbers each check from a process-wide counter (``jax/_src/checkify.py``, ``next_code``) and writes the
    number into the program as a constant even where the check is a no-op (no ``checkify`` around it). Then the
    same release traced twice is two programs: the persistent compilation cache never reads it back in another
    process unless every check before it was traced in the same order (a sweep of n = [100] after one of
    n = [20, 100] compiled its two mechanism programs again), nor after ``jax.clear_caches()``. This is
    ``debug_check``'s own body (jax 0.10) with a code from the message. Under ``checkify`` the failing check with
    the smallest code is the one reported (with the counter: the first traced); a release reports one failure,
    and every message says which value is wrong. There is no public way to set the code.
    """
    from jax._src import checkify as checkify_internals  # the code: see above

    if not checkify_internals.is_scalar_pred(ok):
        raise TypeError(f"debug_check takes a scalar pred as argument, got {ok}")
    error = checkify_internals.FailedCheckError(checkify_internals.get_traceback(), message, **values)
    payload, metadata = jax.tree_util.tree_flatten(error)
    code = _check_code(message)
    state = checkify_internals.update_error(checkify_internals.init_error, jax.numpy.logical_not(ok), code,
                                            {code: metadata}, payload, error.get_effect_type())
    checkify_internals._check_error(state, debug=True)


def epsilon_ok(epsilon: Any, name: str = "epsilon") -> Any:
    """True for a concrete (already checked) epsilon; for a traced one, whether it is finite and > 0."""
    if not is_tracer(epsilon):
        return True
    return traced_ok(jax.numpy.isfinite(epsilon) & (epsilon > 0),
                     f"{name} must be finite and > 0, got {{value}}. A privacy budget of 0 or less releases nothing.",
                     value=epsilon)


def positive_ok(name: str, value: Any) -> Any:
    """True for a concrete (already checked) value; for a traced one, whether it is finite and > 0."""
    if not is_tracer(value):
        return True
    return traced_ok(jax.numpy.isfinite(value) & (value > 0), f"{name} must be finite and > 0, got {{value}}.",
                     value=value)


def finite_ok(name: str, value: Any) -> Any:
    """True for concrete (already checked) data; for traced data, whether every entry is finite."""
    if not is_tracer(value):
        return True
    return traced_ok(jax.numpy.all(jax.numpy.isfinite(value)),
                     f"{name} must be finite (no NaN or inf); the release was withheld.")


def all_ok(*conditions: Any) -> Any:
    """The conjunction of :func:`epsilon_ok`-style results (True when every one is concretely True)."""
    traced = [c for c in conditions if c is not True]
    if not traced:
        return True
    out = traced[0]
    for c in traced[1:]:
        out = out & c
    return out


def fail_closed(released: Any, ok: Any, withheld: Any = None) -> Any:
    """``released`` where ``ok``, else ``withheld``: a value that does not depend on the data.

    The default ``withheld`` is NaN for a floating release, -1 for an integer one and False for a
    boolean one; ``info.valid`` tells a withheld release from a real one.
    """
    if ok is True:
        return released
    released = jax.numpy.asarray(released)
    if withheld is None:
        if jax.numpy.issubdtype(released.dtype, jax.numpy.floating):
            withheld = jax.numpy.nan
        else:
            withheld = False if released.dtype == jax.numpy.bool_ else -1
    return jax.numpy.where(ok, released, jax.numpy.full(released.shape, withheld, released.dtype))
