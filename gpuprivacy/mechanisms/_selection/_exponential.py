"""The exponential mechanism over a finite candidate set, by the Gumbel-max trick (McSherry & Talwar 2007).

Scale, ties and totality as in :mod:`._common`; :func:`exponential_mechanism_probabilities`
gives the exact law.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp

from gpuprivacy._checks import check_epsilon, check_positive
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key, Scores
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._common import check_bool, check_scores, sanitize
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._selection._common import _check_selection, _noisy_argmax, _selection_scale, _selection_release


def exponential_mechanism(key: Key, utilities: Scores, *, epsilon: float, sensitivity: float = 1.0,
                          monotonic: bool = False, clip: bool = False) -> Release:
    """The exponential mechanism over a finite candidate set, by the Gumbel-max trick.

    .. math:: \\Pr[M(x) = i] = \\frac{\\exp(u_i(x)/b)}{\\sum_j \\exp(u_j(x)/b)},
              \\qquad b = \\frac{2\\Delta}{\\varepsilon}\\ \\Big(\\frac{\\Delta}{\\varepsilon}
              \\text{ if monotonic}\\Big),

    which is :math:`\\varepsilon`-DP. Sampled as
    :math:`\\arg\\max_i\\, u_i + b\\,G_i` with i.i.d. standard Gumbel :math:`G_i`
    (high-resolution tails), so it is identical, bit for bit, to
    ``report_noisy_max(..., noise="gumbel")`` with the same key.
    Idealized numerics (float64 Gumbel samples).

    Args:
      key: a single PRNG key.
      utilities: float ``[num_candidates]``, finite.
      epsilon: > 0.
      sensitivity: :math:`\\Delta > 0`, the largest change of any utility between neighbours.
      monotonic: whether utilities are monotonic (halves the scale).
      clip: map NaN and +-inf utilities to public values instead of raising: NaN becomes the lowest
        representable score (never chosen over a finite one), +-inf the largest magnitude. Needed for traced
        utilities (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``), which are refused
        otherwise because their values cannot be checked while tracing. Finite utilities are untouched.

    Returns:
      ``Release(value, SelectionInfo)``; ``value`` is the int32 selected index.

    Raises:
      ValueError: for out-of-range parameters, non-1-D, empty or non-finite
        utilities, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> int(mechanisms.exponential_mechanism(jax.random.key(0), [0.0, 0.0, 100.0], epsilon=1.0).value)
      2

    References:
      McSherry & Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007;
      Dwork & Roth, The Algorithmic Foundations of Differential Privacy, 2014, Thm 3.10.
    """
    key, scores, epsilon, sensitivity, monotonic, scale = _check_selection(key, utilities, epsilon, sensitivity,
                                                                           monotonic, "utilities", clip)
    guarantee = stated_guarantee(exponential_mechanism_guarantee, epsilon=epsilon, sensitivity=sensitivity,
                                 monotonic=monotonic)
    selected, info = _noisy_argmax(key, scores, scale, noise="gumbel")
    return _selection_release(selected, info, epsilon, sensitivity, guarantee)


def exponential_mechanism_guarantee(*, epsilon: float, sensitivity: float = 1.0,
                                    monotonic: bool = False) -> PureDP:
    """The guarantee of :func:`exponential_mechanism`: :math:`\\varepsilon`-DP (Dwork & Roth 2014, Thm 3.10)."""
    check_positive("sensitivity", sensitivity)
    check_bool("monotonic", monotonic)
    return PureDP(epsilon)


@jax.jit
def _softmax(scores: Array, scale: Array) -> Array:
    scores = sanitize(scores)
    logits = (scores - jnp.max(scores)) / scale  # <= 0, 0 at the argmax: no overflow
    return jnp.exp(logits - jax.nn.logsumexp(logits))


def exponential_mechanism_probabilities(utilities: Scores, *, epsilon: float, sensitivity: float = 1.0,
                                        monotonic: bool = False) -> Array:
    """Exact output probabilities of :func:`exponential_mechanism`, in float64.

    .. math:: p_i = \\exp\\big(z_i - \\operatorname{logsumexp}(z)\\big), \\qquad
              z_i = (u_i - \\max_j u_j)/b,

    with the same (rounded-up) scale :math:`b` as the mechanism.

    Returns:
      float64 ``[num_candidates]`` summing to 1 (up to rounding).

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> p = mechanisms.exponential_mechanism_probabilities([0.0, 2.0], epsilon=1.0)
      >>> [round(float(x), 6) for x in p]
      [0.268941, 0.731059]
    """
    require_x64("exponential_mechanism_probabilities")
    scores = check_scores(utilities, "utilities")
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    monotonic = check_bool("monotonic", monotonic)
    scale = jnp.asarray(_selection_scale(epsilon, sensitivity, monotonic), jnp.float64)
    return _softmax(scores, scale)
