"""The engine at scale: device-resident results, byte-budget plans, order-statistic reads, memory refusals."""

import jax
import numpy as np
import pytest

from gpuprivacy import _memory, oracle, subsets
from gpuprivacy.oracle import _evaluate as engine
from gpuprivacy.oracle import _evaluate_plan, _evaluate_sharded
from gpuprivacy.oracle import _levels


# Built when a test runs, not while pytest collects (random families run JAX programs: 1-2 s per worker).
_FAMILIES = {
    "removals": lambda n: subsets.removals(n, 2),
    "removals-3": lambda n: subsets.removals(n, 3),
    "partition": lambda n: subsets.partition(n, 4),
    "random-small": lambda n: subsets.random_subsets(jax.random.key(0), n, 5, 300),
    "random-large": lambda n: subsets.random_subsets(jax.random.key(1), n, n - 3, 300),
    # > 16 removed: host compaction
    "random-wide": lambda n: subsets.random_subsets(jax.random.key(2), n, n // 2 + 1, 300),
}



def _generic(fn):
    # The same function without the library's order-statistic declaration: the engine must gather whole blocks.
    return oracle.trusted(lambda rows, valid: fn(rows, valid))


@pytest.mark.parametrize("name", list(_FAMILIES))
@pytest.mark.parametrize("label, fn", [("median", oracle.median), ("quantile", oracle.quantile(0.3)),
                                       ("quantile0", oracle.quantile(0.0)), ("quantile1", oracle.quantile(1.0))])
def test_order_statistics_read_from_slots_give_the_block_result_bit_for_bit(name, label, fn):
    data = np.random.default_rng(1).standard_normal(40)
    data[:5] = data[5]  # ties
    family = _FAMILIES[name](40)
    fast = np.asarray(oracle.evaluate(fn, data, family))
    block = np.asarray(oracle.evaluate(_generic(fn), data, family))
    np.testing.assert_array_equal(fast, block)
    with_capacity = np.asarray(oracle.evaluate(fn, data, family, capacity=64))  # padded blocks: same values
    np.testing.assert_array_equal(with_capacity, block)


def test_order_statistics_through_padded_levels_match_the_block_path():
    data = np.random.default_rng(2).standard_normal(12)
    fast = np.asarray(oracle.evaluate_levels(oracle.median, data, depth=3))
    block = np.asarray(oracle.evaluate_levels(_generic(oracle.median), data, depth=3))
    np.testing.assert_array_equal(fast, block)
    family = subsets.removals(12, 3)
    loop = np.array([np.median(data[family.subset(i)]) if len(family.subset(i)) else np.nan
                     for i in range(len(family))])
    np.testing.assert_allclose(fast, loop, rtol=1e-15, atol=0)


def test_empty_subsets_give_nan_on_the_slot_path():
    family = subsets.removals(3, 3)
    values = np.asarray(oracle.evaluate(oracle.median, np.array([1.0, 2.0, 3.0]), family))
    assert np.isnan(values[-1]) and np.isfinite(values[:-1]).all()


def test_evaluate_returns_a_device_array():
    values = oracle.evaluate(oracle.mean, np.arange(30.0), subsets.removals(30, 1))
    assert isinstance(values, jax.Array) and values.shape == (31,)


def test_the_micro_batch_is_sized_by_bytes_not_by_the_chunk():
    data = np.zeros(200)
    mesh = oracle.default_mesh()
    small = engine.plan_evaluation(oracle.mean, data, subsets.removals(200, 2), capacity=200, chunk_size=1, mesh=mesh)
    large = engine.plan_evaluation(oracle.mean, data, subsets.removals(200, 2), capacity=200, chunk_size=None,
                                   mesh=mesh)
    assert small.micro_batch == large.micro_batch  # the compiled body is the same: chunking cannot change bits
    assert small.per_device == 2 * small.micro_batch and large.per_device > small.per_device
    wide = engine.plan_evaluation(oracle.mean, np.zeros(20_000), subsets.removals(20_000, 1), capacity=20_000,
                                  chunk_size=None, mesh=mesh)
    assert wide.micro_batch * wide.block_bytes <= max(_memory.work_budgets("oracle", "cpu")[0], 128 * wide.block_bytes)
    median = engine.plan_evaluation(oracle.median, data, subsets.removals(200, 2), capacity=200, chunk_size=None,
                                    mesh=mesh)
    assert median.micro_batch > large.micro_batch  # an order statistic reads four slots, not the block


def test_a_family_whose_outputs_cannot_fit_is_refused_before_any_work(monkeypatch):
    monkeypatch.setattr(_evaluate_plan, "usable_bytes", lambda device=None: (1 << 20, "a test device (1 MiB)"))

    def no_kernel(*args, **kwargs):
        raise AssertionError("a kernel was built for a refused family")

    monkeypatch.setattr(_evaluate_sharded, "_compiled_kernel", no_kernel)
    with pytest.raises(ValueError, match=r"(?s)removals\(n=1000, depth=2\) has 500,501 subsets.*a test device.*"
                                         r"About [\d,]+ subsets would fit"):
        oracle.evaluate(oracle.mean, np.zeros(1000), subsets.removals(1000, 2))


def test_device_unranking_matches_the_exact_python_ranks_on_awkward_sizes():
    for n, depth in [(1, 1), (2, 2), (7, 3), (64, 2), (65, 3), (255, 2), (256, 2), (257, 1)]:
        family = subsets.removals(n, depth)
        index = np.unique(np.concatenate([np.arange(min(len(family), 400)),
                                          np.linspace(0, len(family) - 1, 300).astype(np.int64)]))
        table = subsets.binomial_table(n, depth)
        offsets = np.asarray(subsets.level_offsets(n, depth), np.int64)
        removed = np.asarray(subsets.unrank_removed_device(jax.numpy.asarray(index), table, offsets, n, depth))
        for row, i in zip(removed, index):
            assert [int(r) for r in row if r < n] == subsets.removal_set(n, int(i)), (n, depth, i)


def test_levels_keep_their_public_budget():
    with pytest.raises(ValueError, match="max_queries"):
        _levels.evaluate_levels(oracle.mean, np.zeros(30), depth=8, max_queries=1000)


@pytest.mark.parametrize("name", ["partition", "random-small", "random-large", "random-wide"])
@pytest.mark.parametrize("label, fn", [("median", oracle.median), ("trimmed_mean", oracle.trimmed_mean(0.1)),
                                       ("mean", oracle.mean)])
def test_device_resident_families_give_the_host_prepared_values(monkeypatch, name, label, fn):
    # On an accelerator an explicit family is uploaded once and each chunk is sliced, sorted and expanded on
    # the device; on a CPU it is prepared chunk by chunk on the host. Both must give the same bits.
    data = np.random.default_rng(3).standard_normal(40)
    family = _FAMILIES[name](40)
    host = np.asarray(oracle.evaluate(fn, data, family, chunk_size=7))
    monkeypatch.setattr(_evaluate_plan, "_RESIDENT_FAMILIES", True)
    plan = engine.plan_evaluation(fn, data, family, capacity=family.capacity, chunk_size=7,
                                  mesh=oracle.default_mesh())
    assert plan.family_resident and plan.num_chunks >= 1
    for chunk in (7, None):
        np.testing.assert_array_equal(np.asarray(oracle.evaluate(fn, data, family, chunk_size=chunk)), host)


@pytest.mark.parametrize("size", [5, 37, 21])  # kept form; removed, 3 wide; removed, 19 wide (compacted on a CPU host)
def test_device_resident_families_over_several_chunks(monkeypatch, size):
    data = np.random.default_rng(4).standard_normal(40)
    family = subsets.random_subsets(jax.random.key(9), 40, size, 70_000)
    host = np.asarray(oracle.evaluate(oracle.mean, data, family, chunk_size=7))
    monkeypatch.setattr(_evaluate_plan, "_RESIDENT_FAMILIES", True)
    plan = engine.plan_evaluation(oracle.mean, data, family, capacity=family.capacity, chunk_size=7,
                                  mesh=oracle.default_mesh())
    assert plan.family_resident and plan.num_chunks > 1
    np.testing.assert_array_equal(np.asarray(oracle.evaluate(oracle.mean, data, family, chunk_size=7)), host)
    loop = np.array([np.mean(data[family.subset(i)]) for i in range(0, len(family), 97)])
    np.testing.assert_allclose(host[::97], loop, rtol=1e-13, atol=1e-15)
