"""Report noisy max under bounded queries: Gaussian (pure DP) and Laplace baselines.

Lebensold, Precup & Balle, "On the Privacy of Selection Mechanisms with Gaussian Noise",
AISTATS 2024 (arXiv 2402.06137v2), with the corrections of docs/errata.md: with every score in the PUBLIC
interval ``[lower, upper]`` and sensitivity in ``(0, upper - lower]``, Gaussian report noisy
max is pure (ex-ante) :math:`\\varepsilon`-DP (Theorem 8 = Theorem 12, eq. (1)). Laplace
report noisy max with its two calibrations is the baseline of the paper's Fig. 16.

Validation and totality: :mod:`._bounded_queries`.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp

from gpuprivacy import noise as _noise
from gpuprivacy._checks import check_epsilon, check_int, check_key, check_positive
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key, Scores
from gpuprivacy.accounting import PureDP, gaussian_rnm_epsilon
from gpuprivacy._rounding import divide_up
from gpuprivacy.mechanisms._common import check_choice, check_scores, unit_noise
from gpuprivacy.mechanisms._gaussian_selection._bounded_queries import _check_bounded_class, _check_in_range, _check_sigma, _clamp
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._selection._common import (SelectionInfo, _check_selection, _noisy_argmax, _selection_info,
                                                      _selection_release)
from gpuprivacy.mechanisms._selection._report_noisy_max import report_noisy_max


LAPLACE_CALIBRATIONS = ("standard", "post_processing")


# ---------------------------------------------------------------------------------------------
# Gaussian report noisy max (Lebensold et al. 2024, Sec. 3.1, Thm 8 = Thm 12).


def _check_num_candidates(num_candidates):
    num_candidates = check_int("num_candidates", num_candidates)
    if num_candidates < 2:
        raise ValueError(f"Gaussian report noisy max needs num_candidates >= 2, got {num_candidates}: with one "
                         "candidate the output is constant (Lebensold et al. Thm 8 assumes d > 1); release 0 "
                         "without noise instead.")
    return num_candidates


@jax.jit
def _gaussian_noisy_argmax(key: Key, scores: Array, sigma: Array, lower: Array,
                           upper: Array) -> tuple[Array, SelectionInfo]:
    scores = _clamp(scores, lower, upper)
    noisy = scores + sigma * unit_noise(_noise.gaussian, key, scores.shape)
    selected = jnp.argmax(noisy).astype(jnp.int32)
    return selected, _selection_info(scores, selected, sigma)


def gaussian_report_noisy_max(key: Key, scores: Scores, *, sigma: float, sensitivity: float, lower: float,
                              upper: float, clip: bool = False) -> Release:
    """Report noisy max with Gaussian noise: pure DP for bounded scores.

    .. math:: M(x) = \\arg\\max_{i \\in [d]}\\; q_i(x) + Z_i, \\qquad Z_i \\sim \\mathcal N(0, \\sigma^2)
              \\text{ i.i.d.},

    releasing only the index. If every score lies in :math:`[a, b]` and has
    sensitivity :math:`\\Delta`, this is pure :math:`\\varepsilon`-DP with
    (Theorem 8 = Theorem 12, eq. (1), as the log of the printed ratio)

    .. math:: \\varepsilon = \\log \\frac{\\mathbb E_{z}\\big[\\Phi(z - (c - 2\\Delta)/\\sigma)^{d-1}\\big]}
                                         {\\mathbb E_{z}\\big[\\Phi(z - c/\\sigma)^{d-1}\\big]},
              \\qquad z \\sim \\mathcal N(0, 1),\\ c = b - a,

    attained by the neighbours :math:`q = (b - \\Delta, \\dots, b - \\Delta, a + \\Delta)`,
    :math:`q' = (b, \\dots, b, a)` at output :math:`d`. See
    :func:`gaussian_report_noisy_max_guarantee`. Ties (probability zero)
    resolve to the first index. Idealized numerics (float64 Gaussian samples,
    resolved to about 8 standard deviations).

    Privacy: the bound needs every score in ``[lower, upper]``; scores
    outside raise here. Inside the kernel NaN scores become ``lower`` and all
    scores are clamped to ``[lower, upper]`` (so a traced input that skipped
    validation is still covered).

    Args:
      key: a single PRNG key.
      scores: float ``[num_candidates]``, finite, in ``[lower, upper]``, ``num_candidates >= 2``.
      sigma: the noise standard deviation, > 0.
      sensitivity: :math:`\\Delta \\in (0, \\text{upper} - \\text{lower}]`.
      lower: :math:`a`, the public lower end of every score's range.
      upper: :math:`b > a`.
      clip: clamp scores outside ``[lower, upper]`` (+-inf included) to it, and NaN to ``lower``, instead of
        raising. Needed for traced scores (under ``jax.jit``/``jax.vmap``/``run_trials(..., batched_args=True)``),
        which are refused otherwise because their values cannot be checked while tracing.

    Returns:
      ``Release(value, SelectionInfo)``; ``value`` is the int32 selected index and
      ``info.scale`` is :math:`\\sigma`.

    Raises:
      ValueError: for non-positive ``sigma``, ``lower >= upper``, ``sensitivity``
        outside ``(0, upper - lower]``, scores outside ``[lower, upper]``,
        non-finite scores, fewer than two candidates, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments, or traced privacy parameters.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.gaussian_report_noisy_max(jax.random.key(0), [0.1, 0.9, 0.2], sigma=0.05,
      ...                                                sensitivity=0.01, lower=0.0, upper=1.0)
      >>> int(release.value)
      1

    References:
      Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with
      Gaussian Noise <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024
      (arXiv v2), Theorem 8 = Theorem 12, eq. (1); App. A.1 (worst-case pair).
    """
    where = "gaussian_report_noisy_max"
    require_x64(where)
    key = check_key(key)
    scores = check_scores(scores, clip=clip, what="NaN, inf or values outside [lower, upper]")
    sigma = _check_sigma("sigma", sigma, where)
    sensitivity, lower, upper = _check_bounded_class(sensitivity, lower, upper, where)
    # Also refuses fewer than two candidates (_check_num_candidates).
    guarantee = stated_guarantee(gaussian_report_noisy_max_guarantee, sigma=sigma, num_candidates=scores.shape[0],
                                 sensitivity=sensitivity, lower=lower, upper=upper)
    _check_in_range(scores, "scores", lower, upper, clip)
    selected, info = _gaussian_noisy_argmax(key, scores, jnp.asarray(sigma, jnp.float64),
                                            jnp.asarray(lower, jnp.float64), jnp.asarray(upper, jnp.float64))
    return Release(selected, info, guarantee)


def gaussian_report_noisy_max_guarantee(*, sigma: float, num_candidates: int, sensitivity: float, lower: float,
                                        upper: float) -> PureDP:
    """The guarantee of :func:`gaussian_report_noisy_max`: pure :math:`\\varepsilon`-DP (Theorem 8).

    :math:`\\varepsilon` = :func:`gpuprivacy.accounting.gaussian_rnm_epsilon`
    ``(sigma, num_candidates, sensitivity, lower, upper)`` (an upper bound on
    the log of eq. (1)'s ratio). Depends on :math:`c/\\sigma` as well as
    :math:`\\Delta/\\sigma`, and grows without bound as :math:`c \\to \\infty`.

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> guarantee = mechanisms.gaussian_report_noisy_max_guarantee(sigma=0.3, num_candidates=2,
      ...                                                            sensitivity=0.01, lower=0.0, upper=1.0)
      >>> round(guarantee.epsilon, 8)
      0.12594214
    """
    where = "gaussian_report_noisy_max_guarantee"
    sigma = _check_sigma("sigma", sigma, where)
    sensitivity, lower, upper = _check_bounded_class(sensitivity, lower, upper, where)
    num_candidates = _check_num_candidates(num_candidates)
    with jax.ensure_compile_time_eval():  # callable under a trace, like the mechanisms' tables
        return PureDP(gaussian_rnm_epsilon(sigma, num_candidates, sensitivity, lower, upper))


# ---------------------------------------------------------------------------------------------
# Laplace report noisy max with its two calibrations (Lebensold et al. 2024, App. B.3, Fig. 16; see docs/errata.md).


def _laplace_scale(epsilon, sensitivity, num_candidates, calibration):
    multiplier = 2 if calibration == "standard" else num_candidates
    return divide_up(sensitivity, epsilon, multiplier=multiplier)


def laplace_report_noisy_max(key: Key, scores: Scores, *, epsilon: float, sensitivity: float = 1.0,
                             calibration: str = "standard", clip: bool = False) -> Release:
    """Laplace report noisy max with a named calibration (the baselines of Lebensold et al. 2024, Fig. 16).

    .. math:: M(x) = \\arg\\max_i\\; q_i(x) + b\\,L_i, \\qquad L_i \\sim \\mathrm{Lap}(1), \\qquad
              b = \\begin{cases} 2\\Delta/\\varepsilon & \\texttt{"standard"} \\\\
                                 d\\,\\Delta/\\varepsilon & \\texttt{"post\\_processing"} \\end{cases}

    * ``"standard"``: report noisy max (Dwork & Roth 2014, Claim 3.9, with the
      factor 2 for scores that may move in opposite directions); this is
      :func:`~gpuprivacy.mechanisms.report_noisy_max` with ``noise="laplace"``,
      which it calls (kept as a name for the calibration comparison).
    * ``"post_processing"``: the Laplace mechanism on the whole score vector
      (:math:`\\ell_1` sensitivity :math:`d\\Delta`) followed by an argmax.
      Much noisier for :math:`d > 2`; this is the calibration under which
      Lebensold et al.'s Fig. 16 shows Gaussian RNM winning (the paper does not
      state its calibration; see docs/errata.md).

    Both are :math:`\\varepsilon`-DP. Idealized numerics (float64 Laplace samples).

    Args:
      key: a single PRNG key.
      scores: float ``[num_candidates]``, finite.
      epsilon: > 0.
      sensitivity: :math:`\\Delta > 0`, a bound on each score's change.
      calibration: ``"standard"`` or ``"post_processing"``.
      clip: map NaN and +-inf scores to public values instead of raising, as in :func:`report_noisy_max`
        (needed for traced scores).

    Returns:
      ``Release(value, SelectionInfo)``; ``value`` is the int32 selected index.

    Raises:
      ValueError: for out-of-range parameters, an unknown calibration, non-1-D,
        empty or non-finite scores, or a batch of keys (use ``jax.vmap``).
      TypeError: for wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.laplace_report_noisy_max(jax.random.key(0), [0.0, 30.0, 1.0], epsilon=1.0,
      ...                                               calibration="post_processing")
      >>> int(release.value), float(release.info.scale)
      (1, 3.0)

    References:
      Dwork & Roth, The Algorithmic Foundations of Differential Privacy, 2014, Claim 3.9 and Sec. 3.3;
      Lebensold, Precup & Balle (arXiv 2402.06137v2), App. B.3 and Fig. 16.
    """
    calibration = check_choice("calibration", calibration, LAPLACE_CALIBRATIONS)
    if calibration == "standard":  # one implementation: this calibration IS report noisy max with Laplace noise
        # Stated before report_noisy_max draws any noise (the function validates epsilon and sensitivity itself);
        # report_noisy_max states the same PureDP(epsilon), replaced by this mechanism's own statement.
        guarantee = stated_guarantee(laplace_report_noisy_max_guarantee, epsilon=epsilon, sensitivity=sensitivity,
                                     calibration=calibration)
        release = report_noisy_max(key, scores, epsilon=epsilon, sensitivity=sensitivity, noise="laplace", clip=clip)
        return release._replace(guarantee=guarantee)
    key, scores, epsilon, sensitivity, _, _ = _check_selection(key, scores, epsilon, sensitivity, False, clip=clip)
    guarantee = stated_guarantee(laplace_report_noisy_max_guarantee, epsilon=epsilon, sensitivity=sensitivity,
                                 calibration=calibration)
    scale = jnp.asarray(_laplace_scale(epsilon, sensitivity, scores.shape[0], calibration), jnp.float64)
    selected, info = _noisy_argmax(key, scores, scale, noise="laplace")
    return _selection_release(selected, info, epsilon, sensitivity, guarantee)


def laplace_report_noisy_max_guarantee(*, epsilon: float, sensitivity: float = 1.0,
                                       calibration: str = "standard") -> PureDP:
    """The guarantee of :func:`laplace_report_noisy_max`: :math:`\\varepsilon`-DP under either calibration."""
    check_choice("calibration", calibration, LAPLACE_CALIBRATIONS)
    check_positive("sensitivity", sensitivity)
    return PureDP(check_epsilon(epsilon))
