"""Truncated exponential and Laplace samplers, by inverse CDF in log space.

Both are *idealized numerics* (float samples of a continuous law), built so
that the inverse CDF stays accurate for windows that are tiny (width 1e-12),
huge (1e6, or infinite) or far out in a tail ([30, 31], [-1000, -999]), and
so that no sample is NaN or outside the window.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from gpuprivacy._checks import check_key, is_tracer
from gpuprivacy._typing import Array, Key
from gpuprivacy.noise._continuous import random_words, uniform_from_word, uniform_from_words
from gpuprivacy.noise._validate import as_parameter, check_bound, check_float_dtype, check_shape, round_inward


def _truncated_exponential_inverse(tail: Array, upper: Array) -> Array:
    """Inverse of the survival function of Exp(1) conditioned on [0, upper].

    With :math:`p = 1 - e^{-u}` (``-expm1(-u)``, accurate for tiny ``u``) the
    survival function is :math:`S(x) = (e^{-x} - e^{-u}) / p`, so
    :math:`S(x) = V` solves to

    .. math::
        x = -\\log(e^{-u} + V p) = -\\operatorname{log1p}(-(1 - V)\\,p).

    The first form is accurate when :math:`x > \\ln 2` (its argument is below
    1/2); the second when :math:`x \\le \\ln 2` (``(1 - V) p`` is then small
    and ``log1p`` keeps its relative precision, which matters for tiny ``u``).
    Both branches are finite for every ``V`` in (0, 1), and the result is
    clipped to [0, u] against rounding.
    """
    mass = -jnp.expm1(-upper)
    tail_floor = jnp.exp(-upper)
    far = tail_floor + tail * mass
    near = -jnp.log1p(-(1 - tail) * mass)
    x = jnp.where(far < 0.5, -jnp.log(far), near)
    return jnp.clip(x, 0, upper)


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _truncated_exponential(key, upper, *, shape, dtype):
    words = random_words(key, 2, shape, dtype)
    return _truncated_exponential_inverse(uniform_from_words(words[0], words[1], dtype), upper)


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _truncated_laplace(key, lower, upper, *, shape, dtype):
    # The Laplace density restricted to [0, inf) is e^{-x}/2 and memoryless,
    # so the part of [lower, upper] right of 0 is `start + TruncExp(width)`,
    # and by symmetry the part left of 0 is `start - TruncExp(width)`. A window
    # on one side of 0 uses one part only; a straddling window picks the side
    # with probability proportional to its mass. Every step is a closed form
    # in log space, with no difference of two CDF values (which would cancel
    # to 0 far in a tail).
    words = random_words(key, 3, shape, dtype)
    right_start = jnp.maximum(lower, 0)
    right_width = upper - right_start
    left_start = jnp.minimum(upper, 0)
    left_width = left_start - lower
    # Unused sides get a harmless width of 1 and a log-mass of -inf.
    has_right, has_left = right_width > 0, left_width > 0
    right_width = jnp.where(has_right, right_width, 1)
    left_width = jnp.where(has_left, left_width, 1)
    # log mass(side) = -|start| + log(1 - e^{-width}) - log 2 (the log 2 cancels).
    right_log_mass = jnp.where(has_right, -right_start + jnp.log(-jnp.expm1(-right_width)), -jnp.inf)
    left_log_mass = jnp.where(has_left, left_start + jnp.log(-jnp.expm1(-left_width)), -jnp.inf)
    probability_right = jax.nn.sigmoid(right_log_mass - left_log_mass)
    go_right = uniform_from_word(words[2], dtype) < probability_right

    tail = uniform_from_words(words[0], words[1], dtype)
    from_right = right_start + _truncated_exponential_inverse(tail, right_width)
    from_left = left_start - _truncated_exponential_inverse(tail, left_width)
    return jnp.clip(jnp.where(go_right, from_right, from_left), lower, upper)


def truncated_exponential(key: Key, upper: float, shape: tuple[int, ...] = (), dtype=None) -> Array:
    """Rate-1 exponential samples conditioned on [0, upper].

    .. math::
        p(x) = \\frac{e^{-x}}{1 - e^{-u}}, \\qquad 0 \\le x \\le u,

    sampled by the inverse CDF in log space:
    :math:`x = -\\operatorname{log1p}(-(1 - V)(1 - e^{-u}))` for the part of
    the window below :math:`\\ln 2` and :math:`x = -\\log(e^{-u} + V(1 - e^{-u}))`
    above it, with ``expm1`` for :math:`1 - e^{-u}`. This keeps full relative
    precision for tiny windows (``upper=1e-12`` samples ``V u`` to float
    accuracy) and for huge or infinite ones. The uniform ``V`` has full
    relative precision near 0 (see :func:`gpuprivacy.noise.exponential`), so
    the tail is resolved to probability about :math:`2^{-64}` in float64.
    Samples are clipped to [0, upper] against rounding and are never NaN.
    Idealized numerics (float samples of a continuous law).

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        upper: the truncation point, > 0; ``float("inf")`` gives
            :func:`gpuprivacy.noise.exponential`. For float32 it is rounded
            down to a float32 value.
        shape: sample shape.
        dtype: float32 or float64 (default).

    Returns:
        An array of ``shape`` and ``dtype`` with entries in [0, upper].

    Raises:
        ValueError: if ``upper`` is NaN or <= 0 (or rounds to 0 in float32).
        TypeError: if the key is a key array (use ``jax.vmap``), or the shape
            or dtype is invalid.

    Examples:
        >>> import jax, gpuprivacy
        >>> x = gpuprivacy.noise.truncated_exponential(jax.random.key(0), 1e-12, (4,))
        >>> bool(((0 <= x) & (x <= 1e-12)).all())
        True

    References:
        Devroye, `Non-Uniform Random Variate Generation
        <https://luc.devroye.org/rnbookindex.html>`_, Springer 1986, Sec. II.2
        (the inversion method).
    """
    key = check_key(key)
    shape = check_shape(shape)
    dtype = check_float_dtype(dtype)
    upper = check_bound("upper", upper)
    if not is_tracer(upper):
        if upper <= 0:
            raise ValueError(f"upper must be > 0 (it may be inf), got {upper!r}. The window [0, upper] "
                             "must have positive width.")
        upper = round_inward(upper, dtype, up=False)
        if upper <= 0:
            raise ValueError(f"upper={upper!r} rounds to 0 in {dtype.name}; use dtype=jnp.float64.")
    return _truncated_exponential(key, as_parameter(upper, dtype), shape=shape, dtype=dtype)


def truncated_laplace(key: Key, lower: float, upper: float, shape: tuple[int, ...] = (),
                      dtype=None) -> Array:
    """Unit-scale Laplace samples conditioned on [lower, upper].

    .. math::
        p(x) = \\frac{e^{-|x|}}{\\int_a^b e^{-|y|}\\,dy}, \\qquad a \\le x \\le b.

    Sampled without differencing CDF values: the Laplace density on
    :math:`[0, \\infty)` is memoryless, so the part of the window right of 0
    is :math:`\\max(a, 0) + T` with :math:`T` a truncated exponential
    (:func:`truncated_exponential`) on :math:`[0, b - \\max(a, 0)]`, and the
    part left of 0 is its mirror image. A window that straddles 0 first picks
    a side with probability proportional to its mass,
    :math:`1 - e^{-b}` against :math:`1 - e^{a}` (via ``expm1``). Windows far
    in a tail such as [30, 31] or [-1000, -999] are therefore as accurate as
    [0, 1]. Samples are clipped to [lower, upper] and are never NaN.
    Idealized numerics (float samples of a continuous law).

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        lower: lower end of the window; may be ``-inf``.
        upper: upper end, > lower; may be ``inf``. For float32 both ends are
            rounded inward to float32 values.
        shape: sample shape.
        dtype: float32 or float64 (default).

    Returns:
        An array of ``shape`` and ``dtype`` with entries in [lower, upper].

    Raises:
        ValueError: if a bound is NaN or ``lower >= upper`` (also after
            rounding to float32).
        TypeError: if the key is a key array (use ``jax.vmap``), or the shape
            or dtype is invalid.

    Examples:
        >>> import jax, gpuprivacy
        >>> x = gpuprivacy.noise.truncated_laplace(jax.random.key(0), -1000.0, -999.0, (4,))
        >>> bool(((-1000 <= x) & (x <= -999)).all())
        True

    References:
        Geng, Ding, Guo & Kumar, Tight Analysis of Privacy and Utility Tradeoff
        in Approximate Differential Privacy, AISTATS 2020 (the truncated
        Laplace mechanism); Devroye, `Non-Uniform Random Variate Generation
        <https://luc.devroye.org/rnbookindex.html>`_, Springer 1986, Sec. II.2.
    """
    key = check_key(key)
    shape = check_shape(shape)
    dtype = check_float_dtype(dtype)
    lower = check_bound("lower", lower)
    upper = check_bound("upper", upper)
    if not (is_tracer(lower) or is_tracer(upper)):
        if not lower < upper:
            raise ValueError(f"lower must be < upper, got lower={lower!r}, upper={upper!r}. "
                             "Pass a window of positive width.")
        lower, upper = round_inward(lower, dtype, up=True), round_inward(upper, dtype, up=False)
        if not lower < upper:
            raise ValueError(f"the window holds at most one {dtype.name} value after rounding inward "
                             f"(lower={lower!r}, upper={upper!r}); use dtype=jnp.float64 or widen it.")
    return _truncated_laplace(key, as_parameter(lower, dtype), as_parameter(upper, dtype),
                              shape=shape, dtype=dtype)

