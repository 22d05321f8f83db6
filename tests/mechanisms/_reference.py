"""Independent high-precision references for the mechanism tests.

Nothing here imports gpuprivacy: each law is written out from its paper
definition in mpmath, scipy quadrature or exact combinatorics, so the tests
compare two implementations that share no code.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
from scipy import integrate, stats


def laplace_pdf(z, scale):
    return mpmath.exp(-abs(z) / scale) / (2 * scale)


def laplace_cdf(z, scale):
    if z < 0:
        return mpmath.exp(z / scale) / 2
    return 1 - mpmath.exp(-z / scale) / 2


def laplace_noisy_max_law(scores, scale, dps=30):
    """Pr[argmax_i q_i + Lap(scale)_i = r] = int f(x - q_r) prod_{j != r} F(x - q_j) dx."""
    with mpmath.workdps(dps):
        q = [mpmath.mpf(s) for s in scores]
        b = mpmath.mpf(scale)
        breakpoints = [-mpmath.inf] + sorted(set(q)) + [mpmath.inf]
        law = []
        for r in range(len(q)):
            def integrand(x, r=r):
                value = laplace_pdf(x - q[r], b)
                for j in range(len(q)):
                    if j != r:
                        value *= laplace_cdf(x - q[j], b)
                return value
            law.append(mpmath.quad(integrand, breakpoints))
        return np.array([float(p) for p in law])


def permute_and_flip_law(scores, scale):
    """Exact PF law from the order statistics of a uniform permutation.

    Candidate r sits at position m (uniform on 0..k-1); the m candidates
    before it are a uniform m-subset of the others, all of which must come up
    tails. With p_j = exp((q_j - q*) / scale) and e_m the elementary
    symmetric polynomials of {1 - p_j : j != r}:
    Pr[r] = p_r * sum_m e_m / (k * C(k-1, m)).
    """
    with mpmath.workdps(40):
        q = [mpmath.mpf(s) for s in scores]
        top = max(q)
        p = [mpmath.exp((s - top) / mpmath.mpf(scale)) for s in q]
        k = len(q)
        law = []
        for r in range(k):
            e = [mpmath.mpf(1)] + [mpmath.mpf(0)] * (k - 1)
            for j in range(k):
                if j == r:
                    continue
                tails = 1 - p[j]
                for m in range(k - 1, 0, -1):
                    e[m] += tails * e[m - 1]
            law.append(p[r] * sum(e[m] / (k * mpmath.binomial(k - 1, m)) for m in range(k)))
        return np.array([float(x) for x in law])


def softmax_law(scores, scale):
    with mpmath.workdps(40):
        weights = [mpmath.exp(mpmath.mpf(s) / mpmath.mpf(scale)) for s in scores]
        total = sum(weights)
        return np.array([float(w / total) for w in weights])


def sparse_vector_law(queries, threshold, threshold_scale, query_scale, max_positives):
    """Law of the truncated answer vector of Lyu-Su-Li Alg. 1, as {answers tuple: probability}.

    Given the threshold noise rho = r, answer j is True with probability
    1 - F_nu(T + r - q_j), independently. A truncated pattern (at most c
    Trues, all False after the c-th) fixes the answers up to the halt, so its
    probability is the integral over r of the product over those answers.
    Integrated with scipy.integrate.quad between the kinks of the integrand.
    """
    k = len(queries)
    queries = [float(q) for q in queries]
    kinks = sorted(set([0.0] + [q - threshold for q in queries]))
    law = {}
    for pattern in itertools.product((False, True), repeat=k):
        if truncate(pattern, max_positives) != pattern:
            continue
        positives = np.cumsum(pattern)
        halted = positives[-1] == max_positives
        stop = int(np.argmax(positives == max_positives)) + 1 if halted else k

        def integrand(r, pattern=pattern, stop=stop):
            value = math.exp(-abs(r) / threshold_scale) / (2 * threshold_scale)
            for qj, above in zip(queries[:stop], pattern[:stop]):
                z = (threshold + r - qj) / query_scale
                below = math.exp(z) / 2 if z < 0 else 1 - math.exp(-z) / 2
                value *= (1 - below) if above else below
            return value

        edges = [-np.inf] + kinks + [np.inf]
        law[pattern] = sum(integrate.quad(integrand, lo, hi, epsabs=1e-14, epsrel=1e-12)[0]
                           for lo, hi in itertools.pairwise(edges))
    return law


def truncate(pattern, max_positives):
    """Answers after the max_positives-th True set to False (Alg. 1 has halted)."""
    out, count = [], 0
    for above in pattern:
        out.append(bool(above) and count < max_positives)
        count += bool(above)
    return tuple(out)


def balle_wang_delta(sigma, epsilon, sensitivity, dps=60):
    """Balle & Wang (2018), Thm 8, written with erfc: Phi(x) = erfc(-x / sqrt 2) / 2."""
    with mpmath.workdps(dps):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
        phi = lambda x: mpmath.erfc(-x / mpmath.sqrt(2)) / 2
        return phi(d / (2 * s) - e * s / d) - mpmath.exp(e) * phi(-d / (2 * s) - e * s / d)


def balle_wang_sigma(epsilon, delta, sensitivity, dps=60):
    """Real-valued smallest sigma (to ~1e-30 relative) by plain bisection in mpmath."""
    with mpmath.workdps(dps):
        lo, hi = mpmath.mpf("1e-6"), mpmath.mpf("1e6")
        for _ in range(250):
            mid = mpmath.sqrt(lo * hi)
            if balle_wang_delta(mid, epsilon, sensitivity, dps) <= delta:
                hi = mid
            else:
                lo = mid
        return hi


def chi_square_pvalue(counts, probabilities, min_expected=5.0):
    """Pearson chi-square p-value; bins with expected count < min_expected are pooled."""
    counts = np.asarray(counts, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    probabilities = probabilities / probabilities.sum()
    expected = counts.sum() * probabilities
    small = expected < min_expected
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    return stats.chisquare(counts, expected).pvalue
