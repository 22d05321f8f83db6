"""Level evaluation for the seed-000 wrappers: isolation, public capacity, determinism contract, layouts."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import oracle, subsets


def test_values_follow_removal_order_and_see_only_gathered_rows():
    data = np.array([3.0, -1.0, 7.5, 2.0, 0.25])
    n, depth = data.shape[0], 2
    values = np.asarray(oracle.evaluate_levels(oracle.sum_, data, depth=depth))
    assert values.shape == (subsets.query_count(n, depth),)
    for index in range(values.shape[0]):
        removed = subsets.removal_set(n, index)
        kept = [i for i in range(n) if i not in removed]
        assert values[index] == pytest.approx(data[kept].sum(), abs=1e-12)


def test_the_oracle_is_traced_with_the_public_capacity_never_n():
    shapes = []

    @oracle.trusted
    def spy(rows, valid):
        shapes.append((rows.shape, valid.shape))
        return jnp.where(valid, rows, 0.0).sum()

    oracle.evaluate_levels(spy, np.arange(5.0), depth=1, capacity=16)
    oracle.evaluate_levels(spy, np.arange(6.0), depth=1, capacity=16)
    assert shapes and all(shape == ((16,), (16,)) for shape in shapes)
    with pytest.raises(ValueError, match="capacity"):
        oracle.evaluate_levels(spy, np.arange(20.0), depth=0, capacity=16)


def test_a_subset_gets_bitwise_the_same_value_in_x_and_in_a_neighbour():
    # Spec 000 P1: the same z must get the same f(z) in the runs on x and on x + {i}.
    rng = np.random.default_rng(2)
    x = rng.normal(size=6)
    x_plus = np.concatenate([x, [rng.normal()]])
    small = np.asarray(oracle.evaluate_levels(oracle.variance, x, depth=6))
    large = np.asarray(oracle.evaluate_levels(oracle.variance, x_plus, depth=7))
    big_index = subsets.bitmask_to_removal_index(7, 7)
    small_index = subsets.bitmask_to_removal_index(6, 6)
    for mask in range(1, 2**6):  # subsets of x (row 6 of x_plus absent)
        a, b = small[small_index[mask]], large[big_index[mask]]
        assert a == b or (np.isnan(a) and np.isnan(b))


def test_nondeterministic_oracles_are_rejected_when_verification_is_on():
    @oracle.trusted  # in-process, so the determinism check sees the callback's noise
    def noisy(rows, valid):
        extra = jax.pure_callback(lambda: np.float64(np.random.default_rng().normal()),
                                  jax.ShapeDtypeStruct((), jnp.float64))
        return jnp.where(valid, rows, 0.0).sum() + extra

    with pytest.raises(ValueError, match="different values on the same subset"):
        oracle.evaluate_levels(noisy, np.arange(4.0), depth=2, verify_determinism=True)
    values = oracle.evaluate_levels(oracle.sum_, np.arange(4.0), depth=2, verify_determinism=True)
    assert values.shape == (11,)


def test_power_set_layout_and_levels_split():
    data = np.arange(1.0, 6.0)
    values = oracle.evaluate_levels(oracle.sum_, data, depth=5)
    table = np.asarray(oracle.to_powerset(values, 5, 5, 0.0))
    for mask in range(32):
        assert table[mask] == sum(data[i] for i in range(5) if (mask >> i) & 1)
    levels = oracle.split_levels(values, 5, 5)
    assert [level.shape[0] for level in levels] == [1, 5, 10, 10, 5, 1]


def test_refusal_happens_before_any_oracle_call():
    calls = []

    @oracle.trusted
    def spy(rows, valid):
        calls.append(1)
        return rows.sum()

    with pytest.raises(ValueError, match="oracle queries, more than max_queries"):
        oracle.evaluate_levels(spy, np.arange(20.0), depth=20, max_queries=1000)
    assert not calls


def test_power_set_evaluator_matches_gathering_by_canonical_position():
    data = np.array([3.0, -1.0, 7.5, 2.0, 0.25, 2.0])
    ordered = data[oracle.canonical_order(data)]
    shapes = []

    @oracle.trusted
    def spy_median(rows, valid):
        shapes.append(rows.shape)
        return oracle.median(rows, valid)

    values = np.asarray(oracle.evaluate_powerset(spy_median, data, chunk_size=16))
    assert values.shape == (64,) and set(shapes) == {(oracle.DEFAULT_CAPACITY,)}
    for mask in range(64):
        kept = ordered[[i for i in range(6) if (mask >> i) & 1]]
        if kept.size:
            assert values[mask] == np.median(kept)
        else:
            assert np.isnan(values[mask])
    with pytest.raises(ValueError, match="max_queries"):
        oracle.evaluate_powerset(oracle.mean, data, max_queries=10)
