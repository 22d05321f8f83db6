"""run_trials: keys, broadcasting and batching."""

import functools

import jax
import numpy as np

from gpuprivacy import mechanisms
from tests.mechanisms._cases import SCORES, VALUE


def test_run_trials_uses_split_keys_and_broadcasts(key):
    out = mechanisms.run_trials(mechanisms.laplace_mechanism, key, 5, VALUE, epsilon=2.0)
    assert out.value.shape == (5, 2)
    keys = jax.random.split(key, 5)
    for i in range(5):
        single = mechanisms.laplace_mechanism(keys[i], VALUE, epsilon=2.0)
        np.testing.assert_array_equal(np.asarray(out.value[i]), np.asarray(single.value))
    # Public parameters are broadcast across the trials axis too.
    np.testing.assert_array_equal(np.asarray(out.info.scale), 0.5)


def test_run_trials_accepts_string_options_and_partials(key):
    out = mechanisms.run_trials(functools.partial(mechanisms.report_noisy_max, noise="laplace"), key, 7, SCORES,
                                epsilon=1.0, monotonic=True)
    assert out.value.shape == (7,) and out.value.dtype == np.int32


def test_run_trials_batched_args(key):
    rows = np.stack([SCORES, -SCORES, SCORES[::-1]])
    # Batched rows are traced: clip=True (the documented map, a no-op on finite scores) is required.
    out = mechanisms.run_trials(mechanisms.report_noisy_max, key, 3, rows, batched_args=True, epsilon=1e9, clip=True)
    np.testing.assert_array_equal(np.asarray(out.value), [4, 0, 0])
