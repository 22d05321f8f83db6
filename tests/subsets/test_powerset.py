"""Power-set / removal-level engine of spec 000 §4: exact counts, the planner, layouts and sweeps."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import subsets

# Spec 000 §4.2 reference table (rows n, columns D), 3 significant digits.
TABLE = {
    (16, 3): 697, (20, 2): 211, (20, 4): 6.20e3, (24, 8): 1.27e6, (28, 12): 7.67e7, (32, 16): 2.45e9,
    (64, 6): 8.33e7, (128, 8): 1.53e12, (1000, 24): 1.25e48, (16, 24): 2**16, (32, 24): 4.29e9,
}


@pytest.mark.parametrize("n_depth, expected", sorted(TABLE.items()))
def test_query_counts_match_the_spec_table(n_depth, expected):
    n, depth = n_depth
    count = subsets.query_count(n, depth)
    assert isinstance(count, int)
    assert count == pytest.approx(expected, rel=5e-3)
    assert count == sum(math.comb(n, i) for i in range(min(depth, n) + 1))


def test_planner_refuses_with_count_time_and_what_fits():
    with pytest.raises(ValueError) as info:
        subsets.plan_queries(64, 8, max_queries=10**6, seconds_per_query=1e-6)
    message = str(info.value)
    assert "5130659561" in message and "max_queries=1000000" in message
    assert "1.43 hours" in message
    assert "depth <= 4 at n=64" in message and "n <= 23 at depth 8" in message
    assert subsets.query_count(64, 4) <= 10**6 < subsets.query_count(64, 5)
    assert subsets.query_count(23, 8) <= 10**6 < subsets.query_count(24, 8)
    assert subsets.plan_queries(20, 3, max_queries=10**6) == 1351


def test_bitmask_index_matches_removal_order():
    n = 7
    index = subsets.bitmask_to_removal_index(n, n)
    assert sorted(index.tolist()) == list(range(2**n))
    for mask in range(2**n):
        removed = [i for i in range(n) if not (mask >> i) & 1]
        assert index[mask] == _removal_index(n, removed)
    shallow = subsets.bitmask_to_removal_index(n, 2)
    assert (shallow >= 0).sum() == subsets.query_count(n, 2)
    assert all(shallow[m] == -1 for m in range(2**n) if n - bin(m).count("1") > 2)


def _removal_index(n, removed):
    return sum(math.comb(n, i) for i in range(len(removed))) + subsets.colex_rank(removed)


@pytest.mark.parametrize("level", range(6))
def test_child_ranks_are_colex_ranks_of_one_more_removal(level):
    n = 6
    children = subsets.child_ranks(n, level)
    removed_sets = subsets.level_removed_sets(n, level)
    assert children.shape == (math.comb(n, level), n)
    for rank, removed in enumerate(removed_sets.tolist()):
        assert subsets.colex_rank(removed) == rank
        for j in range(n):
            expected = -1 if j in removed else subsets.colex_rank(sorted(removed + [j]))
            assert children[rank, j] == expected


def test_subset_max_and_level_reductions_match_brute_force():
    n = 6
    rng = np.random.default_rng(0)
    values = rng.normal(size=2**n)
    closure = np.asarray(subsets.subset_max(jnp.asarray(values), n))
    for s in range(2**n):
        assert closure[s] == max(values[z] for z in range(2**n) if z & s == z)
    sizes = subsets.popcounts(n)
    mins = np.asarray(subsets.level_reduce(jnp.asarray(values), n, "min", None))
    for size in range(n + 1):
        assert mins[size] == values[sizes == size].min()


def test_level_closure_max_agrees_with_the_power_set_sweep():
    n, depth = 7, 4
    rng = np.random.default_rng(1)
    values = rng.integers(0, 50, size=2**n).astype(np.int32)
    index = subsets.bitmask_to_removal_index(n, depth)
    flat = np.zeros(subsets.query_count(n, depth), np.int32)
    keep = index >= 0
    flat[index[keep]] = values[keep]
    low = n - depth
    sizes = subsets.popcounts(n)
    powerset = np.asarray(subsets.subset_max(jnp.asarray(np.where(sizes >= low, values, 0)), n))
    offsets = [sum(math.comb(n, i) for i in range(d)) for d in range(depth + 2)]
    levels = [jnp.asarray(flat[offsets[d]:offsets[d + 1]]) for d in range(depth + 1)]
    children = [subsets.child_ranks(n, d) for d in range(depth)]
    closure = subsets.levels_closure_max(levels, children)
    for mask in range(2**n):
        if keep[mask]:
            d = n - int(sizes[mask])
            assert int(closure[d][index[mask] - offsets[d]]) == powerset[mask]


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="depth"):
        subsets.query_count(5, -1)
    with pytest.raises(ValueError, match="max_queries"):
        subsets.plan_queries(5, 2, max_queries=0)
    assert subsets.query_count(5, 99) == 32  # depth beyond n means the whole power set (spec §4.2)
