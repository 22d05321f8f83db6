"""Continuous noise samplers at unit scale: ``(key, shape=(), dtype=None) -> Array``.

Samplers are keyed (no global state) and return float64 unless ``dtype`` is
given (float32 and float64 are supported). Multiply by the scale in the
caller. These are *idealized numerics*: floating-point samples of a
continuous law, exact up to rounding, with the tail resolution stated in each
docstring. Releasing them directly is open to Mironov's (2012) low-bit
attack; :func:`gpuprivacy.noise.secure_laplace` and
:func:`gpuprivacy.noise.secure_gaussian` are the release path that is not.

Exponential tails come from :func:`uniform_from_words`, a uniform on
(0, 1) whose small values keep full relative precision, so that
:math:`-\\log U` is accurate far into the tail instead of stopping at
:math:`-\\log 2^{-53} \\approx 36.7`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import check_key
from gpuprivacy._typing import Array, Key
from gpuprivacy._threefry import bits
from gpuprivacy.noise._validate import check_float_dtype, check_shape

# Bits of the sign-free float layout: (word dtype, mantissa bits, exponent bias).
_LAYOUT = {
    np.dtype(np.float64): (jnp.uint64, 52, 1023),
    np.dtype(np.float32): (jnp.uint32, 23, 127),
}


def random_words(key: Key, count: int, shape: tuple[int, ...], dtype: np.dtype) -> Array:
    """``count`` independent random words per sample, ``[count, *shape]``.

    The words are uint64 for float64 and uint32 for float32. Kernels draw all
    their bits with this one call: each ``jax.random`` call site compiles its
    own copy of the PRNG, and compile time dominates small samples. The words
    are ``jax.random.bits``'s, hashed as one flat vector under ``vmap``
    (:func:`gpuprivacy._threefry.bits`).
    """
    return bits(key, (count, *shape), _LAYOUT[np.dtype(dtype)][0])


def uniform_from_words(mantissa_word: Array, binade_word: Array, dtype: np.dtype) -> Array:
    """Uniform samples on (0, 1) with full relative precision near 0.

    The binade is drawn first: :math:`Z` is the number of leading zero bits of
    ``binade_word`` (:math:`P(Z = z) = 2^{-z-1}`), then the top bits of
    ``mantissa_word`` give a uniform mantissa :math:`M` that fills it:

    .. math::
        U = (1 + M\\,2^{-p})\\,2^{-1-Z}, \\qquad M \\sim \\mathrm{Unif}\\{0, \\dots, 2^{p}-1\\},

    with :math:`p` = 52 (float64, uint64 words) or 23 (float32, uint32 words).
    Every binade :math:`[2^{-1-z}, 2^{-z})` gets its exact probability and,
    inside it, the full float resolution. The smallest binade is
    :math:`[2^{-65}, 2^{-64})` in float64, so tail probabilities are resolved
    down to about :math:`2^{-64}` (:math:`2^{-32}` in float32), and the value
    is never 0 or 1. The low bits of ``mantissa_word`` are unused and free for
    a sign.
    """
    word, mantissa_bits, bias = _LAYOUT[np.dtype(dtype)]
    width = jnp.iinfo(word).bits
    mantissa = mantissa_word >> (width - mantissa_bits)
    exponent = (bias - 1) - jax.lax.clz(binade_word)  # biased exponent of 2**(-1 - Z)
    return jax.lax.bitcast_convert_type((exponent << mantissa_bits) | mantissa, dtype)


def uniform_from_word(word: Array, dtype: np.dtype) -> Array:
    """A uniform sample on the grid :math:`\\{0, 2^{-p-1}, \\dots, 1 - 2^{-p-1}\\}` from one word."""
    word_dtype, mantissa_bits, _ = _LAYOUT[np.dtype(dtype)]
    width = jnp.iinfo(word_dtype).bits
    return (word >> (width - mantissa_bits - 1)).astype(dtype) * (2.0 ** -(mantissa_bits + 1))


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _exponential(key, *, shape, dtype):
    words = random_words(key, 2, shape, dtype)
    return -jnp.log(uniform_from_words(words[0], words[1], dtype))


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _laplace(key, *, shape, dtype):
    words = random_words(key, 2, shape, dtype)
    magnitude = -jnp.log(uniform_from_words(words[0], words[1], dtype))
    negative = (words[0] & 1) == 1  # the lowest bit, unused by the mantissa
    return jnp.where(negative, -magnitude, magnitude)


def laplace(key: Key, shape: tuple[int, ...] = (), dtype=None) -> Array:
    """Standard Laplace samples.

    .. math::
        p(x) = \\tfrac12 e^{-|x|}, \\qquad x \\in \\mathbb{R}.

    Sampled as a random sign times :func:`exponential`; |x| is resolved up to
    about 45 in float64 (tail probability :math:`2^{-64}`). Idealized
    numerics: see the module docstring.

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        shape: sample shape.
        dtype: float32 or float64 (default).

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        TypeError: if the key is a key array (use ``jax.vmap``), or the shape
            or dtype is invalid.

    Examples:
        >>> import jax, gpuprivacy
        >>> gpuprivacy.noise.laplace(jax.random.key(0), (3,)).shape
        (3,)

    References:
        Dwork, McSherry, Nissim, Smith, `Calibrating Noise to Sensitivity in
        Private Data Analysis <https://doi.org/10.1007/11681878_14>`_, TCC 2006.
    """
    return _laplace(check_key(key), shape=check_shape(shape), dtype=check_float_dtype(dtype))


def gaussian(key: Key, shape: tuple[int, ...] = (), dtype=None) -> Array:
    """Standard normal samples.

    .. math::
        p(x) = \\frac{1}{\\sqrt{2\\pi}} e^{-x^2/2}.

    Uses ``jax.random.normal`` (inverse error function of a uniform); |x| is
    resolved up to about 8.1 in float64 (tail probability about
    :math:`2^{-52}`). Idealized numerics: see the module docstring.

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        shape: sample shape.
        dtype: float32 or float64 (default).

    Returns:
        An array of ``shape`` and ``dtype``.

    Examples:
        >>> import jax, gpuprivacy
        >>> gpuprivacy.noise.gaussian(jax.random.key(0), (2, 3)).shape
        (2, 3)

    References:
        Dwork & Roth, `The Algorithmic Foundations of Differential Privacy
        <https://doi.org/10.1561/0400000042>`_, 2014, App. A (the Gaussian mechanism).
    """
    return threefry.normal(check_key(key), check_shape(shape), check_float_dtype(dtype))


def gumbel(key: Key, shape: tuple[int, ...] = (), dtype=None) -> Array:
    """Standard Gumbel samples (high-resolution tails).

    .. math::
        P(X \\le x) = \\exp(-e^{-x}).

    Uses ``jax.random.gumbel(mode="high")``, which draws two uniforms per
    sample so that both tails keep float resolution; this is the Gumbel-max
    noise of report-noisy-max. Idealized numerics: see the module docstring.

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        shape: sample shape.
        dtype: float32 or float64 (default).

    Returns:
        An array of ``shape`` and ``dtype``.

    Examples:
        >>> import jax, gpuprivacy
        >>> gpuprivacy.noise.gumbel(jax.random.key(0)).dtype
        dtype('float64')

    References:
        Durfee & Rogers, `Practical Differentially Private Top-k Selection with
        Pay-what-you-get Composition <https://arxiv.org/abs/1905.04273>`_,
        NeurIPS 2019 (Gumbel noise and the exponential mechanism).
    """
    return threefry.gumbel(check_key(key), check_shape(shape), check_float_dtype(dtype))


def exponential(key: Key, shape: tuple[int, ...] = (), dtype=None) -> Array:
    """Standard exponential samples.

    .. math::
        p(x) = e^{-x}, \\qquad x \\ge 0.

    Computed as :math:`-\\log U` with ``U`` from :func:`uniform_from_words`,
    so the tail is resolved up to about :math:`64 \\ln 2 \\approx 44` in float64
    (:math:`32 \\ln 2 \\approx 22` in float32) with full relative precision.
    Idealized numerics: see the module docstring.

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        shape: sample shape.
        dtype: float32 or float64 (default).

    Returns:
        An array of ``shape`` and ``dtype``, all entries > 0.

    Examples:
        >>> import jax, gpuprivacy
        >>> bool((gpuprivacy.noise.exponential(jax.random.key(0), (5,)) > 0).all())
        True

    References:
        Mironov, `On Significance of the Least Significant Bits for
        Differential Privacy <https://doi.org/10.1145/2382196.2382264>`_, CCS 2012
        (why the resolution of the uniform behind :math:`-\\log U` matters).
    """
    return _exponential(check_key(key), shape=check_shape(shape), dtype=check_float_dtype(dtype))
