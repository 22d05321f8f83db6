"""Invariants every mechanism in the registry must satisfy."""

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import mechanisms
from tests.mechanisms._cases import MECHANISM_CASES

BATCH = 4

cases = pytest.mark.parametrize("case", MECHANISM_CASES, ids=[case.name for case in MECHANISM_CASES])


def assert_same_release(a, b):
    assert type(a.info) is type(b.info)
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def batch_of(data):
    # Distinct inputs per row, so that a vmap that mixed rows up would show.
    offsets = np.arange(BATCH, dtype=np.float64).reshape((BATCH,) + (1,) * np.ndim(data))
    return data[None] + offsets * 0.25


@cases
def test_release_shape_and_dtype(key, case):
    release = case.mechanism(key, case.data, **case.kwargs)
    assert isinstance(release, mechanisms.Release)
    assert release.value.shape == case.value_shape
    assert release.value.dtype == case.value_dtype
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(release.info))
    assert all(not name.startswith("_") for name in release.info._fields)


@cases
def test_same_key_same_release(key, case):
    assert_same_release(case.mechanism(key, case.data, **case.kwargs), case.mechanism(key, case.data, **case.kwargs))


@cases
def test_jit_equals_eager(key, case):
    mechanism = functools.partial(case.mechanism, **case.kwargs)
    assert_same_release(jax.jit(mechanism)(key, jnp.asarray(case.data)), mechanism(key, case.data))


@cases
def test_vmap_equals_loop_and_run_trials(key, case):
    mechanism = functools.partial(case.mechanism, **case.kwargs)
    keys = jax.random.split(key, BATCH)
    data = batch_of(case.data)
    batched = jax.vmap(mechanism)(keys, data)
    for i in range(BATCH):
        row = jax.tree_util.tree_map(functools.partial(lambda index, leaf: leaf[index], i), batched)
        assert_same_release(row, mechanism(keys[i], data[i]))
    assert_same_release(mechanisms.run_trials(case.mechanism, key, BATCH, data, batched_args=True, **case.kwargs),
                        batched)


@cases
def test_batch_of_keys_is_rejected(key, case):
    with pytest.raises(ValueError, match="Use jax.vmap for batching"):
        case.mechanism(jax.random.split(key, 3), case.data, **case.kwargs)


@cases
def test_guarantee_takes_the_mechanism_keywords(case):
    assert case.guarantee(**case.kwargs) == case.expected_guarantee
    mechanism_keywords = {name for name, parameter in inspect.signature(case.mechanism).parameters.items()
                          if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
    guarantee_keywords = set(inspect.signature(case.guarantee).parameters)
    assert mechanism_keywords == guarantee_keywords


@cases
def test_legacy_uint32_key_is_accepted(key, case):
    legacy = jax.random.key_data(key)
    assert_same_release(case.mechanism(legacy, case.data, **case.kwargs), case.mechanism(key, case.data, **case.kwargs))
