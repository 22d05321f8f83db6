"""Exact discrete Laplace and discrete Gaussian samplers (integer outputs).

The algorithms are Canonne, Kamath & Steinke, `The Discrete Gaussian for
Differential Privacy <https://arxiv.org/abs/2004.00010>`_ (arXiv 2004.00010v5),
Algorithms 1-3. Their loops ("sample ... if rejected, restart", "repeat
until a Bernoulli fails") have a random number of steps per sample. Here
every output element runs the algorithm as a small state machine
(:class:`_CksState`): one iteration of a single ``jax.lax.while_loop``
advances every element by one step, a rejection sends an element back to an
earlier phase, and the loop stops when every element is done. Each
iteration draws one fixed-size batch of random bits, one 64-bit word per
element, so the sampler jits and vmaps (a vmapped while loop keeps finished
members frozen, so ``vmap`` over keys equals a Python loop over keys), and
its running time is random. One flat loop, rather than one loop per level of
the paper's nesting, keeps the compiled program small and the random-bit
budget at one word per element and step.

All randomness is integer. A uniform integer below ``n`` is ``w % n`` for a
64-bit word ``w``, valid only when ``w >= 2**64 mod n`` (the valid words form
a range whose length is a multiple of ``n``, so ``w % n`` is exactly
uniform); an element whose word is invalid (probability below ``n / 2**64``)
repeats its step with the next iteration's word. Bernoulli(num/den) is
``uniform_below(den) < num``. The discrete Laplace sampler is therefore exact
for the float64 ``scale`` it is given, read as the dyadic rational it is: no
floating point touches its law. The discrete Gaussian sampler is exact but
for one float step, its acceptance test (see :func:`discrete_gaussian`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_key, check_positive, is_tracer
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key
from gpuprivacy.noise._validate import check_shape

# Largest discrete Laplace scale: keeps U + t V (CKS Alg 2, step 4) below 2**63
# unless V >= 2047, an event of probability e^{-2047}.
MAX_SCALE = 2.0**52
# Smallest scale or sigma: the smallest normal float64. Subnormals are refused
# because XLA on CPU may flush them to zero in float arithmetic.
MIN_SCALE = 2.0**-1022

# Phases of one element (CKS arXiv 2004.00010v5, Algorithms 1-3).
_REMAINDER = 0  # Alg 2 step 1: U uniform on {0, ..., t-1}
_KEEP = 1  # Alg 2 step 2: D ~ Bernoulli(exp(-U/t)) by Alg 1; restart at step 1 if D = 0
_QUOTIENT = 2  # Alg 2 step 3: V counts successes of Bernoulli(exp(-1)) (Alg 1) before a failure;
#               then steps 4-8: Y = floor((U + tV) / s), a sign, and the restart on "-0"
_ACCEPT = 3  # Alg 3 step 4: keep the discrete Laplace Y with probability exp(-gamma), else restart
_DONE = 4


class _CksState(NamedTuple):
    step: Array  # int32 scalar: iteration index, folded into the key
    phase: Array  # int32[num]
    remainder: Array  # uint64[num]: U of Alg 2
    counter: Array  # uint64[num]: k of Alg 1, the index of the current Bernoulli(gamma / k)
    quotient: Array  # uint64[num]: V of Alg 2
    value: Array  # int64[num]: the signed sample


def _scale_as_fraction(scale: Array) -> tuple[Array, Array]:
    """``(t, shift)`` in uint64 with ``scale == t / 2**shift`` exactly.

    A positive float64 is ``mantissa * 2**exponent``; trailing zero bits of the
    mantissa are moved into the exponent, so ``t`` is odd unless ``shift == 0``.
    For ``scale <= 2**52``, ``t <= 2**53``.
    """
    bits = jax.lax.bitcast_convert_type(scale, jnp.uint64)
    biased = (bits >> 52) & 0x7FF
    fraction = bits & (2**52 - 1)
    normal = biased != 0
    mantissa = jnp.where(normal, fraction | 2**52, fraction)
    exponent = jnp.where(normal, biased, 1).astype(jnp.int64) - 1075
    trailing = jax.lax.population_count((mantissa & (0 - mantissa)) - 1)
    odd = mantissa >> trailing
    exponent = exponent + trailing.astype(jnp.int64)
    t = jnp.where(exponent >= 0, odd << jnp.clip(exponent, 0, 63).astype(jnp.uint64), odd)
    shift = jnp.where(exponent >= 0, 0, -exponent).astype(jnp.uint64)
    return t, shift


def _cks_sample(key: Key, t: Array, shift: Array, num: int, sigma: Array | None = None) -> Array:
    """``num`` discrete Laplace samples of scale ``t / 2**shift`` (CKS Algorithm 2), int64.

    With ``sigma`` (and ``t = floor(sigma) + 1``, ``shift = 0``) each discrete
    Laplace sample is then kept with probability
    :math:`\\exp(-(|Y| - \\sigma^2/t)^2 / (2\\sigma^2))`, or the element restarts
    (CKS Algorithm 3), giving discrete Gaussian samples.

    CKS Algorithm 1 (Bernoulli(:math:`e^{-\\gamma}`) for :math:`\\gamma \\in [0,
    1]`) runs inline in the ``_KEEP`` and ``_QUOTIENT`` phases: with ``K`` the
    first ``k >= 1`` at which Bernoulli(:math:`\\gamma/k`) fails, the result is
    "K is odd", which has probability :math:`e^{-\\gamma}`. For
    :math:`\\gamma = U/t`, Bernoulli(:math:`\\gamma/k`) is "a uniform integer
    below :math:`tk` is below :math:`U`", exact in uint64 while :math:`tk <
    2^{64}`, i.e. unless :math:`k > 2^{11}`, which has probability below
    :math:`1/2047!`.

    Each element uses one random 64-bit word per step: the whole word for a
    uniform integer (``_REMAINDER``, ``_KEEP``), its low 32 bits for
    Bernoulli(:math:`1/k`) and bit 32 for the sign (``_QUOTIENT``), or the
    whole word as a float uniform (``_ACCEPT``). A word in the rejected low
    range leaves the element where it is, to retry with the next word.
    """

    def advance(state: _CksState) -> _CksState:
        word = jax.random.bits(jax.random.fold_in(key, state.step), (num,), jnp.uint64)
        phase, counter = state.phase, state.counter

        # A uniform integer below `bound`: U itself in _REMAINDER (Alg 2 step 1),
        # and in _KEEP "uniform < U", i.e. Bernoulli(U / (t k)) = Bernoulli(gamma / k).
        bound = jnp.where(phase == _KEEP, t * counter, t)
        uniform_valid = word >= (0 - bound) % bound  # 2**64 mod bound, by uint64 wrap-around
        uniform = word % bound
        # Bernoulli(1/k) from the low 32 bits (k < 2**32 always: P(k >= 2**32) = 1/(2**32)!).
        low, small_counter = word.astype(jnp.uint32), counter.astype(jnp.uint32)
        inverse_valid = low >= (0 - small_counter) % small_counter
        inverse_success = low % small_counter == 0

        # _REMAINDER: take U, then start Alg 1 for gamma = U/t at k = 1.
        start_keep = (phase == _REMAINDER) & uniform_valid
        # _KEEP: one Bernoulli(gamma / k) of Alg 1.
        keep_step = (phase == _KEEP) & uniform_valid
        keep_success = keep_step & (uniform < state.remainder)
        keep_ends = keep_step & ~keep_success  # Alg 1 stops at K = counter; D = (K odd)
        kept = keep_ends & (counter % 2 == 1)
        # _QUOTIENT: Alg 1 with gamma = 1, one Bernoulli(1/k) (from k = 2).
        quotient_step = (phase == _QUOTIENT) & inverse_valid
        quotient_success = quotient_step & inverse_success
        trial_ends = quotient_step & ~quotient_success  # one Bernoulli(e^{-1}) trial is over
        trial_succeeds = trial_ends & (counter % 2 == 1)  # V += 1, next trial
        quotient_ends = trial_ends & (counter % 2 == 0)  # first failure: V is final

        # Alg 2 steps 4-8 for elements whose V just became final, with the sign
        # from bit 32 of the word (the Bernoulli(1/k) used bits 0-31).
        x = state.remainder + t * state.quotient
        magnitude = jnp.where(shift >= 64, 0, x >> jnp.minimum(shift, 63)).astype(jnp.int64)
        negative = ((word >> 32) & 1) == 1
        signed = jnp.where(negative, -magnitude, magnitude)
        minus_zero = negative & (magnitude == 0)  # step 7: reject, or 0 would count twice
        laplace_done = quotient_ends & ~minus_zero

        next_phase = phase
        next_phase = jnp.where(start_keep, _KEEP, next_phase)
        next_phase = jnp.where(keep_ends, jnp.where(kept, _QUOTIENT, _REMAINDER), next_phase)
        next_phase = jnp.where(quotient_ends & minus_zero, _REMAINDER, next_phase)
        next_phase = jnp.where(laplace_done, _DONE if sigma is None else _ACCEPT, next_phase)
        value = jnp.where(laplace_done, signed, state.value)

        if sigma is not None:
            # _ACCEPT (Alg 3 step 4), the one float step: keep Y if u < exp(-gamma),
            # compared in log space, with gamma in float64 and u = word / 2**64
            # (relative rounding 2**-53, resolution 2**-64). gamma is written as
            # (|Y|/sigma - sigma/t)^2 / 2, equal to (|Y| - sigma^2/t)^2 / (2 sigma^2)
            # but free of sigma^2, which underflows to 0 (and gamma to NaN) for
            # sigma below 1e-154.
            gamma = 0.5 * (jnp.abs(state.value).astype(jnp.float64) / sigma - sigma / t.astype(jnp.float64)) ** 2
            accepted = jnp.log(word.astype(jnp.float64) * 2.0**-64) < -gamma
            next_phase = jnp.where(phase == _ACCEPT, jnp.where(accepted, _DONE, _REMAINDER), next_phase)

        next_counter = jnp.where(keep_success | quotient_success, counter + 1, counter)
        next_counter = jnp.where(start_keep, 1, next_counter)
        # Alg 1 with gamma = 1 starts at k = 2: Bernoulli(1/1) always succeeds.
        next_counter = jnp.where(kept | trial_succeeds, 2, next_counter)
        quotient = jnp.where(kept, 0, state.quotient)
        quotient = jnp.where(trial_succeeds, quotient + 1, quotient)
        remainder = jnp.where(start_keep, uniform, state.remainder)
        return _CksState(state.step + 1, next_phase, remainder, next_counter.astype(jnp.uint64),
                         quotient, value)

    state = _CksState(
        step=jnp.int32(0),
        phase=jnp.full((num,), _REMAINDER, jnp.int32),
        remainder=jnp.zeros((num,), jnp.uint64),
        counter=jnp.ones((num,), jnp.uint64),
        quotient=jnp.zeros((num,), jnp.uint64),
        value=jnp.zeros((num,), jnp.int64),
    )
    state = jax.lax.while_loop(lambda state: jnp.any(state.phase != _DONE), advance, state)
    return state.value


@functools.partial(jax.jit, static_argnames=("shape",))
def _discrete_laplace(key, scale, *, shape):
    # Kernels are total: an unvalidated traced scale is clipped to
    # [MIN_SCALE, MAX_SCALE] (NaN becomes 1), so the loop always terminates.
    scale = jnp.where(jnp.isnan(scale), 1.0, jnp.clip(scale, MIN_SCALE, MAX_SCALE))
    t, shift = _scale_as_fraction(scale)
    return _cks_sample(key, t, shift, int(np.prod(shape))).reshape(shape)


@functools.partial(jax.jit, static_argnames=("shape",))
def _discrete_gaussian(key, sigma, *, shape):
    # Total on unvalidated tracers, as in _discrete_laplace.
    sigma = jnp.where(jnp.isnan(sigma), 1.0, jnp.clip(sigma, MIN_SCALE, MAX_SCALE - 1))
    t = (jnp.floor(sigma) + 1).astype(jnp.uint64)  # CKS Alg 3, step 1: an integer scale
    return _cks_sample(key, t, jnp.uint64(0), int(np.prod(shape)), sigma).reshape(shape)


def discrete_laplace(key: Key, scale: float, shape: tuple[int, ...] = ()) -> Array:
    """Exact discrete Laplace samples, int64.

    .. math::
        P(X = x) = \\frac{1 - q}{1 + q}\\, q^{|x|}, \\qquad q = e^{-1/\\mathrm{scale}},
        \\quad x \\in \\mathbb{Z}.

    CKS Algorithm 2 with :math:`t/s` = ``scale``, read exactly as the dyadic
    rational a float64 is (:math:`s` a power of two). **Exact**: every step
    uses integer arithmetic on uniform 64-bit words (exact uniform integers by
    rejection, exact rational Bernoullis, and CKS Algorithm 1 for
    Bernoulli(:math:`e^{-\\gamma}`) with rational :math:`\\gamma`), so the law
    is exactly the one above for the float64 ``scale`` passed in; no float
    rounding enters. The only departures are the PRNG itself and integer
    overflow, possible only on events of probability below :math:`e^{-2000}`
    (a geometric count :math:`V \\ge 2047`, or Algorithm 1's counter
    :math:`k > 2^{11}`).
    Rejection loops run as batched ``while`` loops (see the module
    docstring), so the sampler jits and vmaps; its running time is random.

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        scale: the scale, :math:`2^{-1022} \\le \\mathrm{scale} \\le 2^{52}`. A traced
            scale (e.g. under ``jax.vmap``) is not checked; pass validated
            values.
        shape: sample shape.

    Returns:
        An int64 array of ``shape``.

    Raises:
        ValueError: if ``scale`` is not finite or outside [2**-1022, 2**52].
        TypeError: if the key is a key array (use ``jax.vmap``) or the shape
            is invalid.

    Examples:
        >>> import jax, gpuprivacy
        >>> gpuprivacy.noise.discrete_laplace(jax.random.key(0), 3.0, (4,)).dtype
        dtype('int64')

    References:
        Canonne, Kamath, Steinke, `The Discrete Gaussian for Differential
        Privacy <https://arxiv.org/abs/2004.00010>`_, NeurIPS 2020
        (arXiv 2004.00010v5), Algorithms 1 and 2.
    """
    require_x64("gpuprivacy.noise.discrete_laplace")
    key = check_key(key)
    shape = check_shape(shape)
    scale = check_positive("scale", scale)
    if not is_tracer(scale) and not MIN_SCALE <= scale <= MAX_SCALE:
        raise ValueError(f"scale must lie in [2**-1022, 2**52] (a normal float64, small enough for the exact "
                         f"integer arithmetic to fit int64), got {scale!r}.")
    return _discrete_laplace(key, jnp.asarray(scale).astype(jnp.float64), shape=shape)


def discrete_gaussian(key: Key, sigma: float, shape: tuple[int, ...] = ()) -> Array:
    """Discrete Gaussian samples, int64 (exact but for one float acceptance test).

    .. math::
        P(X = x) = \\frac{e^{-x^2 / (2\\sigma^2)}}{\\sum_{y \\in \\mathbb{Z}} e^{-y^2/(2\\sigma^2)}},
        \\qquad x \\in \\mathbb{Z}.

    CKS Algorithm 3: with :math:`t = \\lfloor \\sigma \\rfloor + 1`, propose
    :math:`Y` from the discrete Laplace with integer scale :math:`t`
    (:func:`discrete_laplace`, exact) and keep it with probability

    .. math::
        \\exp\\!\\Big(-\\frac{(|Y| - \\sigma^2/t)^2}{2\\sigma^2}\\Big).

    **What is exact:** the proposal and the rejection logic. **What is
    float:** the acceptance test above. CKS draw it exactly with rational
    arithmetic on :math:`\\sigma^2`; here :math:`\\gamma = (|Y| -
    \\sigma^2/t)^2/(2\\sigma^2)` is computed in float64 and compared with
    :math:`\\log u` for :math:`u = w / 2^{64}`, :math:`w` a uniform 64-bit
    word, because the exact rational needs integers wider than 64 bits for a
    general float ``sigma``. Each acceptance probability is therefore off by
    a relative :math:`O(2^{-52})` plus an absolute :math:`2^{-64}` (so the
    pmf is exact to about 16 significant digits where it is above
    :math:`2^{-64}`, and its far tail beyond about :math:`9\\sigma` is only
    resolved to that absolute level).

    Args:
        key: a single PRNG key, ``jax.random.key(seed)``.
        sigma: the scale :math:`\\sigma`, :math:`2^{-1022} \\le \\sigma < 2^{52}`. A
            traced sigma is not checked; pass validated values.
        shape: sample shape.

    Returns:
        An int64 array of ``shape``.

    Raises:
        ValueError: if ``sigma`` is not finite or outside [2**-1022, 2**52).
        TypeError: if the key is a key array (use ``jax.vmap``) or the shape
            is invalid.

    Examples:
        >>> import jax, gpuprivacy
        >>> gpuprivacy.noise.discrete_gaussian(jax.random.key(0), 2.0, (4,)).shape
        (4,)

    References:
        Canonne, Kamath, Steinke, `The Discrete Gaussian for Differential
        Privacy <https://arxiv.org/abs/2004.00010>`_, NeurIPS 2020
        (arXiv 2004.00010v5), Algorithm 3.
    """
    require_x64("gpuprivacy.noise.discrete_gaussian")
    key = check_key(key)
    shape = check_shape(shape)
    sigma = check_positive("sigma", sigma)
    if not is_tracer(sigma) and not MIN_SCALE <= sigma < MAX_SCALE:
        raise ValueError(f"sigma must lie in [2**-1022, 2**52) (a normal float64, small enough for the exact "
                         f"integer arithmetic to fit int64), got {sigma!r}.")
    return _discrete_gaussian(key, jnp.asarray(sigma).astype(jnp.float64), shape=shape)
