"""Bad input raises a clear ValueError / TypeError naming the argument (STYLE rule 17)."""

import functools
import inspect

import jax
import numpy as np
import pytest

from gpuprivacy import mechanisms
from tests.mechanisms._cases import MECHANISM_CASES, QUERIES, SCORES, VALUE

SELECTION = [
    ("exponential_mechanism", functools.partial(mechanisms.exponential_mechanism, epsilon=1.0)),
    ("report_noisy_max", functools.partial(mechanisms.report_noisy_max, epsilon=1.0)),
    ("permute_and_flip", functools.partial(mechanisms.permute_and_flip, epsilon=1.0)),
    ("above_threshold", functools.partial(mechanisms.above_threshold, threshold=0.0, epsilon=1.0)),
    ("sparse_vector", functools.partial(mechanisms.sparse_vector, threshold=0.0, epsilon=1.0, max_positives=1)),
    ("exponential_mechanism_probabilities",
     lambda key, scores: mechanisms.exponential_mechanism_probabilities(scores, epsilon=1.0)),
    ("permute_and_flip_probabilities",
     lambda key, scores: mechanisms.permute_and_flip_probabilities(scores, epsilon=1.0)),
]
selection = pytest.mark.parametrize("name, function", SELECTION, ids=[name for name, _ in SELECTION])


@selection
def test_scores_must_be_one_dimensional(key, name, function):
    with pytest.raises(ValueError, match=r"1-D.*got shape \(2, 3\).*jax.vmap"):
        function(key, np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"1-D.*got shape \(\)"):
        function(key, 1.0)


@selection
def test_scores_must_be_nonempty(key, name, function):
    with pytest.raises(ValueError, match="at least one"):
        function(key, np.zeros(0))


@selection
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_scores_must_be_finite(key, name, function, bad):
    with pytest.raises(ValueError, match=r"non-finite.*index \(1,\)"):
        function(key, np.array([0.0, bad, 1.0]))


@selection
def test_scores_must_be_real(key, name, function):
    with pytest.raises(TypeError, match="real"):
        function(key, np.array([1 + 1j, 2.0]))
    with pytest.raises(TypeError, match="real numbers"):
        function(key, np.array(["a", "b"]))


BAD_PARAMETERS = [
    ("epsilon", 0.0, ValueError, r"epsilon must be finite and > 0, got 0.0"),
    ("epsilon", -1.0, ValueError, r"epsilon must be finite and > 0, got -1.0"),
    ("epsilon", float("nan"), ValueError, r"epsilon must be finite"),
    ("epsilon", float("inf"), ValueError, r"epsilon must be finite"),
    ("epsilon", "1.0", TypeError, r"epsilon must be a real number"),
    ("sensitivity", 0.0, ValueError, r"sensitivity must be finite and > 0"),
    ("sensitivity", -2.0, ValueError, r"sensitivity must be finite and > 0"),
    ("rho", 0.0, ValueError, r"rho must be finite and > 0"),
    ("delta", 0.0, ValueError, r"delta must lie in the open interval \(0, 1\)"),
    ("delta", 1.0, ValueError, r"delta must lie in the open interval \(0, 1\)"),
    ("monotonic", 1, TypeError, r"monotonic must be True or False"),
    ("max_positives", 0, ValueError, r"max_positives must be >= 1, got 0"),
    ("max_positives", 1.5, TypeError, r"max_positives must be an integer"),
    ("threshold", float("nan"), ValueError, r"threshold must be finite"),
    ("noise", "cauchy", ValueError, r"noise must be one of 'gumbel', 'laplace', 'exponential'; got 'cauchy'"),
    ("calibration", "rdp", ValueError, r"calibration must be one of 'analytic', 'classic'; got 'rdp'"),
    ("secure", "yes", TypeError, r"secure must be True or False"),
    ("granularity", 0.0, ValueError, r"granularity must be finite and > 0"),
]
BAD_CALLS = [pytest.param(case, *bad, id=f"{case.name}-{bad[0]}={bad[1]!r}")
             for case in MECHANISM_CASES for bad in BAD_PARAMETERS
             if bad[0] in inspect.signature(case.mechanism).parameters]


@pytest.mark.parametrize("case, parameter, bad, error, match", BAD_CALLS)
def test_bad_parameters(key, case, parameter, bad, error, match):
    kwargs = dict(case.kwargs, **{parameter: bad})
    with pytest.raises(error, match=match):
        case.mechanism(key, case.data, **kwargs)
    with pytest.raises(error, match=match):
        case.guarantee(**kwargs)


@pytest.mark.parametrize("mechanism", [mechanisms.laplace_mechanism,
                                       functools.partial(mechanisms.gaussian_mechanism, delta=1e-6)])
def test_values_must_be_finite(key, mechanism):
    with pytest.raises(ValueError, match=r"value contains 1 non-finite value.*index \(1, 0\)"):
        mechanism(key, np.array([[0.0], [np.nan]]), epsilon=1.0)
    with pytest.raises(TypeError, match="value must hold real numbers"):
        mechanism(key, [None, 1.0], epsilon=1.0)


def test_keys_must_be_keys(key):
    with pytest.raises(TypeError, match="jax.random.key"):
        mechanisms.laplace_mechanism(0, VALUE, epsilon=1.0)
    with pytest.raises(ValueError, match="single key.*Use jax.vmap for batching"):
        mechanisms.report_noisy_max(jax.random.split(key, 2), SCORES, epsilon=1.0)


def test_privacy_parameters_are_keyword_only(key):
    with pytest.raises(TypeError):
        mechanisms.above_threshold(key, QUERIES, 0.0, 1.0)


def test_run_trials_validation(key):
    with pytest.raises(ValueError, match="num_trials must be >= 1"):
        mechanisms.run_trials(mechanisms.laplace_mechanism, key, 0, VALUE, epsilon=1.0)
    with pytest.raises(ValueError, match="leading axis of length num_trials=3.*shape \\(2,\\)"):
        mechanisms.run_trials(mechanisms.laplace_mechanism, key, 3, VALUE, batched_args=True, epsilon=1.0)
    with pytest.raises(ValueError, match="Use jax.vmap"):
        mechanisms.run_trials(mechanisms.laplace_mechanism, jax.random.split(key, 2), 3, VALUE, epsilon=1.0)
