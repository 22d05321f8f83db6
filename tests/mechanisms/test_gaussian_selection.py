"""Gaussian report noisy max and Gaussian above threshold (spec 004) against exact laws.

The references here share no code with gpuprivacy: output laws are one-
dimensional integrals evaluated with scipy.integrate.quad.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from gpuprivacy import accounting, mechanisms
from gpuprivacy.accounting import PureDP
from tests._helpers import TEST_FAILURE_RATE
from tests.mechanisms import _reference as reference

NUM_TRIALS = 200_000
DELTA = 0.2  # sensitivity: large enough that the privacy loss is visible in 2e5 samples
UNIT = dict(lower=0.0, upper=1.0)


# ---------------------------------------------------------------------------------------------
# Independent references.


_GRID = np.linspace(-14.0, 14.0, 28_001)
_WEIGHTS = np.full(_GRID.size, _GRID[1] - _GRID[0]) * stats.norm.pdf(_GRID)
_WEIGHTS[[0, -1]] /= 2


def _expect(function):
    """E_x[function(x)], x ~ N(0, 1), by the trapezoid rule on [-14, 14] (vectorised over x).

    The integrands here are smooth and bounded by 1, so the rule is accurate to ~1e-14 (checked
    against scipy.integrate.quad in test_reference_integration_is_accurate).
    """
    return float(np.dot(_WEIGHTS, function(_GRID)))


def gaussian_noisy_max_law(scores, sigma):
    """Pr[argmax_i q_i + N(0, sigma^2) = r] = E_z[prod_{j != r} Phi((q_r - q_j)/sigma + z)]."""
    scores = np.asarray(scores, dtype=np.float64)
    law = []
    for r in range(len(scores)):
        gaps = (scores[r] - np.delete(scores, r)) / sigma
        law.append(_expect(lambda z, gaps=gaps: np.exp(np.sum(special.log_ndtr(gaps[None, :] + z[:, None]), axis=1))))
    return np.array(law)


def gaussian_above_threshold_law(queries, threshold, sigma_threshold, sigma_query):
    """Pr[value = v], v = 0..k: given the threshold noise x, the queries pass independently."""
    queries = np.asarray(queries, dtype=np.float64)
    u = (threshold + sigma_threshold * _GRID[:, None] - queries[None, :]) / sigma_query
    log_below, log_above = special.log_ndtr(u), special.log_ndtr(-u)  # [grid, k]
    prefix = np.cumsum(log_below, axis=1)
    law = [np.dot(_WEIGHTS, np.exp(prefix[:, -1]))]
    for t in range(1, len(queries) + 1):
        before = prefix[:, t - 2] if t > 1 else 0.0
        law.append(np.dot(_WEIGHTS, np.exp(before + log_above[:, t - 1])))
    return np.array(law)


def test_reference_integration_is_accurate():
    exact = integrate.quad(lambda x: stats.norm.pdf(x) * stats.norm.cdf(0.3 * x - 1.2) ** 3, -40, 40,
                           epsabs=1e-15, epsrel=1e-13, points=[0.0, 4.0])[0]
    assert _expect(lambda x: stats.norm.cdf(0.3 * x - 1.2) ** 3) == pytest.approx(exact, rel=1e-12)
    law = gaussian_noisy_max_law([0.0, 0.3, 1.0], 0.5)
    assert law.sum() == pytest.approx(1.0, abs=1e-11)
    assert gaussian_above_threshold_law([0.1, 0.5], 0.4, 0.2, 0.3).sum() == pytest.approx(1.0, abs=1e-11)


def rnm_worst_case_pair(d, sensitivity, lower, upper):
    x = np.r_[np.full(d - 1, upper - sensitivity), lower + sensitivity]
    return x, np.r_[np.full(d - 1, float(upper)), lower]


def at_worst_case_pair(t, k, sensitivity, lower, upper):
    x, x_prime = np.full(k, upper - sensitivity), np.full(k, float(upper))
    x[t - 1], x_prime[t - 1] = lower + sensitivity, lower
    return x, x_prime


def log_ratio_interval(successes, successes_prime, n, alpha):
    """Clopper-Pearson interval for log(p / p') from two binomial counts, each side at level alpha / 2."""
    def bounds(k):
        lo = stats.beta.ppf(alpha / 4, k, n - k + 1) if k > 0 else 0.0
        hi = stats.beta.ppf(1 - alpha / 4, k + 1, n - k) if k < n else 1.0
        return lo, hi
    (p_lo, p_hi), (q_lo, q_hi) = bounds(successes), bounds(successes_prime)
    return math.log(p_lo / q_hi), math.log(p_hi / q_lo)


# ---------------------------------------------------------------------------------------------
# Gaussian report noisy max.

RNM_CONFIGS = [(2, 0.4), (3, 0.5)]  # (num_candidates, sigma): epsilon 1.32 and 1.32 at DELTA, [0, 1]


@pytest.mark.parametrize("d, sigma", RNM_CONFIGS)
def test_gaussian_rnm_output_law_on_the_worst_case_pair(key, d, sigma):
    for i, data in enumerate(rnm_worst_case_pair(d, DELTA, **UNIT)):
        release = mechanisms.run_trials(mechanisms.gaussian_report_noisy_max, jax.random.fold_in(key, i),
                                        NUM_TRIALS, data, sigma=sigma, sensitivity=DELTA, **UNIT)
        observed = np.bincount(np.asarray(release.value), minlength=d)
        assert reference.chi_square_pvalue(observed, gaussian_noisy_max_law(data, sigma)) > TEST_FAILURE_RATE
        # Power: 5% more noise is rejected by the same sample.
        assert reference.chi_square_pvalue(observed, gaussian_noisy_max_law(data, 1.05 * sigma)) < TEST_FAILURE_RATE


@pytest.mark.parametrize("d, sigma", RNM_CONFIGS)
def test_gaussian_rnm_empirical_privacy_loss_matches_epsilon(key, d, sigma):
    epsilon = mechanisms.gaussian_report_noisy_max_guarantee(sigma=sigma, num_candidates=d, sensitivity=DELTA,
                                                             **UNIT).epsilon
    x, x_prime = rnm_worst_case_pair(d, DELTA, **UNIT)
    # The exact law attains the bound at output d (App. A.1).
    law, law_prime = gaussian_noisy_max_law(x, sigma), gaussian_noisy_max_law(x_prime, sigma)
    assert math.log(law[-1] / law_prime[-1]) == pytest.approx(epsilon, rel=1e-8)
    def hits(i, data):
        release = mechanisms.run_trials(mechanisms.gaussian_report_noisy_max, jax.random.fold_in(key, i), NUM_TRIALS,
                                        data, sigma=sigma, sensitivity=DELTA, **UNIT)
        return int(np.sum(np.asarray(release.value) == d - 1))

    lo, hi = log_ratio_interval(hits(0, x), hits(1, x_prime), NUM_TRIALS, TEST_FAILURE_RATE)
    assert lo <= epsilon <= hi
    # Power: the interval is narrow enough to reject a 20% error in epsilon either way.
    assert not lo <= 0.8 * epsilon <= hi and not lo <= 1.2 * epsilon <= hi


@pytest.mark.parametrize("sigma, d, sensitivity, lower, upper", [
    (0.3, 2, 0.01, 0.0, 1.0), (0.1, 2, 1e-3, 0.0, 1.0), (0.7, 2, 0.5, -2.0, 1.0), (0.4, 3, 0.2, 0.0, 1.0),
    (0.5, 4, 0.1, 3.0, 4.5),
])
def test_gaussian_rnm_guarantee_is_the_exact_worst_case_log_ratio(sigma, d, sensitivity, lower, upper):
    epsilon = mechanisms.gaussian_report_noisy_max_guarantee(sigma=sigma, num_candidates=d, sensitivity=sensitivity,
                                                             lower=lower, upper=upper).epsilon
    c = upper - lower
    if d == 2:  # closed form (spec 004, Sec. 3.1 [D]): E_z[Phi(z - u)] = Phi(-u / sqrt 2)
        closed = (special.log_ndtr(-(c - 2 * sensitivity) / (sigma * math.sqrt(2)))
                  - special.log_ndtr(-c / (sigma * math.sqrt(2))))
        assert epsilon == pytest.approx(closed, rel=1e-9)
    x, x_prime = rnm_worst_case_pair(d, sensitivity, lower, upper)
    exact = math.log(gaussian_noisy_max_law(x, sigma)[-1] / gaussian_noisy_max_law(x_prime, sigma)[-1])
    assert epsilon == pytest.approx(exact, rel=1e-9)
    assert epsilon >= exact - 1e-12  # an upper bound


def test_gaussian_rnm_random_neighbours_never_exceed_the_guarantee():
    rng = np.random.default_rng(4)
    sigma, d = 0.4, 3
    epsilon = mechanisms.gaussian_report_noisy_max_guarantee(sigma=sigma, num_candidates=d, sensitivity=DELTA,
                                                             **UNIT).epsilon
    worst = 0.0
    for _ in range(25):
        x = rng.uniform(0.0, 1.0, d)
        x_prime = np.clip(x + rng.uniform(-DELTA, DELTA, d), 0.0, 1.0)
        losses = np.abs(np.log(gaussian_noisy_max_law(x, sigma)) - np.log(gaussian_noisy_max_law(x_prime, sigma)))
        worst = max(worst, losses.max())
    assert 0.1 * epsilon < worst <= epsilon


def test_gaussian_rnm_selects_the_max_and_reports_sigma(key):
    release = mechanisms.gaussian_report_noisy_max(key, [0.2, 0.9, 0.4], sigma=1e-3, sensitivity=1e-4, **UNIT)
    assert int(release.value) == 1 and int(release.info.nonprivate_true_argmax) == 1
    assert float(release.info.scale) == 1e-3


def test_gaussian_rnm_kernel_clamps_traced_scores(key):
    # Traced scores cannot be checked: refused without clip=True; with it the kernel clamps to [lower, upper]
    # and maps NaN to lower.
    kwargs = dict(sigma=0.3, sensitivity=0.1, **UNIT)
    with pytest.raises(TypeError, match="clip=True"):
        jax.jit(functools.partial(mechanisms.gaussian_report_noisy_max, **kwargs))(key, jnp.asarray([0.2, 0.5]))
    run = jax.jit(functools.partial(mechanisms.gaussian_report_noisy_max, clip=True, **kwargs))
    for raw, clamped in [([-5.0, 0.5, 7.0], [0.0, 0.5, 1.0]), ([jnp.nan, 0.2, 0.1], [0.0, 0.2, 0.1])]:
        keys = jax.random.split(key, 64)
        traced = jax.vmap(lambda k, raw=raw: run(k, jnp.asarray(raw)).value)(keys)
        eager = jax.vmap(lambda k, clamped=clamped: run(k, jnp.asarray(clamped)).value)(keys)
        np.testing.assert_array_equal(np.asarray(traced), np.asarray(eager))


# ---------------------------------------------------------------------------------------------
# Laplace report noisy max, both calibrations.


def test_laplace_rnm_standard_is_report_noisy_max_with_laplace_noise(key):
    scores = np.array([0.0, 0.5, 1.0, 2.0])
    for i in range(5):
        k = jax.random.fold_in(key, i)
        a = mechanisms.laplace_report_noisy_max(k, scores, epsilon=0.7, sensitivity=0.5)
        b = mechanisms.report_noisy_max(k, scores, epsilon=0.7, sensitivity=0.5, noise="laplace")
        assert int(a.value) == int(b.value) and float(a.info.scale) == float(b.info.scale)
        assert float(a.info.scale) == pytest.approx(2 * 0.5 / 0.7, rel=1e-15)


def test_laplace_rnm_post_processing_law(key):
    scores = np.array([0.0, 1.0, 2.0, 3.0])
    release = mechanisms.run_trials(mechanisms.laplace_report_noisy_max, key, 100_000, scores, epsilon=1.0,
                                    calibration="post_processing")
    assert float(release.info.scale[0]) == 4.0  # d Delta / epsilon
    observed = np.bincount(np.asarray(release.value), minlength=4)
    assert reference.chi_square_pvalue(observed, reference.laplace_noisy_max_law(scores, 4.0)) > TEST_FAILURE_RATE
    # Power: the standard calibration's law (scale 2) is rejected.
    assert reference.chi_square_pvalue(observed, reference.laplace_noisy_max_law(scores, 2.0)) < TEST_FAILURE_RATE


def test_laplace_rnm_guarantee_and_calibration_names():
    assert mechanisms.LAPLACE_CALIBRATIONS == ("standard", "post_processing")
    for calibration in mechanisms.LAPLACE_CALIBRATIONS:
        assert mechanisms.laplace_report_noisy_max_guarantee(epsilon=0.3, calibration=calibration) == PureDP(0.3)
    with pytest.raises(ValueError, match="calibration must be one of 'standard', 'post_processing'; got 'pp'"):
        mechanisms.laplace_report_noisy_max_guarantee(epsilon=0.3, calibration="pp")


# ---------------------------------------------------------------------------------------------
# Gaussian above threshold.

AT = dict(threshold=0.6, sigma_threshold=0.1, sigma_query=0.2, sensitivity=DELTA, **UNIT)
AT_QUERIES = np.array([0.2, 0.4, 0.3, 0.5, 0.45, 0.35])


def _at_law(queries, **params):
    return gaussian_above_threshold_law(queries, params["threshold"], params["sigma_threshold"],
                                        params["sigma_query"])


def test_gaussian_above_threshold_stopping_time_law(key):
    release = mechanisms.run_trials(mechanisms.gaussian_above_threshold, key, NUM_TRIALS, AT_QUERIES, **AT)
    observed = np.bincount(np.asarray(release.value), minlength=len(AT_QUERIES) + 1)
    assert reference.chi_square_pvalue(observed, _at_law(AT_QUERIES, **AT)) > TEST_FAILURE_RATE
    # Power: 10% more query noise, or 30% more threshold noise, is rejected.
    assert reference.chi_square_pvalue(observed, _at_law(AT_QUERIES, **dict(AT, sigma_query=0.22))) < TEST_FAILURE_RATE
    assert reference.chi_square_pvalue(observed, _at_law(AT_QUERIES, **dict(AT, sigma_threshold=0.13))) \
        < TEST_FAILURE_RATE


def test_gaussian_above_threshold_constant_stream_survival(key):
    # Spec 004, 4.5 [D]: on a constant stream q, P(T > k) = E_x[Phi((rho - q + sigma_X x) / sigma_Z)^k].
    q, params = 0.3, dict(AT, threshold=0.5)
    queries = np.full(8, q)
    survival = np.array([_expect(lambda x, k=k: stats.norm.cdf((0.5 - q + 0.1 * x) / 0.2) ** k) for k in range(9)])
    law = np.r_[survival[8], survival[:-1] - survival[1:]]
    release = mechanisms.run_trials(mechanisms.gaussian_above_threshold, key, NUM_TRIALS, queries, **params)
    observed = np.bincount(np.asarray(release.value), minlength=9)
    assert reference.chi_square_pvalue(observed, law) > TEST_FAILURE_RATE
    # Power: the law without threshold noise (independent geometric stopping) is rejected.
    geometric = stats.norm.cdf((0.5 - q) / 0.2) ** np.arange(9)
    assert reference.chi_square_pvalue(observed, np.r_[geometric[8], geometric[:-1] - geometric[1:]]) \
        < TEST_FAILURE_RATE


def test_epsilon_post_lookups_equal_the_accounting_values(key):
    params = dict(threshold=0.5, sigma_threshold=0.15, sigma_query=0.15 * math.sqrt(3), sensitivity=1e-3, **UNIT)
    queries = np.linspace(0.0, 0.6, 7)
    release = mechanisms.run_trials(mechanisms.gaussian_above_threshold, key, 4000, queries, **params)
    values, epsilon_post = np.asarray(release.value), np.asarray(release.info.epsilon_post)
    assert set(values.tolist()) == set(range(8))  # every output, including 0 = no top, occurs
    args = [params[name] for name in ("sigma_threshold", "sigma_query", "threshold", "sensitivity", "lower", "upper")]
    for v in range(8):
        expected = (accounting.gaussian_at_epsilon(v, *args) if v else
                    accounting.gaussian_at_epsilon_no_top(len(queries), *args))
        np.testing.assert_allclose(epsilon_post[values == v], expected, rtol=1e-12)
        assert mechanisms.gaussian_above_threshold_epsilon_post(v, num_queries=7, **params) == \
            pytest.approx(expected, rel=1e-12)
    np.testing.assert_array_equal(
        mechanisms.gaussian_above_threshold_epsilon_post(values, num_queries=7, **params), epsilon_post)


@pytest.mark.parametrize("params", [
    dict(threshold=0.5, sigma_threshold=0.3, sigma_query=0.3 * math.sqrt(3), sensitivity=0.2, lower=0.0, upper=1.0),
    # a != 0 (spec 004, 7.1): "rho - b", not "rho - (b + a)" or "rho - (b - a)".
    dict(threshold=0.2, sigma_threshold=0.15, sigma_query=0.26, sensitivity=0.05, lower=-1.0, upper=1.0),
])
def test_gaussian_above_threshold_ex_post_epsilon_is_the_worst_case_log_ratio(params):
    k = 3
    for t in range(1, k + 1):
        x, x_prime = at_worst_case_pair(t, k, params["sensitivity"], params["lower"], params["upper"])
        exact = math.log(_at_law(x, **params)[t] / _at_law(x_prime, **params)[t])
        got = mechanisms.gaussian_above_threshold_epsilon_post(t, num_queries=k, **params)
        assert got == pytest.approx(exact, rel=1e-9) and got >= exact - 1e-12
    x, x_prime = np.full(k, params["upper"] - params["sensitivity"]), np.full(k, params["upper"])
    exact = math.log(_at_law(x, **params)[0] / _at_law(x_prime, **params)[0])
    assert mechanisms.gaussian_above_threshold_epsilon_post(0, num_queries=k, **params) == pytest.approx(exact,
                                                                                                         rel=1e-9)


def test_gaussian_above_threshold_guarantee_is_the_table_maximum():
    params = dict(threshold=0.5, sigma_threshold=0.3, sigma_query=0.3 * math.sqrt(3), sensitivity=0.2, **UNIT)
    args = [params[name] for name in ("sigma_threshold", "sigma_query", "threshold", "sensitivity", "lower", "upper")]
    previous = 0.0
    for k in (1, 2, 3, 6):
        table = [accounting.gaussian_at_epsilon(t, *args) for t in range(1, k + 1)]
        table.append(accounting.gaussian_at_epsilon_no_top(k, *args))
        guarantee = mechanisms.gaussian_above_threshold_guarantee(num_queries=k, **params)
        assert guarantee.epsilon == pytest.approx(max(table), rel=1e-12)
        assert guarantee.epsilon >= previous  # the capped ex-ante bound grows with the stream length
        previous = guarantee.epsilon


def test_gaussian_above_threshold_value_encoding(key):
    params = dict(threshold=0.5, sigma_threshold=1e-3, sigma_query=2e-3, sensitivity=1e-4, **UNIT)
    release = mechanisms.gaussian_above_threshold(key, [0.1, 0.2, 0.9, 0.1], **params)
    assert int(release.value) == 3 and int(release.info.nonprivate_true_stopping_time) == 3
    release = mechanisms.gaussian_above_threshold(key, [0.1, 0.2], **params)
    assert int(release.value) == mechanisms.NO_STOPPING_TIME == 0
    assert int(release.info.nonprivate_true_stopping_time) == 0


def test_gaussian_above_threshold_kernel_clamps_traced_queries(key):
    with pytest.raises(TypeError, match="clip=True"):
        jax.jit(functools.partial(mechanisms.gaussian_above_threshold, **AT))(key, jnp.array([0.3, 0.4]))
    run = jax.jit(functools.partial(mechanisms.gaussian_above_threshold, clip=True, **AT))
    keys = jax.random.split(key, 64)
    raw = jnp.array([jnp.nan, -3.0, 0.3, 9.0])
    clamped = jnp.array([0.0, 0.0, 0.3, 1.0])
    traced = jax.vmap(lambda k: run(k, raw))(keys)
    eager = jax.vmap(lambda k: run(k, clamped))(keys)
    np.testing.assert_array_equal(np.asarray(traced.value), np.asarray(eager.value))


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors that name the argument.

RNM = dict(sigma=0.3, sensitivity=0.1, **UNIT)
AT_OK = dict(threshold=0.5, sigma_threshold=0.3, sigma_query=0.6, sensitivity=0.1, **UNIT)
RNM_CALLS = [
    lambda key, scores, **kw: mechanisms.gaussian_report_noisy_max(key, scores, **{**RNM, **kw}),
    lambda key, scores, **kw: mechanisms.gaussian_report_noisy_max_guarantee(num_candidates=len(scores),
                                                                             **{**RNM, **kw}),
]
AT_CALLS = [
    lambda key, queries, **kw: mechanisms.gaussian_above_threshold(key, queries, **{**AT_OK, **kw}),
    lambda key, queries, **kw: mechanisms.gaussian_above_threshold_guarantee(num_queries=len(queries),
                                                                             **{**AT_OK, **kw}),
    lambda key, queries, **kw: mechanisms.gaussian_above_threshold_epsilon_post(1, num_queries=len(queries),
                                                                                **{**AT_OK, **kw}),
]
BAD_BOUNDED = [
    ("sigma", 0.0, r"sigma must be finite and > 0, got 0.0"),
    ("sigma", -1.0, r"sigma must be finite and > 0, got -1.0"),
    ("lower", 1.0, r"lower must be < upper.*lower=1.0, upper=1.0"),
    ("upper", -0.5, r"lower must be < upper.*lower=0.0, upper=-0.5"),
    ("lower", float("nan"), r"lower must be finite"),
    ("sensitivity", 0.0, r"sensitivity must be finite and > 0"),
    ("sensitivity", 1.5, r"sensitivity must lie in \(0, upper - lower\] = \(0, 1.0\]"),
]


@pytest.mark.parametrize("call", range(len(RNM_CALLS)))
@pytest.mark.parametrize("name, bad, match", BAD_BOUNDED)
def test_gaussian_rnm_bad_parameters(key, call, name, bad, match):
    with pytest.raises(ValueError, match=match):
        RNM_CALLS[call](key, np.array([0.1, 0.5]), **{name: bad})


@pytest.mark.parametrize("call", range(len(AT_CALLS)))
@pytest.mark.parametrize("name, bad, match", [(n.replace("sigma", "sigma_query"), b, m.replace("sigma", "sigma_query"))
                                              for n, b, m in BAD_BOUNDED] + [
    ("sigma_threshold", 0.0, r"sigma_threshold must be finite and > 0"),
    ("threshold", float("inf"), r"threshold must be finite"),
])
def test_gaussian_above_threshold_bad_parameters(key, call, name, bad, match):
    with pytest.raises(ValueError, match=match):
        AT_CALLS[call](key, np.array([0.1, 0.5]), **{name: bad})


def test_scores_and_queries_must_lie_in_the_declared_range(key):
    with pytest.raises(ValueError, match=r"scores must lie in \[lower, upper\] = \[0.0, 1.0\].*index 1: 1.5"):
        mechanisms.gaussian_report_noisy_max(key, np.array([0.1, 1.5, -0.2]), **RNM)
    with pytest.raises(ValueError, match=r"queries must lie in \[lower, upper\].*index 0: -0.001"):
        mechanisms.gaussian_above_threshold(key, np.array([-1e-3, 0.5]), **AT_OK)
    with pytest.raises(ValueError, match=r"non-finite"):
        mechanisms.gaussian_report_noisy_max(key, np.array([0.1, np.nan]), **RNM)


def test_gaussian_rnm_needs_two_candidates(key):
    with pytest.raises(ValueError, match="num_candidates >= 2, got 1"):
        mechanisms.gaussian_report_noisy_max(key, np.array([0.5]), **RNM)
    with pytest.raises(ValueError, match="num_candidates >= 2, got 1"):
        mechanisms.gaussian_report_noisy_max_guarantee(num_candidates=1, **RNM)


@pytest.mark.parametrize("value, error, match", [
    (-1, ValueError, r"stopping time in 1..num_queries=3, or 0"),
    (4, ValueError, r"stopping time in 1..num_queries=3"),
    (np.array([1, 5]), ValueError, r"stopping time in 1..num_queries=3"),
    (1.0, TypeError, r"value must be an integer stopping time"),
    (True, TypeError, r"value must be an integer stopping time"),
])
def test_epsilon_post_rejects_impossible_outputs(value, error, match):
    with pytest.raises(error, match=match):
        mechanisms.gaussian_above_threshold_epsilon_post(value, num_queries=3, **AT_OK)
    with pytest.raises(ValueError, match="num_queries must be >= 1, got 0"):
        mechanisms.gaussian_above_threshold_guarantee(num_queries=0, **AT_OK)


def test_privacy_parameters_must_be_concrete(key):
    def traced_sigma(sigma):
        return mechanisms.gaussian_report_noisy_max(key, np.array([0.1, 0.5]), **dict(RNM, sigma=sigma)).value

    with pytest.raises(TypeError, match="needs a concrete sigma, got a JAX tracer"):
        jax.jit(traced_sigma)(0.3)
