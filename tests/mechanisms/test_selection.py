"""Exponential mechanism, report-noisy-max and permute-and-flip against exact laws."""

import functools
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import mechanisms
from gpuprivacy.accounting import PureDP
from tests._helpers import TEST_FAILURE_RATE
from tests.mechanisms import _reference as reference

NUM_TRIALS = 100_000
SCORES = np.array([0.0, 0.5, 1.0, 2.0, 3.0])


def counts(mechanism, key, scores, **kwargs):
    release = mechanisms.run_trials(mechanism, key, NUM_TRIALS, scores, **kwargs)
    return np.bincount(np.asarray(release.value), minlength=len(scores))


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_matches_softmax(key, monotonic):
    scale = 1.0 if monotonic else 2.0
    law = reference.softmax_law(SCORES, scale)
    observed = counts(mechanisms.exponential_mechanism, key, SCORES, epsilon=1.0, monotonic=monotonic)
    assert reference.chi_square_pvalue(observed, law) > TEST_FAILURE_RATE
    # Power: the law at epsilon = 1.2 must be rejected by the same sample.
    assert reference.chi_square_pvalue(observed, reference.softmax_law(SCORES, scale / 1.2)) < TEST_FAILURE_RATE


@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("scores", [SCORES, np.array([7.0]), np.array([1.0, 1.0, -3.0]),
                                    np.linspace(-40.0, 3.0, 17)])
def test_exponential_mechanism_probabilities_exact(scores, monotonic):
    scale = (1.0 if monotonic else 2.0) / 0.7
    got = mechanisms.exponential_mechanism_probabilities(scores, epsilon=0.7, monotonic=monotonic)
    assert got.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(got), reference.softmax_law(scores, scale), rtol=1e-12)


def test_exponential_mechanism_probabilities_extreme_scores_do_not_overflow():
    got = mechanisms.exponential_mechanism_probabilities([0.0, 1e6, 1e6 - 1.0], epsilon=1e3)
    assert np.all(np.isfinite(np.asarray(got)))
    # scale = 2/1000: the runner-up has probability exp(-500) / (1 + exp(-500)), which must not underflow.
    np.testing.assert_allclose(np.asarray(got), [0.0, 1.0, np.exp(-500.0)], rtol=1e-12, atol=0.0)


def test_gumbel_noisy_max_is_the_exponential_mechanism_bit_for_bit(key):
    em = mechanisms.run_trials(mechanisms.exponential_mechanism, key, NUM_TRIALS, SCORES, epsilon=1.0)
    rnm = mechanisms.run_trials(mechanisms.report_noisy_max, key, NUM_TRIALS, SCORES, epsilon=1.0, noise="gumbel")
    np.testing.assert_array_equal(np.asarray(em.value), np.asarray(rnm.value))


def test_permute_and_flip_and_exponential_noise_match_exact_law(key):
    law = reference.permute_and_flip_law(SCORES, 2.0)
    np.testing.assert_allclose(np.asarray(mechanisms.permute_and_flip_probabilities(SCORES, epsilon=1.0)), law,
                               rtol=1e-12)
    literal_key, noisy_max_key = jax.random.split(key)
    literal = counts(mechanisms.permute_and_flip, literal_key, SCORES, epsilon=1.0)
    noisy_max = counts(mechanisms.report_noisy_max, noisy_max_key, SCORES, epsilon=1.0, noise="exponential")
    for observed in (literal, noisy_max):
        assert reference.chi_square_pvalue(observed, law) > TEST_FAILURE_RATE
        # Power: the exponential mechanism's law and PF at epsilon = 1.2 are rejected.
        assert reference.chi_square_pvalue(observed, reference.softmax_law(SCORES, 2.0)) < TEST_FAILURE_RATE
        assert reference.chi_square_pvalue(observed, reference.permute_and_flip_law(SCORES, 2.0 / 1.2)) < \
            TEST_FAILURE_RATE


def test_permute_and_flip_monotonic_law(key):
    observed = counts(mechanisms.permute_and_flip, key, SCORES, epsilon=1.0, monotonic=True)
    assert reference.chi_square_pvalue(observed, reference.permute_and_flip_law(SCORES, 1.0)) > TEST_FAILURE_RATE
    assert reference.chi_square_pvalue(observed, reference.permute_and_flip_law(SCORES, 2.0)) < TEST_FAILURE_RATE


@pytest.mark.parametrize("scores", [np.array([3.0]), np.array([0.0, 0.0]), np.array([2.0, 2.0, 0.0, -1.0]),
                                    np.random.default_rng(0).normal(size=11) * 3])
def test_permute_and_flip_probabilities_exact(scores):
    got = np.asarray(mechanisms.permute_and_flip_probabilities(scores, epsilon=0.9, sensitivity=1.5))
    np.testing.assert_allclose(got, reference.permute_and_flip_law(scores, 2 * 1.5 / 0.9), rtol=1e-12)
    assert got.sum() == pytest.approx(1.0, abs=1e-13)


def test_permute_and_flip_probabilities_many_candidates():
    scores = np.random.default_rng(1).normal(size=2000) * 5
    got = np.asarray(mechanisms.permute_and_flip_probabilities(scores, epsilon=1.0))
    assert np.all(got >= 0) and got.sum() == pytest.approx(1.0, abs=1e-11)
    # PF never does worse than the exponential mechanism in expected score (McKenna & Sheldon 2020).
    em = np.asarray(mechanisms.exponential_mechanism_probabilities(scores, epsilon=1.0))
    assert got @ scores >= em @ scores


@pytest.mark.parametrize("monotonic", [False, True])
def test_laplace_noisy_max_matches_numerical_integral(key, monotonic):
    scale = 1.0 if monotonic else 2.0
    law = reference.laplace_noisy_max_law(SCORES, scale)
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    observed = counts(mechanisms.report_noisy_max, key, SCORES, epsilon=1.0, noise="laplace", monotonic=monotonic)
    assert reference.chi_square_pvalue(observed, law) > TEST_FAILURE_RATE
    # Power: the Laplace law at epsilon = 0.8 and the exponential mechanism's law are rejected.
    assert reference.chi_square_pvalue(observed, reference.laplace_noisy_max_law(SCORES, scale * 1.25)) < \
        TEST_FAILURE_RATE
    assert reference.chi_square_pvalue(observed, reference.softmax_law(SCORES, scale)) < TEST_FAILURE_RATE


SELECTORS = [
    functools.partial(mechanisms.report_noisy_max, noise="gumbel"),
    functools.partial(mechanisms.report_noisy_max, noise="laplace"),
    functools.partial(mechanisms.report_noisy_max, noise="exponential"),
    mechanisms.exponential_mechanism,
    mechanisms.permute_and_flip,
]


@pytest.mark.parametrize("selector", SELECTORS)
def test_huge_epsilon_always_returns_true_argmax(key, selector):
    scores = np.array([3.0, -1.0, 4.0, 1.0, 3.999])
    release = mechanisms.run_trials(selector, key, NUM_TRIALS, scores, epsilon=1e9)
    np.testing.assert_array_equal(np.asarray(release.value), 2)
    np.testing.assert_array_equal(np.asarray(release.info.nonprivate_true_argmax), 2)
    np.testing.assert_array_equal(np.asarray(release.info.nonprivate_selected_score), 4.0)


@pytest.mark.parametrize("selector", SELECTORS)
def test_small_epsilon_selects_every_candidate(key, selector):
    release = mechanisms.run_trials(selector, key, NUM_TRIALS, SCORES, epsilon=1e-3)
    # Nearly uniform: a candidate is missed with probability about 5 (4/5)^NUM_TRIALS.
    assert set(np.asarray(release.value).tolist()) == {0, 1, 2, 3, 4}


def test_true_argmax_ties_resolve_to_first_index(key):
    release = mechanisms.report_noisy_max(key, [1.0, 5.0, 5.0, 2.0], epsilon=1.0)
    assert int(release.info.nonprivate_true_argmax) == 1
    assert float(release.info.nonprivate_true_max) == 5.0


@pytest.mark.parametrize("monotonic, factor", [(False, 2), (True, 1)])
def test_scale_is_rounded_up(key, monotonic, factor):
    release = mechanisms.report_noisy_max(key, [0.0, 1.0], epsilon=3.0, sensitivity=0.1, monotonic=monotonic)
    scale = float(release.info.scale)
    exact = Fraction(factor) * Fraction(0.1) / Fraction(3.0)
    assert Fraction(scale) >= exact
    assert Fraction(np.nextafter(scale, 0.0)) < exact  # and tight


def test_kernels_are_total_under_jit(key):
    # Traced scores need clip=True (refused otherwise): NaN is then the lowest score and inf is clamped.
    with pytest.raises(TypeError, match="clip=True"):
        jax.jit(functools.partial(mechanisms.report_noisy_max, epsilon=1.0))(key, jnp.array([0.0, 1.0]))
    select = jax.jit(functools.partial(mechanisms.report_noisy_max, epsilon=1e6, noise="laplace", clip=True))
    assert int(select(key, jnp.array([jnp.nan, 0.0, 1.0])).value) == 2
    assert int(select(key, jnp.array([0.0, jnp.inf, 1.0])).value) == 1
    flip = jax.jit(functools.partial(mechanisms.permute_and_flip, epsilon=1e6, clip=True))
    assert int(flip(key, jnp.array([jnp.nan, 0.0, 1.0])).value) == 2
    assert int(flip(key, jnp.array([-jnp.inf, jnp.inf, 1.0])).value) == 1


def test_vmap_over_epsilon(key):
    epsilons = jnp.array([0.5, 1.0, 4.0])
    scores = jnp.asarray(SCORES)
    batched = jax.vmap(lambda e: mechanisms.report_noisy_max(key, scores, epsilon=e, noise="laplace"))(epsilons)
    for i, epsilon in enumerate([0.5, 1.0, 4.0]):
        single = mechanisms.report_noisy_max(key, scores, epsilon=epsilon, noise="laplace")
        assert int(batched.value[i]) == int(single.value)
        np.testing.assert_allclose(float(batched.info.scale[i]), float(single.info.scale), rtol=1e-15)


@pytest.mark.parametrize("guarantee, kwargs", [
    (mechanisms.report_noisy_max_guarantee, dict(noise="laplace", monotonic=True)),
    (mechanisms.report_noisy_max_guarantee, dict(noise="exponential")),
    (mechanisms.exponential_mechanism_guarantee, dict(sensitivity=3.0)),
    (mechanisms.permute_and_flip_guarantee, dict(monotonic=True)),
])
def test_guarantees_are_pure_dp(guarantee, kwargs):
    assert guarantee(epsilon=0.3, **kwargs) == PureDP(0.3)
