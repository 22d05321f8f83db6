"""Shared helpers of the cross-checks: the comparison verdict, independent exact references (mpmath,
written here from the theorems, not calling gpuprivacy) and the chi-square machinery.

Every quantity compared here (a noise scale, an epsilon, a delta, a rho) is *more conservative when
larger*: a larger sigma or scale adds more noise, a larger epsilon / delta / rho claims less privacy.
"""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
from scipy import stats

from tests.crosscheck._pairings import ALPHA

# --------------------------------------------------------------------------------------------------
# Verdicts

VERDICTS = ("agree", "agree, peer marginally unsafe", "ours tighter", "peer tighter", "peer unsafe",
            "peer refuses", "ours refuses")


def relative_gap(ours: float, peer: float) -> float:
    """(ours - peer) / |peer|: positive where we are more conservative."""
    if peer == 0.0:
        return 0.0 if ours == 0.0 else math.inf
    return (ours - peer) / abs(peer)


def classify(ours: float, peer: float, *, tol: float, peer_safe: bool | None) -> str:
    """The verdict of one numeric comparison.

    ``peer_safe`` is the independent (mpmath) check of the peer's value against the exact quantity, or
    None where no such check exists (the peer computes a different, valid bound).
    """
    gap = relative_gap(ours, peer)
    if abs(gap) <= tol:
        return "agree" if peer_safe is not False else "agree, peer marginally unsafe"
    if gap > 0:
        return "peer unsafe" if peer_safe is False else "peer tighter"
    return "ours tighter"


def peer(fn, *args, **kwargs):
    """Calls a peer library, silencing its warnings (the suite turns warnings into errors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def compare(comparison, *, topic, quantity, parameters, ours, ours_call, library, peer_value, peer_call, tol,
            ours_safe, peer_safe=None, allowed=("agree",), note="", exact=None):
    """Records one numeric row and asserts it.

    Asserts (1) our value passes the independent exact check (``ours_safe``), and (2) the verdict is one
    of ``allowed``: by default "agree", i.e. ``|ours - peer| <= tol * |peer|`` (so we are never less
    conservative than the peer beyond its stated accuracy). Tests widen ``allowed`` only where a
    comment explains the gap (a peer that is unsafe or looser at those parameters, or a peer using a
    different theorem).
    """
    verdict = classify(ours, peer_value, tol=tol, peer_safe=peer_safe)
    comparison.record(topic=topic, kind="value", quantity=quantity, parameters=parameters, ours=ours,
                      ours_call=ours_call, library=library, peer=peer_value, peer_call=peer_call,
                      exact=exact, relative_gap=relative_gap(ours, peer_value), tolerance=tol,
                      ours_safe=bool(ours_safe), peer_safe=peer_safe, verdict=verdict, note=note)
    assert ours_safe, f"{topic}: our value {ours!r} fails the exact check ({parameters})"
    assert verdict in allowed, (f"{topic} {parameters}: ours {ours!r} vs {library} {peer_value!r} "
                                f"(gap {relative_gap(ours, peer_value):+.3e}, tol {tol:g}): {verdict}")
    return verdict


# --------------------------------------------------------------------------------------------------
# Independent exact references (mpmath)

_DPS = 100


def bw_delta(sigma, epsilon, sensitivity=1.0):
    """Balle & Wang (2018), Thm 8: the exact delta of the Gaussian mechanism, as an mpf (100 digits)."""
    with mpmath.workdps(_DPS):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
        return +(mpmath.ncdf(d / (2 * s) - e * s / d) - mpmath.exp(e) * mpmath.ncdf(-d / (2 * s) - e * s / d))


def bw_safe_sigma(sigma, epsilon, delta, sensitivity=1.0) -> bool:
    return bool(bw_delta(sigma, epsilon, sensitivity) <= mpmath.mpf(delta))


def bw_sigma(epsilon, delta, sensitivity=1.0) -> float:
    """The real sigma with exact delta == delta (geometric bisection, 1e-25 relative), as a float."""
    with mpmath.workdps(_DPS):
        target = mpmath.mpf(delta)
        lo, hi = mpmath.mpf("1e-6") * sensitivity, mpmath.mpf(sensitivity) / (target * mpmath.sqrt(2 * mpmath.pi)) * 2
        while bw_delta(lo, epsilon, sensitivity) <= target:
            lo /= 2
        while hi / lo - 1 > mpmath.mpf("1e-25"):
            mid = mpmath.sqrt(lo * hi)
            if bw_delta(mid, epsilon, sensitivity) <= target:
                hi = mid
            else:
                lo = mid
        return float(hi)


def bw_epsilon(sigma, delta, sensitivity=1.0) -> float:
    """The real epsilon with exact delta == delta at this sigma (bisection), as a float."""
    with mpmath.workdps(_DPS):
        target = mpmath.mpf(delta)
        if bw_delta(sigma, 0, sensitivity) <= target:
            return 0.0
        s = mpmath.mpf(sigma) / sensitivity
        lo, hi = mpmath.mpf(0), 1 / (2 * s * s) + mpmath.sqrt(2 * mpmath.log(1 / target)) / s
        while bw_delta(sigma, hi, sensitivity) > target:
            hi *= 2
        while hi - lo > mpmath.mpf("1e-25") * hi:
            mid = (lo + hi) / 2
            if bw_delta(sigma, mid, sensitivity) <= target:
                hi = mid
            else:
                lo = mid
        return float(hi)


def _bisect_increasing(f, lo, hi, iterations=300):
    """Root of an increasing function f on (lo, hi) by bisection, in the current mpmath precision."""
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def cks_log_delta(rho, epsilon):
    """log of the smallest delta of Canonne, Kamath & Steinke (2020), Cor. 13 for rho-zCDP at epsilon.

    delta(alpha) = exp((alpha-1)(alpha rho - eps)) / (alpha-1) * (1 - 1/alpha)^alpha. Its log f is
    convex in alpha with f'(alpha) = (2 alpha - 1) rho - eps + log(1 - 1/alpha), increasing from -inf
    (alpha -> 1) to +inf; the minimiser is the root of f', found by bisection.
    """
    with mpmath.workdps(60):
        r, e = mpmath.mpf(rho), mpmath.mpf(epsilon)
        derivative = lambda a: (2 * a - 1) * r - e + mpmath.log(1 - 1 / a)
        hi = mpmath.mpf(2)
        while derivative(hi) <= 0:
            hi *= 2
        alpha = _bisect_increasing(derivative, mpmath.mpf(1) + mpmath.mpf(10) ** -40, hi)
        return +((alpha - 1) * (alpha * r - e) - mpmath.log(alpha - 1) + alpha * mpmath.log(1 - 1 / alpha))


def cks_safe_epsilon(epsilon, rho, delta) -> bool:
    return bool(cks_log_delta(rho, epsilon) <= mpmath.log(mpmath.mpf(delta)))


def cks_epsilon(rho, delta) -> float:
    """The real epsilon with CKS delta == delta (bisection on epsilon), as a float."""
    with mpmath.workdps(60):
        log_target = mpmath.log(mpmath.mpf(delta))
        lo = mpmath.mpf(0)
        hi = mpmath.mpf(rho) + 2 * mpmath.sqrt(mpmath.mpf(rho) * -log_target)  # Bun-Steinke, always valid
        while hi - lo > mpmath.mpf("1e-20") * hi:
            mid = (lo + hi) / 2
            if cks_log_delta(rho, mid) <= log_target:
                hi = mid
            else:
                lo = mid
        return float(hi)


def bbghs_gaussian_epsilon(r, delta) -> float:
    """min over alpha > 1 of Balle et al. (2020, Thm 21) for the RDP curve r * alpha, exactly.

    g(alpha) = alpha r + log(1 - 1/alpha) + (L - log alpha)/(alpha - 1), L = log(1/delta), has
    g'(alpha) = r - (L - log alpha)/(alpha - 1)^2, increasing in alpha: its root is the minimiser.
    """
    with mpmath.workdps(60):
        r, big_l = mpmath.mpf(r), -mpmath.log(mpmath.mpf(delta))
        derivative = lambda a: r - (big_l - mpmath.log(a)) / (a - 1) ** 2
        hi = mpmath.mpf(2)
        while derivative(hi) <= 0:
            hi *= 2
        a = _bisect_increasing(derivative, mpmath.mpf(1) + mpmath.mpf(10) ** -30, hi)
        value = a * r + mpmath.log(1 - 1 / a) + (big_l - mpmath.log(a)) / (a - 1)
        return float(max(value, 0))


def markov_gaussian_epsilon(r, delta) -> float:
    """min over alpha of r alpha + log(1/delta)/(alpha - 1) = r + 2 sqrt(r log(1/delta)) (Mironov 2017, Prop. 3)."""
    with mpmath.workdps(60):
        r, big_l = mpmath.mpf(r), -mpmath.log(mpmath.mpf(delta))
        return float(r + 2 * mpmath.sqrt(r * big_l))


# --------------------------------------------------------------------------------------------------
# Chi-square machinery (categorical laws)

def integer_categories(log_pmf, *, num_samples: int, min_expected: float = 20.0, half_width: int = 10_000):
    """Categories for an integer law: every value with expected count >= min_expected, plus two pooled tails.

    Returns (edges, probabilities): category j holds the integers in [edges[j], edges[j+1]) with the
    first and last edges -inf / +inf; probabilities sum to 1 (the law is normalised on
    [-half_width, half_width], which must hold all but a negligible mass).
    """
    support = np.arange(-half_width, half_width + 1)
    log_p = log_pmf(support)
    p = np.exp(log_p - np.max(log_p))
    p /= p.sum()
    keep = np.nonzero(p * num_samples >= min_expected)[0]
    lo, hi = support[keep[0]], support[keep[-1]]
    edges = np.concatenate([[-np.inf], np.arange(lo, hi + 2, dtype=np.float64)])
    edges[-1] = np.inf
    return edges, category_probabilities(support, p, edges)


def category_probabilities(support, p, edges):
    index = np.searchsorted(edges, support, side="right") - 1
    return np.bincount(index, weights=p, minlength=len(edges) - 1)


def counts(samples, edges):
    index = np.searchsorted(edges, np.asarray(samples, dtype=np.float64), side="right") - 1
    return np.bincount(index, minlength=len(edges) - 1)


def goodness_of_fit(observed, probabilities) -> float:
    """p-value of Pearson's chi-square test of observed counts against a law."""
    observed = np.asarray(observed, dtype=np.float64)
    expected = np.asarray(probabilities, dtype=np.float64) * observed.sum()
    return float(stats.chisquare(observed, expected).pvalue)


def two_sample(observed_a, observed_b) -> float:
    """p-value of the chi-square test of homogeneity of two samples over the same categories."""
    table = np.stack([observed_a, observed_b]).astype(np.float64)
    table = table[:, table.sum(axis=0) > 0]
    return float(stats.chi2_contingency(table, correction=False).pvalue)


def miss_probability_gof(true_law, tested_law, num_samples) -> float:
    """P(the goodness-of-fit test of ``tested_law`` at ALPHA accepts) when samples follow ``true_law``
    (noncentral chi-square approximation)."""
    p0, p1 = np.asarray(tested_law), np.asarray(true_law)
    dof = len(p0) - 1
    noncentrality = num_samples * np.sum((p1 - p0) ** 2 / p0)
    return float(stats.ncx2.cdf(stats.chi2.isf(ALPHA, dof), dof, noncentrality))


def miss_probability_two_sample(law_a, law_b, num_a, num_b) -> float:
    """P(the homogeneity test at ALPHA accepts) for samples of sizes num_a, num_b from law_a, law_b."""
    pa, pb = np.asarray(law_a), np.asarray(law_b)
    pooled = (num_a * pa + num_b * pb) / (num_a + num_b)
    dof = len(pa) - 1
    noncentrality = num_a * num_b / (num_a + num_b) * np.sum((pa - pb) ** 2 / pooled)
    return float(stats.ncx2.cdf(stats.chi2.isf(ALPHA, dof), dof, noncentrality))


def check_law(comparison, *, topic, quantity, parameters, ours_call, library, peer_call, law, wrong_law,
              ours_counts, peer_counts, ours_wrong_counts, wrong_description, note=""):
    """Records one law row and asserts the four chi-square tests at ALPHA.

    * our samples fit the exact law, and so do the peer's (p >= ALPHA);
    * our samples and the peer's are homogeneous (p >= ALPHA);
    * power: our samples are rejected against the wrong law (p < ALPHA), and our samples drawn from
      the wrong law are told apart from the peer's (p < ALPHA). The design's miss probabilities at
      these sample sizes (noncentral chi-square) are recorded and must be <= ALPHA too.
    """
    n_ours, n_peer = int(np.sum(ours_counts)), int(np.sum(peer_counts))
    row = dict(
        ours=goodness_of_fit(ours_counts, law),
        peer=goodness_of_fit(peer_counts, law),
        two_sample=two_sample(ours_counts, peer_counts),
        power_gof=goodness_of_fit(ours_counts, wrong_law),
        power_two_sample=two_sample(ours_wrong_counts, peer_counts),
        miss_gof=miss_probability_gof(law, wrong_law, n_ours),
        miss_two_sample=miss_probability_two_sample(wrong_law, law, int(np.sum(ours_wrong_counts)), n_peer),
    )
    passed = (row["ours"] >= ALPHA and row["peer"] >= ALPHA and row["two_sample"] >= ALPHA
              and row["power_gof"] < ALPHA and row["power_two_sample"] < ALPHA)
    comparison.record(topic=topic, kind="law", quantity=quantity, parameters=parameters, ours_call=ours_call,
                      library=library, peer_call=peer_call, n_ours=n_ours, n_peer=n_peer, categories=len(law),
                      alpha=ALPHA, wrong_law=wrong_description, verdict="same law" if passed else "differ",
                      note=note, **row)
    assert row["miss_gof"] <= ALPHA and row["miss_two_sample"] <= ALPHA, f"{topic}: the power design is too weak: {row}"
    assert row["ours"] >= ALPHA, f"{topic}: our samples do not fit the exact law: {row}"
    assert row["peer"] >= ALPHA, f"{topic}: {library}'s samples do not fit the exact law: {row}"
    assert row["two_sample"] >= ALPHA, f"{topic}: our samples and {library}'s differ: {row}"
    assert row["power_gof"] < ALPHA, f"{topic}: the test cannot tell the {wrong_description} law apart: {row}"
    assert row["power_two_sample"] < ALPHA, f"{topic}: the two-sample test has no power: {row}"
