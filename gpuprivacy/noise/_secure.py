"""The ``secure`` release path: snap to a power-of-two grid, add exact integer noise.

Mironov (2012) showed that releasing ``value + scale * laplace()`` computed in
floating point leaks the value through the low bits of the result: the set of
floats the noisy sum can take depends on the value. Following his remedy (and
CKS 2020, Sec. 1), the functions here never add float noise. They

1. snap the value to the grid :math:`g\\mathbb{Z}` (round to nearest, ties
   to even), giving an integer :math:`k`;
2. add exact integer noise :math:`Z` (:func:`gpuprivacy.noise.discrete_laplace`
   or :func:`gpuprivacy.noise.discrete_gaussian`) in int64;
3. return :math:`(k + Z)\\,g` as float64.

The granularity :math:`g` must be a power of two: then :math:`v/g` and
:math:`(k+Z)\\,g` only change the float exponent, so they are exact, and every
grid point with :math:`|k + Z| \\le 2^{53}` is a float64. The output is then
exactly a grid point, and its distribution is exactly that of the discrete
mechanism on the integers, scaled by :math:`g`.

**Protected:** the output distribution is exactly the discrete mechanism's on
the grid, so no float low-bit pattern carries information about the value
beyond what the discrete mechanism releases (its privacy guarantee is the
one stated in each function).

**Not protected:** timing side channels (the noise is drawn by rejection
loops whose running time is random; it is drawn independently of the value,
but no constant-time claim is made about the host, the compiler or the
hardware); float errors made before the value reaches this function (e.g.
inside an oracle: a value computed with data-dependent rounding is released
exactly as computed); and the utility cost of rounding the value to the grid
(at most :math:`g/2` per element), which is charged to the sensitivity as
described in each function.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_epsilon, check_key, check_positive, is_tracer
from gpuprivacy._config import require_x64
from gpuprivacy._rounding import float_up
from gpuprivacy._typing import Array, Key
from gpuprivacy.noise._discrete import MAX_SCALE, MIN_SCALE, _discrete_gaussian, _discrete_laplace

# |value| / granularity above this loses exactness (the grid index must be an
# exact float64 integer, with room for the noise).
MAX_GRID_INDEX = 2.0**52
# Grid points (k + Z) g must be normal float64 numbers for every |k + Z| <= 2**53.
MIN_GRANULARITY_EXPONENT = -1022
MAX_GRANULARITY_EXPONENT = 970


def _check_granularity(granularity: Any) -> float:
    granularity = check_positive("granularity", granularity)
    if is_tracer(granularity):
        raise TypeError("granularity must be a concrete power of two, not a traced value.")
    mantissa, exponent = math.frexp(granularity)
    if mantissa != 0.5:
        raise ValueError(f"granularity must be a power of two (e.g. 2.0**-20), got {granularity!r}. "
                         "A power of two keeps value / granularity and the grid points exact in float64.")
    if not MIN_GRANULARITY_EXPONENT <= exponent - 1 <= MAX_GRANULARITY_EXPONENT:
        raise ValueError(f"granularity must lie in [2**{MIN_GRANULARITY_EXPONENT}, "
                         f"2**{MAX_GRANULARITY_EXPONENT}] so that grid points are normal float64 "
                         f"numbers, got {granularity!r}.")
    return granularity


def _check_concrete(name: str, value: Any) -> None:
    if is_tracer(value):
        raise TypeError(f"{name} must be a concrete number in the secure path, not a traced value: the "
                        "noise scale is computed exactly in Python. Use jax.vmap over keys and values only.")


def _check_value(value: Any, granularity: float) -> Array:
    """The value as float64; concrete values must be finite with |value| / g <= 2**52."""
    if is_tracer(value):
        return value.astype(jnp.float64)
    array = np.asarray(value)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"value must hold real numbers, got dtype {array.dtype}.")
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError("value contains NaN or inf; the secure path releases finite values only. "
                         "Clip or impute them before release.")
    largest = float(np.max(np.abs(array))) if array.size else 0.0
    if largest / granularity > MAX_GRID_INDEX:
        raise ValueError(f"|value| / granularity must be <= 2**52 for the grid index to be exact, got "
                         f"max |value| = {largest!r} with granularity = {granularity!r}. Use a coarser "
                         f"granularity (at least {largest / MAX_GRID_INDEX!r}, rounded up to a power of "
                         "two) or clip the value.")
    return jnp.asarray(array)


def _grid_index(value: Array, granularity: float) -> Array:
    # Total on traced values: NaN maps to index 0 and indices are clamped to
    # +-2**52, so a release never raises on data (STYLE "errors vs totality").
    scaled = jnp.nan_to_num(value / granularity, nan=0.0)
    return jnp.round(jnp.clip(scaled, -MAX_GRID_INDEX, MAX_GRID_INDEX)).astype(jnp.int64)


# `granularity` is a validated power of two passed as a float64 array: dividing
# and multiplying by it is exact, and one compiled kernel serves every grid.
@jax.jit
def _secure_laplace(key, value, scale, granularity):
    noise = _discrete_laplace(key, scale, shape=value.shape)
    return (_grid_index(value, granularity) + noise).astype(jnp.float64) * granularity


@jax.jit
def _secure_gaussian(key, value, sigma, granularity):
    noise = _discrete_gaussian(key, sigma, shape=value.shape)
    return (_grid_index(value, granularity) + noise).astype(jnp.float64) * granularity


def secure_laplace_scale(epsilon: float, sensitivity: float, granularity: float) -> float:
    """The discrete Laplace scale, in grid units, used by :func:`secure_laplace`.

    Rounding each of two neighbouring values to the nearest grid point moves
    each by at most :math:`g/2`, so grid indices of neighbours differ by at
    most :math:`\\Delta/g + 1`: the snapped sensitivity is :math:`\\Delta + g`.
    The discrete Laplace mechanism with scale :math:`b` is
    :math:`\\varepsilon`-DP for integer sensitivity :math:`b\\varepsilon`, so

    .. math::
        b = \\frac{\\Delta + g}{\\varepsilon\\, g}.

    It is computed with exact rationals and rounded *up* to a float64, so the
    guarantee holds exactly for the scale actually used.

    Args:
        epsilon: privacy parameter, > 0.
        sensitivity: the value's sensitivity :math:`\\Delta`, > 0.
        granularity: grid spacing :math:`g`, a power of two.

    Returns:
        The scale :math:`b`, a Python float >= the exact value.

    Raises:
        ValueError: on a non-positive or non-finite argument, a granularity
            that is not a power of two, or a scale outside [2**-1022, 2**52].

    Examples:
        >>> secure_laplace_scale(1.0, 1.0, 2.0**-20) == 2.0**20 + 1
        True
    """
    for name, argument in (("epsilon", epsilon), ("sensitivity", sensitivity), ("granularity", granularity)):
        _check_concrete(name, argument)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    granularity = _check_granularity(granularity)
    exact = (Fraction(sensitivity) + Fraction(granularity)) / (Fraction(epsilon) * Fraction(granularity))
    scale = float_up(exact)
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise ValueError(f"the discrete Laplace scale (sensitivity + granularity) / (epsilon * granularity) "
                         f"= {scale!r} lies outside [2**-1022, 2**52]; use a coarser granularity or a larger "
                         "epsilon.")
    return scale


def secure_laplace(key: Key, value: Any, *, epsilon: float, sensitivity: float,
                   granularity: float = 2.0**-20) -> Array:
    """Laplace mechanism on a power-of-two grid, safe against float low-bit leaks.

    .. math::
        M(v) = g\\,\\big(\\operatorname{round}(v/g) + Z\\big), \\qquad
        Z \\sim \\mathrm{Lap}_{\\mathbb{Z}}(b), \\quad b = \\frac{\\Delta + g}{\\varepsilon g},

    elementwise over ``value``, with independent :math:`Z`
    (:func:`gpuprivacy.noise.discrete_laplace`, exact) and :math:`b` from
    :func:`secure_laplace_scale`. For a scalar value of sensitivity
    :math:`\\Delta` this is :math:`\\varepsilon`-DP, exactly: the output is
    exactly a multiple of :math:`g` and exactly distributed as the discrete
    Laplace mechanism on the grid index, whose sensitivity is at most
    :math:`\\Delta/g + 1`. For an array of :math:`d` elements with L1
    sensitivity :math:`\\Delta`, snapping adds up to one grid step per
    element, so the release is
    :math:`\\varepsilon(\\Delta + d g)/(\\Delta + g)`-DP. See the module
    docstring for what this path protects (the float low bits of the output)
    and what it does not (timing, float errors upstream, the :math:`g/2`
    rounding of the value).

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        value: a real scalar or array; finite, with ``|value| / granularity <=
            2**52``. Under tracing (``jax.vmap``/``jax.jit`` over values) it is
            not checked: NaN maps to 0 and indices are clamped to +-2**52.
        epsilon: privacy parameter, > 0 (concrete).
        sensitivity: sensitivity :math:`\\Delta` of ``value``, > 0 (concrete).
        granularity: grid spacing :math:`g`, a power of two; default
            :math:`2^{-20}`.

    Returns:
        A float64 array shaped like ``value``; every entry is an integer
        multiple of ``granularity`` (exactly, while :math:`|k + Z| \\le 2^{53}`;
        beyond that the float rounding is a post-processing of the discrete
        release and keeps the guarantee).

    Raises:
        ValueError: on invalid privacy parameters, a granularity that is not
            a power of two, or a non-finite or too large value.
        TypeError: if epsilon, sensitivity or granularity are traced, or the
            key is a key array (use ``jax.vmap``).

    Examples:
        >>> import jax
        >>> out = secure_laplace(jax.random.key(0), 0.3, epsilon=1.0, sensitivity=1.0)
        >>> float(out / 2.0**-20).is_integer()
        True

    References:
        Mironov, `On Significance of the Least Significant Bits for
        Differential Privacy <https://doi.org/10.1145/2382196.2382264>`_, CCS 2012.
        Canonne, Kamath, Steinke, `The Discrete Gaussian for Differential
        Privacy <https://arxiv.org/abs/2004.00010>`_, NeurIPS 2020.
    """
    require_x64("gpuprivacy.noise.secure_laplace")
    key = check_key(key)
    scale = secure_laplace_scale(epsilon, sensitivity, granularity)
    value = _check_value(value, granularity)
    return _secure_laplace(key, value, jnp.float64(scale), jnp.float64(granularity))


def secure_gaussian(key: Key, value: Any, *, sigma: float, granularity: float = 2.0**-20) -> Array:
    """Gaussian mechanism on a power-of-two grid, safe against float low-bit leaks.

    .. math::
        M(v) = g\\,\\big(\\operatorname{round}(v/g) + Z\\big), \\qquad
        Z \\sim \\mathcal{N}_{\\mathbb{Z}}\\big(0, (\\sigma/g)^2\\big),

    elementwise over ``value``, with independent :math:`Z` from
    :func:`gpuprivacy.noise.discrete_gaussian` (exact proposal and rejection,
    one float64 acceptance test; see its docstring). For a scalar value of
    sensitivity :math:`\\Delta`, grid indices of neighbours differ by at most
    :math:`\\Delta/g + 1` (snapped sensitivity :math:`\\Delta + g`), so by
    CKS (Section 2, the discrete Gaussian mechanism is
    :math:`\\Delta^2/(2\\sigma^2)`-zCDP) the release satisfies
    :math:`\\rho`-zCDP with

    .. math::
        \\rho = \\frac{(\\Delta + g)^2}{2\\sigma^2}.

    For an array of :math:`d` elements with L2 sensitivity :math:`\\Delta`,
    replace :math:`\\Delta + g` by :math:`\\Delta + \\sqrt{d}\\,g`.

    ``sigma`` is in the units of ``value``; :math:`\\sigma/g` is exact because
    :math:`g` is a power of two. See the module docstring for what this path
    protects and what it does not.

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        value: a real scalar or array; finite, with ``|value| / granularity <=
            2**52`` (unchecked under tracing, as in :func:`secure_laplace`).
        sigma: noise standard deviation parameter, > 0 (concrete), with
            ``sigma / granularity < 2**52``.
        granularity: grid spacing :math:`g`, a power of two; default
            :math:`2^{-20}`.

    Returns:
        A float64 array shaped like ``value``; every entry is an integer
        multiple of ``granularity``.

    Raises:
        ValueError: on invalid sigma or granularity, or a non-finite or too
            large value.
        TypeError: if sigma or granularity are traced, or the key is a key
            array (use ``jax.vmap``).

    Examples:
        >>> import jax
        >>> out = secure_gaussian(jax.random.key(0), [0.1, 5.0], sigma=2.0)
        >>> [float(x / 2.0**-20).is_integer() for x in out]
        [True, True]

    References:
        Canonne, Kamath, Steinke, `The Discrete Gaussian for Differential
        Privacy <https://arxiv.org/abs/2004.00010>`_, NeurIPS 2020 (arXiv 2004.00010v5).
        Mironov, `On Significance of the Least Significant Bits for
        Differential Privacy <https://doi.org/10.1145/2382196.2382264>`_, CCS 2012.
    """
    require_x64("gpuprivacy.noise.secure_gaussian")
    key = check_key(key)
    _check_concrete("sigma", sigma)
    _check_concrete("granularity", granularity)
    sigma = check_positive("sigma", sigma)
    granularity = _check_granularity(granularity)
    sigma_in_grid_units = sigma / granularity  # exact unless it leaves the normal range
    if sigma_in_grid_units < MIN_SCALE:
        raise ValueError(f"sigma / granularity underflows ({sigma!r} / {granularity!r}); use a finer "
                         "granularity.")
    if sigma_in_grid_units >= MAX_SCALE:
        raise ValueError(f"sigma / granularity must be < 2**52, got {sigma_in_grid_units!r}; use a coarser "
                         "granularity.")
    value = _check_value(value, granularity)
    return _secure_gaussian(key, value, jnp.float64(sigma_in_grid_units), jnp.float64(granularity))
