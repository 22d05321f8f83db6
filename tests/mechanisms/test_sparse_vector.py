"""AboveThreshold and the sparse vector technique against their exact laws."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import mechanisms
from gpuprivacy.accounting import PureDP
from tests._helpers import TEST_FAILURE_RATE
from tests.mechanisms import _reference as reference

NUM_TRIALS = 100_000
QUERIES = np.array([0.0, 1.0, 0.5, 2.0])
THRESHOLD = 1.5


def above_threshold_law(threshold_scale, query_scale):
    """Pr[value = i] for i = -1, 0, ..., k-1, from the exact answer-vector law with c = 1."""
    law = reference.sparse_vector_law(QUERIES, THRESHOLD, threshold_scale, query_scale, max_positives=1)
    out = np.zeros(len(QUERIES) + 1)
    for answers, probability in law.items():
        out[answers.index(True) + 1 if True in answers else 0] += probability
    return out


@pytest.mark.parametrize("monotonic", [False, True])
def test_above_threshold_halting_law(key, monotonic):
    # Lyu, Su & Li Alg. 1, c = 1, epsilon = 1: rho ~ Lap(2), nu ~ Lap(4) (Lap(2) if monotonic).
    query_scale = 2.0 if monotonic else 4.0
    release = mechanisms.run_trials(mechanisms.above_threshold, key, NUM_TRIALS, QUERIES, threshold=THRESHOLD,
                                    epsilon=1.0, monotonic=monotonic)
    assert float(release.info.threshold_scale[0]) == 2.0
    assert float(release.info.query_scale[0]) == query_scale
    observed = np.bincount(np.asarray(release.value) + 1, minlength=len(QUERIES) + 1)
    law = above_threshold_law(2.0, query_scale)
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    assert reference.chi_square_pvalue(observed, law) > TEST_FAILURE_RATE
    # Power: the other query scale, and a threshold scale off by 1.5x, are rejected.
    assert reference.chi_square_pvalue(observed, above_threshold_law(2.0, 6.0 - query_scale)) < TEST_FAILURE_RATE
    assert reference.chi_square_pvalue(observed, above_threshold_law(3.0, query_scale)) < TEST_FAILURE_RATE


def encode(answers):
    return np.asarray(answers, dtype=np.int64) @ (2 ** np.arange(np.shape(answers)[-1]))


def test_sparse_vector_answer_law(key):
    # c = 2, epsilon = 2: rho ~ Lap(1), nu ~ Lap(4 c / epsilon) = Lap(4).
    release = mechanisms.run_trials(mechanisms.sparse_vector, key, NUM_TRIALS, QUERIES, threshold=THRESHOLD,
                                    epsilon=2.0, max_positives=2)
    observed = np.bincount(encode(np.asarray(release.value)), minlength=2 ** len(QUERIES))

    def law(threshold_scale, query_scale):
        out = np.zeros(2 ** len(QUERIES))
        for answers, probability in reference.sparse_vector_law(QUERIES, THRESHOLD, threshold_scale, query_scale,
                                                                max_positives=2).items():
            out[encode(answers)] += probability
        return out

    exact = law(1.0, 4.0)
    assert np.all(observed[exact == 0] == 0)  # never more than two positives
    support = exact > 0
    assert reference.chi_square_pvalue(observed[support], exact[support]) > TEST_FAILURE_RATE
    # Power: the noise of c = 1 and a refreshed budget split are rejected.
    assert reference.chi_square_pvalue(observed[support], law(1.0, 2.0)[support]) < TEST_FAILURE_RATE
    assert reference.chi_square_pvalue(observed[support], law(2.0, 4.0)[support]) < TEST_FAILURE_RATE


@pytest.mark.parametrize("max_positives", [1, 2, 3])
def test_sparse_vector_never_exceeds_max_positives_and_info_is_consistent(key, max_positives):
    queries = np.array([3.0, -1.0, 4.0, 5.0])
    release = mechanisms.run_trials(mechanisms.sparse_vector, key, NUM_TRIALS, queries, threshold=1.0,
                                    epsilon=3.0, max_positives=max_positives)
    answers = np.asarray(release.value)
    positives = answers.sum(axis=1)
    assert positives.max() == max_positives  # the cutoff is reached in many trials, never passed
    np.testing.assert_array_equal(np.asarray(release.info.num_positives), positives)
    halt = np.asarray(release.info.halt_index)
    halted = halt >= 0
    np.testing.assert_array_equal(halted, positives == max_positives)
    # The halting query answered True and nothing after it did.
    rows = np.nonzero(halted)[0]
    assert answers[rows, halt[rows]].all()
    after_halt = np.arange(len(queries))[None, :] > halt[:, None]
    assert not (answers & after_halt & halted[:, None]).any()
    np.testing.assert_array_equal(np.asarray(release.info.nonprivate_true_answers[0]), queries >= 1.0)


def test_above_threshold_is_sparse_vector_with_one_positive(key):
    at = mechanisms.run_trials(mechanisms.above_threshold, key, NUM_TRIALS, QUERIES, threshold=THRESHOLD,
                               epsilon=1.0)
    sv = mechanisms.run_trials(mechanisms.sparse_vector, key, NUM_TRIALS, QUERIES, threshold=THRESHOLD,
                               epsilon=1.0, max_positives=1)
    np.testing.assert_array_equal(np.asarray(at.value), np.asarray(sv.info.halt_index))
    first = np.where(np.asarray(sv.value).any(axis=1), np.asarray(sv.value).argmax(axis=1), -1)
    np.testing.assert_array_equal(np.asarray(at.value), first)


def test_huge_epsilon_finds_the_first_true_crossing(key):
    release = mechanisms.run_trials(mechanisms.above_threshold, key, NUM_TRIALS, QUERIES, threshold=0.75,
                                    epsilon=1e9)
    np.testing.assert_array_equal(np.asarray(release.value), 1)
    np.testing.assert_array_equal(np.asarray(release.info.nonprivate_true_first_index), 1)
    release = mechanisms.run_trials(mechanisms.above_threshold, key, NUM_TRIALS, QUERIES, threshold=10.0,
                                    epsilon=1e9)
    np.testing.assert_array_equal(np.asarray(release.value), mechanisms.NO_QUERY_ABOVE)
    np.testing.assert_array_equal(np.asarray(release.info.nonprivate_true_first_index), -1)


def test_scales_follow_the_budget_split(key):
    release = mechanisms.sparse_vector(key, QUERIES, threshold=0.0, epsilon=0.5, max_positives=3, sensitivity=2.0)
    assert float(release.info.threshold_scale) == 2 * 2.0 / 0.5
    assert float(release.info.query_scale) == 4 * 3 * 2.0 / 0.5
    release = mechanisms.sparse_vector(key, QUERIES, threshold=0.0, epsilon=0.5, max_positives=3, sensitivity=2.0,
                                       monotonic=True)
    assert float(release.info.query_scale) == 2 * 3 * 2.0 / 0.5


def test_nan_queries_are_never_above_under_jit(key):
    run = jax.jit(functools.partial(mechanisms.above_threshold, threshold=0.0, epsilon=1e9, clip=True))
    assert int(run(key, jnp.array([jnp.nan, -1.0, 1.0, 2.0])).value) == 2


def test_guarantees():
    assert mechanisms.above_threshold_guarantee(epsilon=0.4) == PureDP(0.4)
    assert mechanisms.sparse_vector_guarantee(epsilon=0.4, max_positives=10, monotonic=True) == PureDP(0.4)
    with pytest.raises(ValueError, match="max_positives"):
        mechanisms.sparse_vector_guarantee(epsilon=0.4, max_positives=0)
