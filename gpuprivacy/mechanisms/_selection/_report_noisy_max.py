"""Report-noisy-max with Gumbel, Laplace or exponential noise (Dwork & Roth 2014, §3.3; McKenna & Sheldon 2020).

Scale, ties and totality as in :mod:`._common`.
"""

from __future__ import annotations


from gpuprivacy._checks import check_positive
from gpuprivacy._typing import Key, Scores
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._common import check_bool, check_choice
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._selection._common import NOISE_NAMES, _check_selection, _noisy_argmax, _selection_release


def report_noisy_max(key: Key, scores: Scores, *, epsilon: float, sensitivity: float = 1.0,
                     noise: str = "gumbel", monotonic: bool = False, clip: bool = False) -> Release:
    """Report-noisy-max: the index of the largest noisy score.

    .. math:: M(x) = \\arg\\max_i\\; q_i(x) + b\\,Z_i, \\qquad
              b = \\frac{2\\Delta}{\\varepsilon}\\ \\Big(\\frac{\\Delta}{\\varepsilon}
              \\text{ if monotonic}\\Big),

    with i.i.d. :math:`Z_i` from

    * ``"gumbel"`` (default): the exponential mechanism, identical to
      :func:`exponential_mechanism` with the same key;
    * ``"laplace"``: the classic report-noisy-max (Dwork & Roth 2014,
      Claim 3.9 proves the monotone counting-query case with
      :math:`\\mathrm{Lap}(1/\\varepsilon)`; the factor 2 covers scores
      that may move in opposite directions);
    * ``"exponential"``: equal in distribution to permute-and-flip
      (Ding et al. 2021), see :func:`permute_and_flip`.

    Every choice is :math:`\\varepsilon`-DP, releasing only the index (never
    the noisy value). Idealized numerics (float64 samples).

    Args:
      key: a single PRNG key.
      scores: float ``[num_candidates]``, finite.
      epsilon: > 0.
      sensitivity: :math:`\\Delta > 0`.
      noise: ``"gumbel"``, ``"laplace"`` or ``"exponential"``.
      monotonic: whether scores are monotonic (halves the scale).
      clip: map NaN and +-inf scores to public values instead of raising: NaN becomes the lowest
        representable score (never chosen over a finite one), +-inf the largest magnitude. Needed for traced
        scores (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``), which are refused
        otherwise because their values cannot be checked while tracing. Finite scores are untouched.

    Returns:
      ``Release(value, SelectionInfo)``; ``value`` is the int32 selected index.

    Raises:
      ValueError: for out-of-range parameters, an unknown ``noise``, non-1-D,
        empty or non-finite scores, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.report_noisy_max(jax.random.key(1), [1.0, 9.0, 2.0], epsilon=10.0,
      ...                                       noise="laplace")
      >>> int(release.value), int(release.info.nonprivate_true_argmax)
      (1, 1)

    References:
      Dwork & Roth, The Algorithmic Foundations of Differential Privacy, 2014, Claim 3.9 and Thm 3.10;
      McKenna & Sheldon, `Permute-and-Flip: A new mechanism for differentially private
      selection <https://arxiv.org/abs/2010.12603>`_, NeurIPS 2020;
      Ding, Kifer, Saghaian, Steinke, Wang, Xiao & Zhang, `The Permute-and-Flip
      Mechanism is Identical to Report-Noisy-Max with Exponential Noise
      <https://arxiv.org/abs/2105.07260>`_, 2021.
    """
    noise = check_choice("noise", noise, NOISE_NAMES)
    key, scores, epsilon, sensitivity, monotonic, scale = _check_selection(key, scores, epsilon, sensitivity, monotonic,
                                                                           clip=clip)
    guarantee = stated_guarantee(report_noisy_max_guarantee, epsilon=epsilon, sensitivity=sensitivity, noise=noise,
                                 monotonic=monotonic)
    selected, info = _noisy_argmax(key, scores, scale, noise=noise)
    return _selection_release(selected, info, epsilon, sensitivity, guarantee)


def report_noisy_max_guarantee(*, epsilon: float, sensitivity: float = 1.0, noise: str = "gumbel",
                               monotonic: bool = False) -> PureDP:
    """The guarantee of :func:`report_noisy_max`: :math:`\\varepsilon`-DP for every noise choice."""
    check_choice("noise", noise, NOISE_NAMES)
    check_positive("sensitivity", sensitivity)
    check_bool("monotonic", monotonic)
    return PureDP(epsilon)
