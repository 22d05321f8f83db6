import itertools
import math

import jax
import numpy as np
import pytest

from gpuprivacy import subsets


@pytest.mark.parametrize("n,depth", [(1, 0), (1, 1), (5, 2), (7, 7), (20, 3), (1000, 2)])
def test_count_removals_is_the_binomial_sum(n, depth):
    expected = sum(math.comb(n, i) for i in range(depth + 1))
    assert subsets.count_removals(n, depth) == expected
    assert isinstance(subsets.count_removals(n, depth), int)


def test_count_removals_reference_table():
    # Spec 000 §4.2: Q(20, 2) = 211, Q(24, 3) = 2325 (2.32e3), Q(1000, 3) = 1.67e8.
    assert subsets.count_removals(20, 2) == 211
    assert subsets.count_removals(24, 3) == 2325
    assert round(subsets.count_removals(1000, 3) / 1e8, 2) == 1.67


@pytest.mark.parametrize("n,depth", [(6, 6), (9, 3), (13, 2)])
def test_removals_enumerate_every_subset_once_by_level(n, depth):
    family = subsets.removals(n, depth)
    seen = [tuple(family.subset(i)) for i in range(len(family))]
    assert len(seen) == len(set(seen)) == subsets.count_removals(n, depth)
    levels = [n - len(s) for s in seen]
    assert levels == sorted(levels)
    expected = {tuple(sorted(set(range(n)) - set(r))) for i in range(depth + 1)
                for r in itertools.combinations(range(n), i)}
    assert set(seen) == expected


def test_colex_rank_unrank_round_trip():
    for size in range(5):
        sets = [subsets.colex_unrank(r, size) for r in range(math.comb(9, size))]
        assert [subsets.colex_rank(s) for s in sets] == list(range(math.comb(9, size)))
        assert all(max(s, default=-1) < 9 for s in sets)
    for index in range(subsets.count_removals(10, 3)):
        assert subsets.removal_index(10, subsets.removal_set(10, index)) == index


def test_device_unranking_matches_exact_python():
    # The evaluator unranks removal sets on the device; an oracle that returns its
    # whole block shows which rows each subset kept.
    from gpuprivacy.oracle import evaluate, trusted

    n, depth = 40, 3
    family = subsets.removals(n, depth)
    data = np.arange(n, dtype=np.float64) + 1.0  # row j has value j + 1: the block names its rows
    blocks = np.asarray(evaluate(trusted(lambda rows, valid: rows), data, family, chunk_size=4093))
    assert blocks.shape == (subsets.count_removals(n, depth), n)
    rng = np.random.default_rng(0)
    for index in np.concatenate([[0, 1, n, n + 1, len(family) - 1], rng.integers(0, len(family), 300)]):
        kept = np.setdiff1d(np.arange(n), subsets.removal_set(n, int(index)))
        expected = np.zeros(n)
        expected[: len(kept)] = kept + 1.0
        np.testing.assert_array_equal(blocks[index], expected)


def test_partition_blocks_are_disjoint_and_cover():
    family = subsets.partition(10, 3)
    blocks = [family.subset(i) for i in range(3)]
    assert [len(b) for b in blocks] == [4, 3, 3]
    assert sorted(np.concatenate(blocks).tolist()) == list(range(10))
    assert family.capacity == 4


def test_random_subsets_have_the_requested_size_and_are_reproducible():
    a = subsets.random_subsets(jax.random.key(3), 50, 7, 200)
    b = subsets.random_subsets(jax.random.key(3), 50, 7, 200)
    assert all(len(a.subset(i)) == 7 for i in range(200))
    np.testing.assert_array_equal(a.keep_masks(), b.keep_masks())
    c = subsets.random_subsets(jax.random.key(4), 50, 7, 200)
    assert not np.array_equal(a.keep_masks(), c.keep_masks())
    # Uniform inclusion: each row kept with probability 7/50; binomial tail at 1e-6.
    counts = a.keep_masks().sum(0)
    assert counts.min() > 5 and counts.max() < 60


def test_from_keep_masks_chooses_a_form_and_round_trips():
    rng = np.random.default_rng(1)
    for density in (0.2, 0.95):
        keep = rng.random((30, 40)) < density
        keep[:, 0] = True
        family = subsets.from_keep_masks(keep)
        np.testing.assert_array_equal(family.keep_masks(), keep)
    assert subsets.from_keep_masks(rng.random((5, 40)) < 0.97).kind == "removed"
    assert subsets.from_keep_masks(rng.random((5, 40)) < 0.3).kind == "kept"


@pytest.mark.parametrize("call,match", [
    (lambda: subsets.removals(5, 6), "depth must be <= n"),
    (lambda: subsets.removals(0, 0), "n must be >= 1"),
    (lambda: subsets.removals(30, 10, max_queries=1000), "more than max_queries=1000"),
    (lambda: subsets.partition(3, 4), "parts must be <= n"),
    (lambda: subsets.from_indices(5, [[0, 5]]), r"\[0, 5\)"),
    (lambda: subsets.from_indices(5, [[1, 1]]), "more than once"),
    (lambda: subsets.from_keep_masks(np.zeros((2, 3), bool)), "empty"),
    (lambda: subsets.random_subsets(jax.random.key(0), 5, 6, 1), "size must be <= 5"),
    (lambda: subsets.random_subsets(jax.random.split(jax.random.key(0), 2), 5, 2, 1), "jax.vmap"),
])
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
