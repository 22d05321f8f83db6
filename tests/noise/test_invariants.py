"""Registry x invariants: shape/dtype, same key, jit == eager, vmap == loop (STYLE rule 22).

XLA compile time dominates these tests on a CPU, so each case compiles two
programs: the eager sampler and ``jit(vmap(sampler))``. Comparing the second
with a Python loop of eager calls checks jit == eager (bitwise) and
vmap over keys == loop over keys at once.
"""

import jax
import numpy as np
import pytest

from tests.noise._cases import SAMPLER_CASES

SHAPE = (2, 3)


@pytest.fixture(params=SAMPLER_CASES, ids=lambda case: case.name)
def case(request):
    return request.param


def test_shape_dtype_and_same_key_same_output(case, key):
    out = case.sample(key, SHAPE)
    assert out.shape == SHAPE
    assert out.dtype == case.dtype
    np.testing.assert_array_equal(np.asarray(out), np.asarray(case.sample(key, SHAPE)))
    other = np.asarray(case.sample(jax.random.fold_in(key, 1), SHAPE))
    assert not np.array_equal(np.asarray(out), other)


def test_jit_of_vmap_over_keys_equals_eager_loop(case, key):
    keys = jax.random.split(key, 3)
    batched = np.asarray(jax.jit(jax.vmap(lambda k: case.sample(k, SHAPE)))(keys))
    looped = np.stack([np.asarray(case.sample(k, SHAPE)) for k in keys])
    np.testing.assert_array_equal(batched, looped)


def test_key_array_is_rejected_with_vmap_hint(case, key):
    with pytest.raises(ValueError, match="jax.vmap"):
        case.sample(jax.random.split(key, 2), SHAPE)


def test_legacy_uint32_key_is_accepted(case):
    legacy = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(np.asarray(case.sample(legacy, SHAPE)),
                                  np.asarray(case.sample(jax.random.wrap_key_data(legacy), SHAPE)))
