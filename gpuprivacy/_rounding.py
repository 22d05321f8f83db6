"""Directed rounding: every float that must bound an exact value from one side.

Contract (one for the whole package):

* Every function returns a float (float64 unless a ``dtype`` is named) that
  bounds the exact mathematical value from the side its name says: ``*_up``
  gives a value ``>=`` the exact one, ``*_down`` a value ``<=`` it.
* Exact inputs -- ``int``, ``Fraction``, an mpmath number (exact at the
  working precision it was computed with; callers raise ``mpmath.workdps``
  enough for their error terms), or a ``float`` taken as the exact binary
  value it represents -- are rounded to the *nearest* float on that side.
  So an exactly representable result is returned unchanged: a user's
  ``epsilon=1.0`` that the mathematics says is the guarantee is reported
  as ``1.0``, never as ``nextafter(1.0)``.
* A float that is itself the result of inexact floating-point arithmetic
  (``math.sqrt``, ``math.log``, a float product) is not an exact value.
  :func:`round_up` / :func:`round_down` bump it by the stated number of
  ulps, *unconditionally*; they are used only where the exact value is not
  available, and the caller states why ``ulps`` ulps cover the error.
* A value that does not fit in a finite float (or is NaN) raises a
  ``ValueError`` that says so; there is no silent ``inf``.

Computed quantities therefore stay safe (a sum, product or conversion of
guarantees is rounded up via its exact value, e.g. :func:`sum_up`), while a
quantity that *is* exactly the user's input is passed through untouched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

import jax.numpy as jnp
import mpmath
import numpy as np

from gpuprivacy._checks import is_tracer

__all__ = ["float_up", "float_down", "divide_up", "sum_up", "round_up", "round_down", "step_up_until", "cast_up",
           "cast_down"]


def _exact(value: Any) -> Fraction | mpmath.mpf:
    """``value`` as an exact Fraction (int, float, Fraction, NumPy scalar) or as an mpmath number."""
    if isinstance(value, (mpmath.mpf, Fraction)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return Fraction(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise ValueError(f"{value!r} is not a finite real number; it cannot be rounded to a float64 bound.")
        return Fraction(float(value))
    raise TypeError(f"expected an int, float, Fraction or mpmath.mpf, got {value!r} of type {type(value).__name__}.")


def _magnitude(exact: Fraction | mpmath.mpf) -> str:
    """About how large ``exact`` is, in a few characters (never its hundreds of exact digits)."""
    if isinstance(exact, Fraction):
        exact = mpmath.mpf(exact.numerator) / exact.denominator
    return mpmath.nstr(exact, 3)


def _too_large(exact, what: str, hint: str) -> ValueError:
    return ValueError(f"{what} is about {_magnitude(exact)}, beyond the largest float64 (1.8e308): {hint}")


_HINT = "use a larger epsilon, or a smaller sensitivity or range."


def _nearest(exact: Fraction | mpmath.mpf, what: str = "the value", hint: str = _HINT) -> float:
    if isinstance(exact, mpmath.mpf) and not mpmath.isfinite(exact):
        raise ValueError(f"{exact} is not a finite real number; it cannot be rounded to a float64 bound.")
    try:
        value = float(exact)
    except OverflowError:
        raise _too_large(exact, what, hint) from None
    if math.isinf(value):
        raise _too_large(exact, what, hint)
    return value


def _below(value: float, exact: Fraction | mpmath.mpf) -> bool:
    return Fraction(value) < exact if isinstance(exact, Fraction) else mpmath.mpf(value) < exact


def float_up(exact: Any, *, what: str = "the value", hint: str = _HINT) -> float:
    """The smallest float64 ``>= exact`` (an int, float, Fraction or mpmath number; see the module contract).

    Examples:
      >>> float_up(Fraction(1, 3)) > 1 / 3
      True
      >>> float_up(1.0), float_up(Fraction(1, 2))
      (1.0, 0.5)
    """
    exact = _exact(exact)
    value = _nearest(exact, what, hint)
    if _below(value, exact):
        value = math.nextafter(value, math.inf)
        if math.isinf(value):
            raise _too_large(exact, what, hint)
    return value


def float_down(exact: Any, *, what: str = "the value", hint: str = _HINT) -> float:
    """The largest float64 ``<= exact`` (an int, float, Fraction or mpmath number; see the module contract).

    Examples:
      >>> float_down(Fraction(1, 3)) == 1 / 3  # the float 1/3 lies below the exact third
      True
      >>> float_down(Fraction(1, 10)) < 0.1  # the float 0.1 lies above the exact tenth
      True
    """
    exact = _exact(exact)
    value = _nearest(exact, what, hint)
    if not _below(value, exact) and value != exact:
        value = math.nextafter(value, -math.inf)
        if math.isinf(value):
            raise _too_large(exact, what, hint)
    return value


def divide_up(numerator: Any, denominator: Any, *, multiplier: int = 1, what: str | None = None,
              hint: str = _HINT) -> Any:
    """``multiplier * numerator / denominator`` rounded up to a float64.

    Concrete inputs give a Python float that is an upper bound on the exact
    quotient (the nearest one; an exact quotient is returned unchanged), so a
    noise scale is never smaller than the one the privacy proof asks for. If
    either is a JAX tracer (for example a vmapped epsilon that was validated
    beforehand) the result is plain float64 arithmetic, correct to about an ulp.
    """
    if is_tracer(numerator) or is_tracer(denominator):
        return (multiplier * jnp.asarray(numerator, jnp.float64)) / jnp.asarray(denominator, jnp.float64)
    if what is None:
        what = f"{multiplier} * {numerator!r} / {denominator!r}"
    return float_up(Fraction(multiplier) * Fraction(numerator) / Fraction(denominator), what=what, hint=hint)


def sum_up(values: Iterable[Any], *, what: str = "the sum", hint: str = _HINT) -> float:
    """The exact sum of floats (or Fractions), rounded up to a float; exact sums stay exact."""
    return float_up(sum((Fraction(v) for v in values), Fraction(0)), what=what, hint=hint)


def round_up(value: Any, *, ulps: int = 1) -> Any:
    """``value`` moved up by ``ulps`` ulps, unconditionally (a float, or elementwise on a NumPy array).

    For the result of inexact float arithmetic only (the exact value is not
    available); the caller states why ``ulps`` ulps cover the rounding error.
    An exact value is rounded with :func:`float_up` instead.

    Examples:
      >>> round_up(1.0) > 1.0
      True
    """
    return _bump(value, ulps, math.inf)


def round_down(value: Any, *, ulps: int = 1) -> Any:
    """``value`` moved down by ``ulps`` ulps, unconditionally (the mirror of :func:`round_up`)."""
    return _bump(value, ulps, -math.inf)


def _bump(value: Any, ulps: int, direction: float) -> Any:
    if isinstance(ulps, bool) or not isinstance(ulps, int) or ulps < 0:
        raise ValueError(f"ulps must be a non-negative int, got {ulps!r}.")
    if np.ndim(value) > 0:
        out = np.asarray(value, np.float64)
        for _ in range(ulps):
            out = np.nextafter(out, direction)
        return out
    out = float(value)
    for _ in range(ulps):
        out = math.nextafter(out, direction)
    return out


def step_up_until(value: float, holds: Callable[[float], bool], *, max_steps: int = 1 << 20) -> float:
    """The first float ``>= value`` (stepping one ulp at a time) for which the exact check ``holds`` passes.

    The directed rounding of a value with no closed exact form (a square
    root, an arb enclosure): ``value`` is a float approximation and
    ``holds(x)`` decides *exactly* (Fractions, arb) whether ``x`` is on the
    safe side. A ``value`` that already passes is returned unchanged.
    """
    out = float(value)
    for _ in range(max_steps):
        if holds(out):
            return out
        out = math.nextafter(out, math.inf)
        if math.isinf(out):
            break
    raise ValueError(f"no float64 at or above {value!r} passes the exact check within {max_steps} ulps; "
                     "use smaller parameters.")


def _cast(value: float, dtype: Any, *, up: bool) -> float:
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore"):  # beyond the dtype's range: +-inf, stepped inward below
        rounded = dtype.type(value)
    if up and float(rounded) < value:
        rounded = np.nextafter(rounded, dtype.type(np.inf))
    if not up and float(rounded) > value:
        rounded = np.nextafter(rounded, dtype.type(-np.inf))
    return float(rounded)


def cast_up(value: float, dtype: Any) -> float:
    """The smallest ``dtype`` value ``>= value`` (a float64 taken as exact), returned as a Python float."""
    return _cast(value, dtype, up=True)


def cast_down(value: float, dtype: Any) -> float:
    """The largest ``dtype`` value ``<= value`` (a float64 taken as exact), returned as a Python float."""
    return _cast(value, dtype, up=False)
