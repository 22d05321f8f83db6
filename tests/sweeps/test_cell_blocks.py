"""Cells that share their datasets run as one block; diagnostics, exact quantities, untraceable mechanisms,
infeasible cells."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import datasets, sweeps
from gpuprivacy.mechanisms import instance_optimal
from gpuprivacy.sweeps import _trials
from gpuprivacy.sweeps._mechanisms import builtin_sweepables, make_sweepable

PARAMS = dict(lower=-5.0, upper=5.0, clip=True)


def _spec(n=31, law="normal"):
    return sweeps.DataSpec(law, n, {}, distribution=datasets.distribution(law))


def test_a_block_gives_each_cell_what_it_gets_alone():
    """Three epsilons of one mechanism (one program batched over the cells) and another mechanism, on shared
    datasets: every cell's values equal the same cell run alone with the same keys."""
    mechanisms = builtin_sweepables()
    data_key = jax.random.key(7)
    requests = [_trials.CellRequest(mechanisms["piecewise-laplace-median"], dict(epsilon=e, **PARAMS),
                                    jax.random.key(100 + i)) for i, e in enumerate((0.5, 1.0, 2.0))]
    requests.append(_trials.CellRequest(mechanisms["exponential-mechanism-median"], dict(epsilon=1.0, **PARAMS),
                                        jax.random.key(200)))
    block = _trials.run_cells(requests, _spec(), 20, data_key=data_key, chunk=8)
    for request, got in zip(requests, block):
        alone = _trials.run_cell(request.mechanism, request.params, _spec(), request.cell_key, 20,
                                 data_key=data_key, chunk=8)
        np.testing.assert_allclose(got.values, alone.values, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(got.targets, alone.targets)
        assert got.guarantee == alone.guarantee
    # Common random numbers: every cell of the block met the same datasets.
    for other in block[1:]:
        np.testing.assert_array_equal(block[0].targets, other.targets)
    assert len(set(block[0].targets.tolist())) == 20
    # ... and the noise is each cell's own.
    assert not np.array_equal(block[0].values, block[1].values)


@pytest.fixture
def cells_batched(monkeypatch):
    """Programs batched over the cells of a group, as on an accelerator, whatever the platform."""
    monkeypatch.setattr(_trials, "CELL_BATCHING_PLATFORMS", ("cpu", "gpu", "tpu"))


@pytest.mark.parametrize("batched", [False, True])
def test_a_block_gives_each_cell_what_it_gets_alone_batched_over_the_cells_or_not(monkeypatch, batched):
    platforms = ("cpu", "gpu", "tpu") if batched else ("gpu", "tpu")
    monkeypatch.setattr(_trials, "CELL_BATCHING_PLATFORMS", platforms)
    mech = builtin_sweepables()["piecewise-laplace-median"]
    requests = [_trials.CellRequest(mech, dict(epsilon=e, **PARAMS), jax.random.key(i))
                for i, e in enumerate((0.25, 1.0, 4.0))]
    _trials._PROGRAMS.clear()
    block = _trials.run_cells(requests, _spec(n=37), 16, data_key=jax.random.key(1), chunk=16)
    (program,) = [p for k, p in _trials._PROGRAMS.items() if k[0] == "mechanism"]  # one program either way
    assert ("[3,16]" in program.as_text()) == batched  # batched over the 3 cells, or each cell calls it
    for request, got in zip(requests, block):
        alone = _trials.run_cell(request.mechanism, request.params, _spec(n=37), request.cell_key, 16,
                                 data_key=jax.random.key(1), chunk=16)
        np.testing.assert_array_equal(got.values, alone.values)


def _grid_program_text() -> str:
    """The text of the one mechanism program a 5-point epsilon grid of the piecewise-Laplace median compiles."""
    mech = builtin_sweepables()["piecewise-laplace-median"]
    requests = [_trials.CellRequest(mech, dict(epsilon=e, **PARAMS), jax.random.key(i))
                for i, e in enumerate((0.25, 0.5, 1.0, 2.0, 4.0))]
    _trials._PROGRAMS.clear()
    _trials.run_cells(requests, _spec(n=37), 16, data_key=jax.random.key(1), chunk=16)
    (program,) = [p for k, p in _trials._PROGRAMS.items() if k[0] == "mechanism"]
    return program.as_text()


def test_the_cpu_runs_each_cell_of_a_grid_through_one_shared_program():
    """The default: on a CPU, no program is batched over the cells (they compile faster), and an epsilon grid
    still compiles one program."""
    if jax.default_backend() != "cpu":
        pytest.skip("the CPU's default")
    text = _grid_program_text()
    assert "[5,16]" not in text and "f64[16,37]" in text
    # ... and a cell's trials run as the trials alone, not under a vmap over one cell, which XLA:CPU compiled in
    # about twice the time: the piecewise sampler's gathers are over [16, ...] arrays, not [1, 16, ...] (they
    # were before, 9 of them).
    gathers = [line for line in text.splitlines() if " gather(" in line]
    assert gathers and not [line for line in gathers if "[1,16" in line], gathers


def test_data_only_work_runs_once_for_a_group_of_cells(cells_batched):
    """The group program sorts each trial's data once for all its cells: no sort in it is batched over the
    cells (a [G, chunk, n] sort would redo the work G times)."""
    text = _grid_program_text()
    assert "[5,16]" in text  # the program is batched over the 5 cells ...
    assert "f64[5,16,37]" not in text and "f64[16,37]" in text  # ... but the data are not


def test_traced_parameters_equal_in_every_cell_are_not_batched_over_the_group(cells_batched):
    """The exponential-mechanism median takes its domain traced as well as epsilon. An epsilon grid with one
    domain passes the domain once: the data clipped to it are not batched over the cells. Power: a grid that
    also varies the domain batches them ([G, chunk, n]), as it must. Each cell's values are its values alone."""
    mech = builtin_sweepables()["exponential-mechanism-median"]
    assert set(_trials.traceable_parameters(mech, dict(epsilon=1.0, **PARAMS), _spec(n=37),
                                            jnp.zeros(37))) == {"epsilon", "lower", "upper"}
    epsilons = (0.25, 0.5, 1.0, 2.0, 4.0)
    for lowers, batched in [((-5.0,) * 5, False), ((-5.0, -6.0, -5.0, -7.0, -5.0), True)]:
        requests = [_trials.CellRequest(mech, dict(PARAMS, epsilon=e, lower=lo), jax.random.key(i))
                    for i, (e, lo) in enumerate(zip(epsilons, lowers))]
        _trials._PROGRAMS.clear()
        block = _trials.run_cells(requests, _spec(n=37), 16, data_key=jax.random.key(1), chunk=16)
        (program,) = [p for k, p in _trials._PROGRAMS.items() if k[0] == "mechanism"]
        text = program.as_text()
        assert "[5,16]" in text and ("f64[5,16,37]" in text) == batched
        for request, got in zip(requests, block):
            alone = _trials.run_cell(request.mechanism, request.params, _spec(n=37), request.cell_key, 16,
                                     data_key=jax.random.key(1), chunk=16)
            np.testing.assert_array_equal(got.values, alone.values)


def test_release_diagnostics_and_exact_quantities_per_trial():
    mech = builtin_sweepables()["private-median"]
    params = dict(epsilon=1.0, min_density=0.15, radius=1.0, median_bound=10.0)
    out = _trials.run_cell(mech, params, _spec(n=301), jax.random.key(3), 12)
    assert set(out.info) >= {"nonprivate_route", "nonprivate_median"} and out.info["nonprivate_route"].shape == (12,)

    def exact(x, p):
        return {"gs_over_eps": (p["upper"] - p["lower"]) / p["epsilon"], "mean": jnp.mean(x)}

    laplace = builtin_sweepables()["laplace-median"]._replace(exact=exact, name="laplace-median-exact-test")
    out = _trials.run_cell(laplace, dict(epsilon=2.0, **PARAMS), _spec(), jax.random.key(4), 10, exact=True)
    np.testing.assert_allclose(out.exact["gs_over_eps"], 5.0)
    assert out.exact["mean"].shape == (10,) and len(set(out.exact["mean"].tolist())) == 10


def test_a_mechanism_that_cannot_be_traced_runs_once_per_trial_with_the_same_keys():
    calls = []

    def host_median(key, data, *, epsilon: float, lower: float, upper: float, clip: bool = False):
        """A mechanism with host-side code (np.asarray on its data: it cannot be traced)."""
        calls.append(float(np.asarray(data)[0]))
        return instance_optimal.laplace_median(key, data, epsilon=epsilon, lower=lower, upper=upper, clip=clip)

    eager = make_sweepable(host_median, target="median", batched=False)
    traced = builtin_sweepables()["laplace-median"]
    params = dict(epsilon=1.0, **PARAMS)
    a = _trials.run_cell(eager, params, _spec(), jax.random.key(5), 9, chunk=8)
    b = _trials.run_cell(traced, params, _spec(), jax.random.key(5), 9, chunk=8)
    assert len(calls) == 16  # two chunks of 8 (the last one padded), one call per trial
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.targets, b.targets)
    assert a.guarantee == b.guarantee


def test_an_infeasible_cell_is_reported_in_its_row_and_the_sweep_goes_on(tmp_path):
    def capped_median(key, data, *, epsilon: float, lower: float, upper: float, clip: bool = False):
        """PLM median that refuses data sets above 40 records (like a plan beyond a budget)."""
        if data.shape[-1] > 40:
            raise ValueError(f"n = {data.shape[-1]} exceeds this mechanism's budget of 40 records.")
        return instance_optimal.piecewise_laplace_median(key, data, epsilon=epsilon, lower=lower, upper=upper,
                                                         clip=clip)

    name = sweeps.register_mechanism(capped_median, target="median", name="capped-median-test", replace=True)
    config = {"name": "infeasible-test", "seed": 2, "trials": 8,
              "mechanism": [{"name": name, "epsilon": 1.0, **PARAMS},
                            {"name": "laplace-median", "epsilon": 1.0, **PARAMS}],
              "dataset": {"name": "normal", "n": [21, 61]}}
    summary = sweeps.run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    assert summary.num_computed == 4 and summary.num_infeasible == 1
    by = {(r["mechanism"], r["dataset_params"]["n"]): r for r in summary.rows}
    bad = by[(name, 61)]
    assert bad["status"] == "infeasible" and "exceeds this mechanism's budget" in bad["error"]
    assert bad["metrics"] == {}
    for key in ((name, 21), ("laplace-median", 21), ("laplace-median", 61)):
        assert by[key]["status"] == "ok" and by[key]["metrics"]["mae"] > 0
    # Resuming keeps the infeasible row (it is the cell's result), computing nothing again.
    again = sweeps.run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    assert again.num_computed == 0 and again.num_infeasible == 1
    pytest.importorskip("matplotlib")
    written = sweeps.study_report(tmp_path / "r.jsonl", out_dir=tmp_path / "report")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "infeasible: ValueError: n = 61 exceeds" in report and len(written["files"]) == 3


def test_the_program_cache_is_bounded_least_recently_used_first(monkeypatch):
    monkeypatch.setattr(_trials._PROGRAMS, "maxsize", 2)
    _trials._PROGRAMS.clear()
    mech = builtin_sweepables()["laplace-median"]
    for n in (9, 10, 11):
        _trials.run_cell(mech, dict(epsilon=1.0, **PARAMS), _spec(n=n), jax.random.key(0), 8)
    assert len(_trials._PROGRAMS) == 2
    assert [k[0] for k in _trials._PROGRAMS] == ["draw", "mechanism"]  # the last cell's two programs
    assert all(11 in k for k in _trials._PROGRAMS)


@pytest.mark.parametrize("n", [10, 11])
def test_targets_are_the_order_statistics_the_mechanisms_estimate(n):
    """The median target is the left median at even n (not jnp.median's average), and the quantile's rank is the
    mechanisms' own (0.9 * 10 = 9.000000000000002 must give rank 9)."""
    from gpuprivacy.mechanisms._instance_optimal._dataset_checks import median_rank, quantile_rank
    from gpuprivacy.sweeps._mechanisms import TARGETS

    x = jnp.asarray(np.random.default_rng(n).permutation(np.arange(1.0, n + 1)))
    assert float(TARGETS["median"].statistic(x, {})) == median_rank(n)
    assert float(TARGETS["median"].statistic(x, {"median_index": "floor"})) == n // 2
    assert float(TARGETS["quantile"].statistic(x, {"quantile": 0.9})) == quantile_rank(0.9, n)


def test_a_mechanism_with_its_own_batched_driver_gets_the_same_keys_and_data():
    """The optimal median runs through its host-routed driver; trial i is still private_median called with the
    trial's mechanism key on the trial's data."""
    from gpuprivacy.mechanisms import median

    mech = builtin_sweepables()["private-median"]
    params = dict(epsilon=1.0, min_density=0.15, radius=1.0, median_bound=10.0)
    spec, key = _spec(n=101), jax.random.key(9)
    out = _trials.run_cell(mech, params, spec, key, 6)
    for i, trial_key in enumerate(jax.random.split(key, 6)):
        data_key, mechanism_key = jax.random.split(trial_key)
        x = spec.distribution.draw(data_key, (spec.n,))
        assert float(out.values[i]) == float(median.private_median(mechanism_key, x, **params).value)


def first_record(key, data, *, epsilon: float):
    """Order-dependent on purpose: the first record plus noise."""
    return instance_optimal.laplace_median(key, data[:1], epsilon=epsilon, lower=-5.0, upper=5.0, clip=True)


ORDER_INVARIANT_PARAMS = {
    "private-median": dict(epsilon=1.0, min_density=0.15, radius=1.0, median_bound=10.0),
    "piecewise-laplace-quantile": dict(quantile=0.3, epsilon=1.0, **PARAMS),
    "inverse-sensitivity-quantile": dict(quantile=0.3, epsilon=1.0, **PARAMS),
}


def _same_release_on_sorted_data(mech, params, seeds=3, sizes=(9, 64, 301)):
    rng = np.random.default_rng(11)
    for n in sizes:
        x = np.concatenate([np.clip(rng.standard_cauchy(n - 4), -4.0, 4.0), [0.0, -0.0, 1.0, 1.0]])
        rng.shuffle(x)
        for seed in range(seeds):
            key = jax.random.key(seed)
            a = mech.release(key, jnp.asarray(x), **params).value
            b = mech.release(key, jnp.sort(jnp.asarray(x)), **params).value
            if np.asarray(a).tobytes() != np.asarray(b).tobytes():
                return False
    return True


def test_mechanisms_marked_order_invariant_release_the_same_on_sorted_data():
    """The engine hands sorted data to the mechanisms marked order_invariant: each must give, key for key,
    bitwise the release it gives on the data as drawn. Power: an order-dependent release fails the check."""
    marked = {name: m for name, m in builtin_sweepables().items() if m.order_invariant}
    assert {"piecewise-laplace-median", "smooth-sensitivity-median", "exponential-mechanism-median",
            "inverse-sensitivity-median", "private-median"} <= set(marked)
    for name, mech in marked.items():
        params = ORDER_INVARIANT_PARAMS.get(name, dict(epsilon=1.0, **PARAMS))
        sizes = (301, 1001) if name == "private-median" else (9, 64, 301)  # its typical set needs n in the 100s
        assert _same_release_on_sorted_data(mech, params, sizes=sizes), name

    assert not _same_release_on_sorted_data(make_sweepable(first_record, target="median"), dict(epsilon=1.0))


def test_a_block_sorts_once_for_order_invariant_mechanisms_only():
    """An order-invariant mechanism and an order-dependent one share a block: the block's draw program sorts
    the data once (for the first), the second still gets the data as drawn; each equals its cell alone."""

    dependent = make_sweepable(first_record, target="median", name="first-record-test")
    invariant = builtin_sweepables()["piecewise-laplace-median"]
    assert invariant.order_invariant and not dependent.order_invariant
    data_key = jax.random.key(3)
    requests = [_trials.CellRequest(invariant, dict(epsilon=1.0, **PARAMS), jax.random.key(1)),
                _trials.CellRequest(dependent, dict(epsilon=1.0), jax.random.key(2))]
    _trials._PROGRAMS.clear()
    block = _trials.run_cells(requests, _spec(n=33), 12, data_key=data_key, chunk=12)
    (draw_key,) = [k for k in _trials._PROGRAMS if k[0] == "draw"]
    assert draw_key[6] is True  # the draw program also returns the sorted data
    for request, got in zip(requests, block):
        alone = _trials.run_cell(request.mechanism, request.params, _spec(n=33), request.cell_key, 12,
                                 data_key=data_key, chunk=12)
        np.testing.assert_array_equal(got.values, alone.values)
    # The order-dependent cell saw the data as drawn: its first record is not the sample minimum.
    x = jax.vmap(lambda i: datasets.distribution("normal").draw(jax.random.fold_in(data_key, i), (33,)))(
        jnp.arange(12, dtype=jnp.uint32))
    assert not np.allclose(np.asarray(x[:, 0]), np.asarray(x.min(axis=1)))
