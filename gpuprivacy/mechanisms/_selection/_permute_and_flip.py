"""Permute-and-flip (McKenna & Sheldon 2020) and its exact output law.

Scale, ties and totality as in :mod:`._common`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import check_epsilon, check_positive
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key, Scores
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._common import check_bool, check_scores, sanitize
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._selection._common import (SelectionInfo, _batched_in_chunks, _check_selection, _selection_info,
                                                      _selection_scale, _selection_release)


def _shuffle_rounds(num_candidates: int) -> int:
    """The rounds of ``jax.random.permutation``'s shuffle: enough 32-bit sort keys that ties are unlikely.

    JAX's ``_shuffle`` (after TensorFlow's ``random_ops.cc``): ``ceil(3 ln n / ln(2^32 - 1))``.
    """
    return int(np.ceil(3 * np.log(max(1, num_candidates)) / np.log(np.iinfo(np.uint32).max)))


def _uniform_permutation(key: Key, num_candidates: int) -> Array:
    """``jax.random.permutation(key, num_candidates)``, element for element, as int32, 4x faster on CPU.

    JAX shuffles by rounds of a stable ``sort_key_val`` of the indices by fresh 32-bit random keys. A stable
    sort by ``k`` orders like an unstable sort by the distinct 64-bit words ``k << 32 | position``, so each
    round here sorts those words alone (a one-operand sort, which XLA's CPU backend runs with a native
    comparison, where the two-operand one calls a compiled comparator per comparison: 0.4 ms instead of
    3.9 ms at n = 10^4) and reads the positions back from the low bits. Same keys, same rounds, so the same
    permutation (tests/mechanisms/test_selection_batched.py checks it against ``jax.random.permutation``).
    """
    positions = jnp.arange(num_candidates, dtype=jnp.uint64)
    order = jnp.arange(num_candidates, dtype=jnp.int32)
    for _ in range(_shuffle_rounds(num_candidates)):
        key, subkey = threefry.split(key)
        sort_keys = threefry.bits(subkey, (num_candidates,), jnp.uint32)
        words = jax.lax.sort((sort_keys.astype(jnp.uint64) << 32) | positions)
        order = order[(words & 0xFFFFFFFF).astype(jnp.int32)]
    return order


def _permute_and_flip_kernel(key: Key, scores: Array, scale: Array) -> tuple[Array, SelectionInfo]:
    scores = sanitize(scores)
    permutation_key, coin_key = threefry.split(key)
    order = _uniform_permutation(permutation_key, scores.shape[0])
    # McKenna & Sheldon (arXiv 2010.12603), Alg. 1: visit candidates in random
    # order and stop at the first heads of a coin with
    # Pr[heads] = exp((q_r - q*) / b); the argmax has Pr = 1, so it always stops.
    # All coins are flipped at once; those after the first heads are unused.
    heads_probability = jnp.exp((scores[order] - jnp.max(scores)) / scale)
    heads = jax.random.bernoulli(coin_key, heads_probability)
    selected = order[jnp.argmax(heads)].astype(jnp.int32)  # argmax of bools: first True
    return selected, _selection_info(scores, selected, scale)


# Vmapped (run_trials, the sweeps), the trials run in chunks that stay in the CPU caches (._common).
_permute_and_flip = jax.jit(_batched_in_chunks(_permute_and_flip_kernel))


def permute_and_flip(key: Key, scores: Scores, *, epsilon: float, sensitivity: float = 1.0,
                     monotonic: bool = False, clip: bool = False) -> Release:
    """Permute-and-flip (McKenna & Sheldon 2020), implemented literally.

    Visit the candidates in a uniformly random order; at candidate :math:`r`
    flip a coin with

    .. math:: \\Pr[\\text{heads}] = \\exp\\Big(\\frac{q_r(x) - q^*(x)}{b}\\Big), \\qquad
              q^* = \\max_j q_j,\\quad b = \\frac{2\\Delta}{\\varepsilon}\\ \\Big(\\frac{\\Delta}{\\varepsilon}
              \\text{ if monotonic}\\Big),

    and output the first candidate that comes up heads. This is
    :math:`\\varepsilon`-DP, and equal in distribution to
    ``report_noisy_max(..., noise="exponential")`` (Ding et al. 2021). The
    exact law is :func:`permute_and_flip_probabilities`. Idealized numerics:
    coins are float64 uniforms compared with the probability.

    Args:
      key: a single PRNG key.
      scores: float ``[num_candidates]``, finite.
      epsilon: > 0.
      sensitivity: :math:`\\Delta > 0`.
      monotonic: whether scores are monotonic (halves the scale).
      clip: map NaN and +-inf scores to public values instead of raising: NaN becomes the lowest
        representable score (never chosen over a finite one), +-inf the largest magnitude. Needed for traced
        scores (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``), which are refused
        otherwise because their values cannot be checked while tracing. Finite scores are untouched.

    Returns:
      ``Release(value, SelectionInfo)``; ``value`` is the int32 selected index.

    Raises:
      ValueError: for out-of-range parameters, non-1-D, empty or non-finite
        scores, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> int(mechanisms.permute_and_flip(jax.random.key(0), [0.0, 50.0, 1.0], epsilon=2.0).value)
      1

    References:
      McKenna & Sheldon, `Permute-and-Flip: A new mechanism for differentially private
      selection <https://arxiv.org/abs/2010.12603>`_, NeurIPS 2020, Alg. 1;
      Ding, Kifer, Saghaian, Steinke, Wang, Xiao & Zhang, `The Permute-and-Flip
      Mechanism is Identical to Report-Noisy-Max with Exponential Noise
      <https://arxiv.org/abs/2105.07260>`_, 2021.
    """
    key, scores, epsilon, sensitivity, monotonic, scale = _check_selection(key, scores, epsilon, sensitivity, monotonic,
                                                                           clip=clip)
    guarantee = stated_guarantee(permute_and_flip_guarantee, epsilon=epsilon, sensitivity=sensitivity,
                                 monotonic=monotonic)
    selected, info = _permute_and_flip(key, scores, scale)
    return _selection_release(selected, info, epsilon, sensitivity, guarantee)


def permute_and_flip_guarantee(*, epsilon: float, sensitivity: float = 1.0, monotonic: bool = False) -> PureDP:
    """The guarantee of :func:`permute_and_flip`: :math:`\\varepsilon`-DP (McKenna & Sheldon 2020)."""
    check_positive("sensitivity", sensitivity)
    check_bool("monotonic", monotonic)
    return PureDP(epsilon)


@jax.jit
def _permute_and_flip_law(scores: Array, scale: Array, nodes: Array, weights: Array) -> Array:
    scores = sanitize(scores)
    heads_probability = jnp.exp((scores - jnp.max(scores)) / scale)
    # log prod_j (1 - t p_j) at every node, then leave one factor out.
    log_factors = jnp.log1p(-nodes[:, None] * heads_probability[None, :])  # [nodes, k]
    log_others = jnp.sum(log_factors, axis=1, keepdims=True) - log_factors
    return heads_probability * jnp.sum(weights[:, None] * jnp.exp(log_others), axis=0)


def permute_and_flip_probabilities(scores: Scores, *, epsilon: float, sensitivity: float = 1.0,
                                   monotonic: bool = False) -> Array:
    """Exact output probabilities of :func:`permute_and_flip`, in float64.

    Give every candidate an independent uniform arrival time in [0, 1]; the
    order of arrivals is a uniform permutation, and candidate :math:`r`
    arriving at time :math:`t` is preceded by each other candidate with
    probability :math:`t`. Hence, with :math:`p_j = \\exp((q_j - q^*)/b)`,

    .. math:: \\Pr[M(x) = r] = p_r \\int_0^1 \\prod_{j \\ne r} (1 - t\\,p_j)\\,dt .

    The integrand is a polynomial of degree :math:`k-1`, so Gauss-Legendre
    quadrature with :math:`\\lfloor k/2 \\rfloor + 1` nodes is exact; all
    terms are positive, so float64 evaluation is stable. Cost
    :math:`O(k^2)`; intended for up to a few thousand candidates.

    Returns:
      float64 ``[num_candidates]`` summing to 1 (up to rounding).

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> p = mechanisms.permute_and_flip_probabilities([0.0, 0.0, 4.0], epsilon=1.0)
      >>> [round(float(x), 6) for x in p]
      [0.064615, 0.064615, 0.87077]
    """
    require_x64("permute_and_flip_probabilities")
    scores = check_scores(scores)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    monotonic = check_bool("monotonic", monotonic)
    scale = jnp.asarray(_selection_scale(epsilon, sensitivity, monotonic), jnp.float64)
    nodes, weights = _gauss_legendre_unit_interval(scores.shape[0] // 2 + 1)
    return _permute_and_flip_law(scores, scale, jnp.asarray(nodes), jnp.asarray(weights))


@functools.lru_cache(maxsize=64)
def _gauss_legendre_unit_interval(num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, 1], exact for polynomials of degree < 2 num_nodes.

    Newton's method on the Legendre polynomial from Tricomi's initial
    guesses, vectorised over nodes (Press et al., Numerical Recipes, Sec.
    4.6, ``gauleg``): O(num_nodes^2) work, where NumPy's ``leggauss`` needs an
    O(num_nodes^3) eigendecomposition.
    """
    n = num_nodes

    def legendre_and_derivative(x):
        previous, current = np.ones_like(x), x.copy()  # P_0, P_1
        for degree in range(2, n + 1):
            previous, current = current, ((2 * degree - 1) * x * current - (degree - 1) * previous) / degree
        if n == 1:
            previous, current = np.ones_like(x), x
        return current, n * (x * current - previous) / (x * x - 1)

    x = np.cos(np.pi * (np.arange(1, n + 1) - 0.25) / (n + 0.5))
    for _ in range(100):
        value, derivative = legendre_and_derivative(x)
        step = value / derivative
        x = x - step
        if np.max(np.abs(step)) < 1e-15:
            break
    _, derivative = legendre_and_derivative(x)
    weights = 2 / ((1 - x * x) * derivative * derivative)
    return (x + 1) / 2, weights / 2
