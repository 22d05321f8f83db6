import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import oracle, subsets
from tests._helpers import free_port

HERE = Path(__file__).parent


# Built when a test runs, not while pytest collects (random families run JAX programs: 1-2 s per worker).
_FAMILIES = {
    "removals": lambda n: subsets.removals(n, 2),
    "partition": lambda n: subsets.partition(n, 4),
    "random-small": lambda n: subsets.random_subsets(jax.random.key(0), n, 5, 60),
    "random-large": lambda n: subsets.random_subsets(jax.random.key(1), n, n - 3, 60),
    "random-wide": lambda n: subsets.random_subsets(jax.random.key(2), n, n // 2, 60),
}


def _families(n):
    return {name: make(n) for name, make in _FAMILIES.items()}


@pytest.mark.parametrize("name", list(_FAMILIES))
def test_oracle_sees_exactly_its_subset_sorted_and_zero_padded(name):
    # A cheating oracle hands back everything it was given.
    n = 30
    data = np.random.default_rng(0).permutation(np.arange(100.0, 100.0 + n))  # distinct, non-zero
    family = _FAMILIES[name](n)
    blocks, valids = oracle.evaluate(oracle.trusted(lambda rows, valid: (rows, valid)), data, family)
    blocks, valids = np.asarray(blocks), np.asarray(valids)
    assert blocks.shape == (len(family), family.capacity)
    for i in range(len(family)):
        kept = family.subset(i)
        size = len(kept)
        np.testing.assert_array_equal(blocks[i, :size], np.sort(data[kept]))
        np.testing.assert_array_equal(blocks[i, size:], 0.0)
        np.testing.assert_array_equal(valids[i], np.arange(family.capacity) < size)
        excluded = np.setdiff1d(data, data[kept])
        assert not np.isin(blocks[i], excluded).any()


@pytest.mark.parametrize("name", list(_FAMILIES))
def test_public_capacity_hides_n_from_every_subset(name):
    # Under add/remove neighbours n is private: with a public capacity the blocks of the same subset
    # are identical whether the dataset has one more row or not.
    n, capacity = 30, 40
    data = np.random.default_rng(0).permutation(np.arange(100.0, 100.0 + n))
    family = _FAMILIES[name](n)
    blocks, valids = oracle.evaluate(oracle.trusted(lambda rows, valid: (rows, valid)), data, family, capacity=capacity)
    blocks, valids = np.asarray(blocks), np.asarray(valids)
    assert blocks.shape == (len(family), capacity)
    for i in range(len(family)):
        kept = family.subset(i)
        np.testing.assert_array_equal(blocks[i, :len(kept)], np.sort(data[kept]))
        np.testing.assert_array_equal(blocks[i, len(kept):], 0.0)
        np.testing.assert_array_equal(valids[i], np.arange(capacity) < len(kept))
    # The same subset inside a dataset with one more row: the same block.
    bigger = np.append(data, 1000.0)
    index = family.subset(len(family) - 1)
    one = subsets.from_indices(n + 1, [index])
    block, _ = oracle.evaluate(oracle.trusted(lambda rows, valid: (rows, valid)), bigger, one, capacity=capacity)
    np.testing.assert_array_equal(np.asarray(block)[0], blocks[len(family) - 1])


def test_capacity_below_the_largest_subset_is_refused():
    with pytest.raises(ValueError, match="capacity must be at least the family's largest subset"):
        oracle.evaluate(oracle.trusted(lambda rows, valid: rows.sum()), np.arange(10.0), subsets.removals(10, 1),
                        capacity=9)


def test_oracle_never_learns_n_or_positions():
    # Capacity is the largest subset, not n; and permuting the dataset changes nothing the oracle sees.
    rng = np.random.default_rng(1)
    data = rng.standard_normal((50, 2))
    family = subsets.partition(50, 10)
    seen_shapes = []

    @oracle.trusted
    def spy(rows, valid):
        seen_shapes.append(rows.shape)
        return rows

    blocks = np.asarray(oracle.evaluate(spy, data, family))
    assert seen_shapes and all(shape == (5, 2) for shape in seen_shapes)
    perm = rng.permutation(50)
    # The same subsets of the permuted data (same rows, different positions).
    moved = subsets.from_indices(50, np.argsort(perm)[np.stack([family.subset(i) for i in range(10)])])
    blocks_moved = np.asarray(oracle.evaluate(spy, data[perm], moved))
    np.testing.assert_array_equal(blocks, blocks_moved)
    # Rows arrive in lexicographic order.
    for block in blocks:
        assert [tuple(r) for r in block] == sorted(tuple(r) for r in block)


def test_values_match_a_plain_numpy_loop():
    rng = np.random.default_rng(2)
    data = rng.standard_normal(40)
    for family in _families(40).values():
        for fn, ref in [(oracle.median, np.median), (oracle.mean, np.mean), (oracle.quantile(0.25),
                        lambda a: np.quantile(a, 0.25)), (oracle.variance, np.var)]:
            values = np.asarray(oracle.evaluate(fn, data, family))
            expected = np.array([ref(data[family.subset(i)]) for i in range(len(family))])
            np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(_FAMILIES))
def test_results_do_not_depend_on_chunk_size(name):
    data = np.random.default_rng(3).standard_normal(25)
    family = _FAMILIES[name](25)
    reference = np.asarray(oracle.evaluate(oracle.trimmed_mean(0.1), data, family))
    for chunk in (1, 7, len(family), 10**6):
        np.testing.assert_array_equal(
            np.asarray(oracle.evaluate(oracle.trimmed_mean(0.1), data, family, chunk_size=chunk)), reference)


def _run(args, env=None, timeout=240):
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    base.update(env or {})
    return subprocess.run([sys.executable, *args], env=base, capture_output=True, text=True, timeout=timeout)


def _on_devices(worker, devices, tmp_path):
    """Runs a worker script on ``devices`` simulated CPU devices; its JSON output."""
    path = tmp_path / f"{worker}-{devices}.json"
    proc = _run([str(HERE / f"{worker}.py"), str(path)],
                env={"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(path.read_text())


def test_results_do_not_depend_on_device_count(tmp_path):
    outs = {devices: _on_devices("_device_count_worker", devices, tmp_path) for devices in (1, 4)}
    assert outs[1]["device_count"] == 1 and outs[4]["device_count"] == 4
    assert outs[1]["values"] == outs[4]["values"]
    # And within one run, chunk sizes agree.
    values = outs[4]["values"]
    for name in ("removals", "random", "partition"):
        assert values[f"{name}-1"] == values[f"{name}-7"] == values[f"{name}-None"]


def test_four_devices_split_the_work_instead_of_repeating_it(tmp_path):
    # The property is the work each device does, read from the program it runs (the compiled per-device
    # loop's trip count, times the chunks) and from the process's CPU time; equal values alone would
    # also hold if every device evaluated every subset (the engine before shard_map did, at 3.8-4.1x
    # the CPU time).
    one, four = (_on_devices("_work_split_worker", devices, tmp_path) for devices in (1, 4))
    assert one["device_count"] == 1 and four["device_count"] == 4
    assert one["values"] == four["values"]
    k = one["num_subsets"]
    for run, devices in ((one, 1), (four, 4)):
        (trips,) = run["trip_counts"]  # one oracle loop per device program
        per_device_work = run["num_chunks"] * trips * run["micro_batch"]
        share = -(-k // devices)
        assert share <= per_device_work < share + run["per_device"], (devices, per_device_work, share)
    assert four["cpu_seconds"] < 1.5 * one["cpu_seconds"], (four["cpu_seconds"], one["cpu_seconds"])
    # The power set splits too: each of the 4 devices' programs covers a quarter of the 2**18 masks.
    power = four["powerset"]
    assert power["subsets"] // 4 <= power["per_device_work"] < power["subsets"] // 4 + power["chunk"], power


def test_two_processes_with_jax_distributed_match_a_single_process(tmp_path):
    address = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    procs = [subprocess.Popen([sys.executable, str(HERE / "_distributed_worker.py"), address, "2", str(pid),
                               str(tmp_path / f"p{pid}.json")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for pid in range(2)]
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err[-3000:]
    results = [json.loads((tmp_path / f"p{pid}.json").read_text()) for pid in range(2)]
    assert [r["process_index"] for r in results] == [0, 1]
    assert all(r["device_count"] == 2 and r["local_device_count"] == 1 for r in results)
    # Each process prepares only its own device's share of a materialised family (its half of the 301
    # subsets, in whole micro-batches; preparing everything would be twice that) ...
    for r in results:
        assert r["prepared_random_subsets"] == r["random_share"], (r["prepared_random_subsets"], r["random_share"])
    # ... and its device runs only its share of a removal family (Q(300, 2) = 45,151 subsets).
    for r in results:
        (trips,) = r["trip_counts"]
        work = r["num_chunks"] * trips * r["micro_batch"]
        assert 22576 <= work < 22576 + r["per_device"], work
    data = np.random.default_rng(7).standard_normal(23)
    for name, family in [("removals", subsets.removals(23, 2)),
                         ("random", subsets.random_subsets(jax.random.key(5), 23, 17, 301))]:
        single = np.asarray(oracle.evaluate(oracle.median, data, family)).tolist()
        assert results[0]["values"][name] == single
        assert results[1]["values"][name] == single


def test_explicit_mesh_over_one_device_gives_the_same_values():
    data = np.random.default_rng(4).standard_normal(20)
    family = subsets.removals(20, 2)
    mesh = oracle.default_mesh()
    np.testing.assert_array_equal(np.asarray(oracle.evaluate(oracle.median, data, family, mesh=mesh)),
                                  np.asarray(oracle.evaluate(oracle.median, data, family)))


def test_pytree_and_vector_outputs():
    data = np.random.default_rng(5).standard_normal((30, 3))
    family = subsets.partition(30, 3)
    out = oracle.evaluate(oracle.trusted(lambda rows, valid: {"s": oracle.sum_(rows, valid),
                                                              "c": oracle.count(rows, valid)}), data, family)
    assert out["s"].shape == (3, 3) and out["c"].shape == (3,)
    np.testing.assert_allclose(np.asarray(out["s"]), data.reshape(3, 10, 3).sum(1), rtol=1e-13)


def test_empty_subset_gives_nan_for_the_mean_and_zero_count():
    family = subsets.removals(3, 3)  # the last subset is empty
    values = np.asarray(oracle.evaluate(oracle.mean, np.array([1.0, 2.0, 3.0]), family))
    assert np.isnan(values[-1]) and np.isfinite(values[:-1]).all()
    counts = np.asarray(oracle.evaluate(oracle.count, np.array([1.0, 2.0, 3.0]), family))
    assert counts[-1] == 0 and counts[0] == 3


def test_library_regressions_match_reference_fits():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((300, 2))
    y_lin = 0.5 + x @ np.array([2.0, -1.0]) + 0.1 * rng.standard_normal(300)
    family = subsets.partition(300, 3)
    ols = np.asarray(oracle.evaluate(oracle.least_squares(1), np.column_stack([x, y_lin]), family))
    for i in range(3):
        rows = family.subset(i)
        design = np.column_stack([np.ones(len(rows)), x[rows]])
        np.testing.assert_allclose(ols[i], np.linalg.lstsq(design, y_lin[rows], rcond=None)[0][1], rtol=1e-10)
    labels = (x @ np.array([1.5, -1.0]) + rng.logistic(size=300) > 0).astype(float)
    fits = np.asarray(oracle.evaluate(oracle.logistic_regression(1, steps=2000, learning_rate=0.05, l2=1e-3),
                                      np.column_stack([x, labels]), family))
    import scipy.optimize

    for i in range(3):
        rows = family.subset(i)
        design = np.column_stack([np.ones(len(rows)), x[rows]])

        def loss(beta):
            m = design @ beta
            return np.mean(np.logaddexp(0, m) - labels[rows] * m) + 0.5e-3 * beta @ beta

        best = scipy.optimize.minimize(loss, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
        np.testing.assert_allclose(fits[i], best[1], atol=1e-4)


@pytest.mark.parametrize("data,family,kwargs,match", [
    (np.array([1.0, np.nan, 3.0]), subsets.removals(3, 1), {}, "non-finite"),
    (np.array([1.0, np.inf, 3.0]), subsets.removals(3, 1), {}, "non-finite"),
    (np.zeros((0,)), subsets.removals(1, 0), {}, "at least 1 row"),
    (np.array(["a", "b"]), subsets.removals(2, 1), {}, "real numbers"),
    (np.zeros(4), subsets.removals(3, 1), {}, "n = 3 rows but data has 4"),
    (np.zeros(3), subsets.removals(3, 1), {"chunk_size": 0}, "chunk_size must be >= 1"),
    (np.zeros(30), subsets.removals(30, 3), {"max_queries": 100}, "more than max_queries=100"),
    (np.zeros(3), "not a family", {}, "SubsetFamily"),
])
def test_bad_input_is_a_clear_error(data, family, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        oracle.evaluate(oracle.mean, data, family, **kwargs)


def test_oracle_outputs_are_jit_compatible_values():
    # evaluate returns JAX arrays usable by mechanisms directly.
    values = oracle.evaluate(oracle.mean, np.arange(10.0), subsets.partition(10, 2))
    assert isinstance(values, jax.Array) and values.dtype == jnp.float64
