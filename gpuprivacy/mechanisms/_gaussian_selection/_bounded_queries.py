"""Validation shared by the Gaussian selection mechanisms under bounded queries (Lebensold et al. 2024).

Lebensold, Precup & Balle, "On the Privacy of Selection Mechanisms with
Gaussian Noise", AISTATS 2024 (arXiv 2402.06137v2), with the corrections listed in docs/errata.md.
Every query lies in a PUBLIC interval :math:`[a, b]` (``lower``, ``upper``;
:math:`c = b - a`) and has sensitivity :math:`\\Delta \\in (0, c]`. Under
that assumption

* Gaussian report noisy max is pure (ex-ante) :math:`\\varepsilon`-DP
  (Theorem 8 = Theorem 12, eq. (1));
* Gaussian above threshold is pure *ex-post* DP: releasing stopping time
  :math:`t` costs :math:`\\varepsilon^{\\mathrm{post}}(t)` (Theorem 10 =
  Theorem 17, eq. (25)), which grows with :math:`t`; a stream of known length
  :math:`k` makes it pure ex-ante DP with the largest table entry (our capped
  bound, not in the paper; see docs/errata.md);
* the fully adaptive Gaussian sparse vector runs Gaussian above threshold
  again and again under filtered self-reporting composition (Algorithm 4;
  :mod:`gpuprivacy.mechanisms._gaussian_selection._sparse_vector`, with the corrected
  delta rule of :mod:`gpuprivacy.mechanisms._gaussian_selection._filters`).

This module also holds Laplace report noisy max with its two calibrations,
the baselines of the paper's Fig. 16.

The epsilons are computed in Python from public parameters
(:mod:`gpuprivacy.accounting`); kernels only gather precomputed table entries.

Totality (STYLE "errors vs totality"): the public functions reject queries
outside ``[lower, upper]`` (and non-finite ones) before any release; kernels
map NaN to ``lower`` and clamp every value to ``[lower, upper]``, so a value
that slips past validation (e.g. under ``jax.jit``) is released as if it
were clamped and the guarantee still holds.
"""

from __future__ import annotations


import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_finite_real, check_positive, is_tracer
from gpuprivacy.mechanisms._common import concrete, sanitize


# ---------------------------------------------------------------------------------------------
# Validation shared by the bounded-query mechanisms.


def _check_bounded_class(sensitivity, lower, upper, where):
    """Finite lower < upper and 0 < sensitivity <= upper - lower.

    Lebensold et al. 2024, Thm 8, Thm 10 (bounded queries); see docs/errata.md.
    """
    for name, value in (("sensitivity", sensitivity), ("lower", lower), ("upper", upper)):
        concrete(name, value, where)
    lower = check_finite_real("lower", lower)
    upper = check_finite_real("upper", upper)
    if not lower < upper:
        raise ValueError(f"lower must be < upper (the public range [lower, upper] of every query), got "
                         f"lower={lower!r}, upper={upper!r}.")
    sensitivity = check_positive("sensitivity", sensitivity)
    if sensitivity > upper - lower:
        raise ValueError(f"sensitivity must lie in (0, upper - lower] = (0, {upper - lower!r}]: a query with values "
                         f"in [{lower!r}, {upper!r}] cannot change by more than that; got {sensitivity!r}.")
    return sensitivity, lower, upper


def _check_sigma(name, value, where):
    concrete(name, value, where)
    return check_positive(name, value)


def _check_in_range(values, name, lower, upper, clip=False):
    """Rejects concrete values outside [lower, upper] unless ``clip`` (the kernel clamps: :func:`_clamp`).

    Traced values were refused at trace time without ``clip`` (check_scores), so they are clamped too.
    """
    if clip or is_tracer(values):
        return
    arr = np.asarray(values)
    outside = (arr < lower) | (arr > upper)
    if outside.any():
        index = int(np.argmax(outside))
        raise ValueError(
            f"{name} must lie in [lower, upper] = [{lower!r}, {upper!r}] (the bounded-query assumption behind the "
            f"pure-DP bound); {int(outside.sum())} value(s) lie outside, the first at index {index}: "
            f"{float(arr[index])!r}. Clip each query to a PUBLIC range before release, never to one read from the "
            "data (Lebensold et al. 2024, Thm 8, Thm 10 assume bounded queries; see docs/errata.md).")


def _clamp(values, lower, upper):
    return jnp.clip(sanitize(values), lower, upper)  # NaN -> -SCORE_BOUND -> lower
