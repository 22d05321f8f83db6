"""reproduce("tzamos2020-private-median", quick=True): files, plots, and numbers checked against the paper
(Tzamos, Vlatakis-Gkaragkounis & Zadik 2020) and docs/errata.md; the error rates come from the study engine."""

import csv
import importlib
import json
import math
import pathlib

import numpy as np
import pytest

from gpuprivacy import datasets
from gpuprivacy.mechanisms import median
from gpuprivacy.reproduce import _private_median as study
from gpuprivacy.reproduce import list_studies, reproduce
from gpuprivacy.sweeps import (CellRequest, CellTrials, DataSpec, builtin_sweepables, cell_key, cell_metrics, data_key,
                               expand_sweep, list_metrics, run_cells, run_sweep)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = pathlib.Path(__file__).resolve().parents[2]
ROUTE_METRICS = (study.FAST_PATH_METRIC, study.OVERFLOW_METRIC)


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    (folder,) = reproduce("tzamos2020-private-median", quick=True, out_dir=tmp_path_factory.mktemp("reproduce"), progress=False)
    return folder


@pytest.fixture(scope="module")
def results(study_dir):
    return json.loads((study_dir / "results.json").read_text(encoding="utf-8"))["results"]


def test_study_is_registered():
    assert "tzamos2020-private-median" in {s.name for s in list_studies()}


def test_folder_has_every_file(study_dir):
    names = {p.name for p in study_dir.iterdir()}
    assert {"report.md", "results.json", "rates.csv", "baselines.csv", "metadata.json", "baselines.png",
            "counterexamples.png", "rates_eps1.0.png", "rates_quick.jsonl"} <= names
    for name in ("baselines.png", "counterexamples.png", "rates_eps1.0.png"):
        data = (study_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_counterexamples_match_spec_3_2(results):
    ties, no_ties = results["counterexamples"]
    assert ties["both_in_H"] and no_ties["both_in_H"]
    assert (ties["d_hamming"], no_ties["d_hamming"]) == (1, 35)
    assert ties["restricted_log_ratio"] == pytest.approx(6.0, abs=1e-9)
    assert no_ties["restricted_log_ratio"] == pytest.approx(48.0, abs=1e-9)
    assert ties["restricted_allowance"] == 0.5 and no_ties["restricted_allowance"] == 17.5
    assert ties["general_log_ratio"] == pytest.approx(0.5, abs=1e-9)
    assert no_ties["general_log_ratio"] == pytest.approx(9.0, abs=1e-9)
    assert ties["tv_general_vs_restricted"] == pytest.approx(0.767, abs=2e-3)
    assert no_ties["tv_general_vs_restricted"] == pytest.approx(0.883, abs=2e-3)
    assert results["checks"]["shortcut_violates"] and results["checks"]["general_holds"]


def test_rates_shrink_with_n_and_routes_are_reported(results):
    rates = results["rates"]
    for dist in {r["distribution"] for r in rates}:
        q = [r["error_q90"] for r in sorted((r for r in rates if r["distribution"] == dist), key=lambda r: r["n"])]
        assert q[-1] < q[0] / 10                      # n grows 100x: the error falls by well over 10x
    assert all(0 <= r["fast_path_rate"] <= 1 and 0 <= r["overflow_rate"] <= 1 for r in rates)
    assert np.mean([r["fast_path_rate"] for r in rates]) > 0.9   # typical data take the certified path


def test_csv_equals_json(study_dir, results):
    with (study_dir / "rates.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(results["rates"])
    for row, ref in zip(rows, results["rates"]):
        assert row["distribution"] == ref["distribution"] and float(row["error_q90"]) == pytest.approx(ref["error_q90"])


def test_baselines_and_privacy(results):
    rows = results["baselines"]["rows"]
    mechanisms = {r["mechanism"] for r in rows}
    assert {"private_median (3.6)", "nonprivate_median", "exponential_mechanism_median",
            "UNSAFE flattened-Laplace shortcut"} <= mechanisms
    assert all(not r["private"] for r in rows if r["mechanism"].startswith(("UNSAFE", "nonprivate")))
    assert results["privacy"]["max_ratio_over_eps_d"] <= 1 + 1e-9
    assert results["privacy"]["max_ratio_over_eps_d"] > 0.2


def test_constants_match_spec(results):
    constants = results["constants"]
    assert constants["theory_constant"] == pytest.approx(104.312203682800634, rel=1e-15)
    assert constants["restricted"][0]["Zhat"] == pytest.approx(0.288, rel=1e-12)
    assert constants["restricted"][0]["tail_0_1"] == pytest.approx(0.4993517886, abs=1e-9)
    assert constants["lower_bounds"][0]["local"] == pytest.approx(45.0921, abs=1e-4)
    assert constants["lower_bounds"][1]["range"] == pytest.approx(227.637, abs=1e-3)


def test_report_and_metadata(study_dir):
    report = (study_dir / "report.md").read_text(encoding="utf-8")
    assert "Case-A shortcut is not private" in report and "UNSAFE" in report and "![](rates_eps1.0.png)" in report
    meta = json.loads((study_dir / "metadata.json").read_text(encoding="utf-8"))
    assert meta["study"] == "tzamos2020-private-median" and meta["quick"] is True and meta["seed"] == 3


def _engine_cell(cell):
    """The per-trial results of a sweep cell, run again by the engine from the cell's own keys."""
    params = dict(cell.dataset_params)
    n, fresh = params.pop("n"), params.pop("fresh")
    spec = DataSpec(cell.dataset, n, params, distribution=datasets.distribution(cell.dataset), fresh=fresh)
    request = CellRequest(builtin_sweepables()[cell.mechanism], dict(cell.mechanism_params),
                          cell_key(cell.seed, cell.cell_id))
    (trials,) = run_cells([request], spec, cell.num_trials, data_key=data_key(cell.seed, cell))
    return trials


def test_rates_rows_are_study_engine_cells(study_dir, results, tmp_path):
    config = json.loads((study_dir / "results.json").read_text(encoding="utf-8"))["config"]
    rates = results["rates"]
    assert all(r["trials"] == config["trials"] for r in rates)     # quick mode: no max_trial_elements cap
    # Every rates row is one cell of the study's sweep, whose rows stay in the study folder.
    (sweep,) = study.rates_sweep_configs(config)
    rows = [json.loads(line) for line in (study_dir / "rates_quick.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["cell_id"] for r in rows} == {c.cell_id for c in expand_sweep(sweep)} and len(rows) == len(rates)
    # A rerun of the first sample size gives the same numbers: the keys depend on the seed and the cell only.
    again = study.part_rates(dict(config, ns=config["ns"][:1]), tmp_path, progress=False)
    timing = ("seconds_per_trial", "includes_compilation")
    strip = [{k: v for k, v in r.items() if k not in timing} for r in again]
    assert strip == [{k: v for k, v in r.items() if k not in timing} for r in rates if r["n"] == config["ns"][0]]
    # The row of the lower-bound mixture (the one with non-certified trials) is the engine's cell: its
    # fast-path rate is that of the releases' own routes, its quantiles those of the released values.
    n = config["ns"][0]
    (cell,) = [c for c in expand_sweep(sweep) if c.dataset == "lower-bound-mixture" and c.dataset_params["n"] == n]
    trials = _engine_cell(cell)
    row = next(r for r in rates if r["n"] == n and r["distribution"] == "lower_bound_mixture")
    assert row["fast_path_rate"] == np.mean(trials.info["nonprivate_route"] == 0) < 1
    assert trials.population == 0.0 and np.all(trials.valid)
    assert row["error_q90"] == np.quantile(np.abs(trials.values), 1 - config["beta"])
    assert row["error_q50"] == np.quantile(np.abs(trials.values), 0.5)


def test_rates_toml_is_the_full_study_grid():
    """experiments/configs/private_median_rates.toml is the full mode's rates part: the same cells (mechanism,
    parameters, laws, n, metrics); the study caps trials at large n, the config cannot (one trials for all)."""
    full = study.study_config(quick=False)
    from_toml = expand_sweep(ROOT / "experiments" / "configs" / "private_median_rates.toml")
    sweeps = study.rates_sweep_configs(full)
    from_study = [cell for sweep in sweeps for cell in expand_sweep(sweep)]

    def without_trials(cell):
        return json.dumps(cell._replace(cell_id="", num_trials=0).canonical(), sort_keys=True)
    assert sorted(map(without_trials, from_toml)) == sorted(map(without_trials, from_study))
    assert len(from_toml) == len(full["ns"]) * len(full["epsilons"]) * len(full["distributions"])
    assert {cell.num_trials for cell in from_toml} == {full["trials"]}
    assert all(cell.num_trials == study._trials_at(full, cell.dataset_params["n"]) for cell in from_study)
    # Where the study runs every trial, the very cells (ids: seed, parameters, trials, metrics) of the config.
    assert sweeps[0]["trials"] == full["trials"] and sweeps[0]["name"] == "private_median_rates"
    assert {c.cell_id for c in expand_sweep(sweeps[0])} < {c.cell_id for c in from_toml}
    assert {c.dataset_params["n"] for c in from_study if c.num_trials < full["trials"]} == {300_000, 1_000_000}


def test_route_metrics_are_registered_at_import_and_again():
    assert set(ROUTE_METRICS) <= set(list_metrics())
    assert {"population_abs_error_q50", "population_abs_error_q90", "population_abs_error_q99"} <= set(list_metrics())
    importlib.reload(importlib.import_module("gpuprivacy.sweeps._median_routes"))  # a second registration: no error
    assert set(ROUTE_METRICS) <= set(list_metrics())


def test_route_metrics_and_population_quantiles_by_hand():
    fast, full, overflow = (median.ROUTE_NAMES.index(r) for r in ("certified-fast-path", "full", "full-overflow"))
    values = np.array([0.3, -1.2, 2.5, 0.1, -0.4, 7.0, 0.05, -0.6])
    valid = np.array([True, True, True, True, True, False, True, True])
    routes = np.array([fast, fast, full, overflow, fast, overflow, fast, full])
    trials = CellTrials(values=values, targets=np.zeros(8), valid=valid, guarantee=None, population=0.25,
                        wall_s=0.8, compile_s=0.0, chunk=8, devices=1, info={"nonprivate_route": routes})
    m = cell_metrics(trials, {}, target_kind="real", extra=ROUTE_METRICS)
    assert m[study.FAST_PATH_METRIC] == 0.5 and m[study.OVERFLOW_METRIC] == 0.25   # over every trial
    expected = np.quantile(np.abs(values[valid] - 0.25), [0.5, 0.9, 0.99])           # over the released ones
    assert [m["population_abs_error_q50"], m["population_abs_error_q90"], m["population_abs_error_q99"]] == \
        list(expected)
    # Without a population value the quantiles are NaN (null in a row); without routes, so are the rates.
    m = cell_metrics(trials._replace(population=None, info={}), {}, target_kind="real", extra=ROUTE_METRICS)
    assert all(math.isnan(m[k]) for k in ("population_abs_error_q50", "population_abs_error_q99", *ROUTE_METRICS))
    assert m["abs_error_q50"] == np.quantile(np.abs(values[valid]), 0.5)          # the existing metrics unchanged


def test_route_metrics_and_population_quantiles_on_a_tiny_sweep(tmp_path):
    config = {"name": "pm-tiny", "seed": 11, "trials": 200, "metrics": list(ROUTE_METRICS),
              "mechanism": [{"name": "private-median", "epsilon": 1.0, "min_density": 0.15, "radius": 1.0,
                             "median_bound": 10.0},
                            {"name": "laplace-median", "epsilon": 1.0, "lower": -10.0, "upper": 10.0, "clip": True}],
              "dataset": {"name": "lower-bound-mixture", "n": 100}}
    rows = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False).rows
    for cell, row in zip(expand_sweep(config), rows, strict=True):
        trials, m = _engine_cell(cell), row["metrics"]
        assert row["population_value"] == trials.population == 0.0
        errors = np.abs(trials.values[trials.valid] - trials.population)
        for q in (50, 90, 99):
            assert m[f"population_abs_error_q{q}"] == np.quantile(errors, q / 100)
        if cell.mechanism == "private-median":
            routes = trials.info["nonprivate_route"]
            assert m[study.FAST_PATH_METRIC] == np.mean(routes == median.ROUTE_NAMES.index("certified-fast-path")) < 1
            assert m[study.OVERFLOW_METRIC] == np.mean(routes == median.ROUTE_NAMES.index("full-overflow"))
        else:  # no routes: null, not 0
            assert m[study.FAST_PATH_METRIC] is None and m[study.OVERFLOW_METRIC] is None


def _synthetic_baselines(config):
    """Rows as part_baselines writes them, for every (distribution, mechanism), with made-up numbers."""
    rng = np.random.default_rng(0)
    labels = [study.PRIVATE_MEDIAN_LABEL, "nonprivate_median", study.UNSAFE_LABEL,
              *(label for label, _ in study.CLIPPED_BASELINES)]
    return [dict(distribution=d, n=config["baseline_n"], epsilon=1.0, mechanism=m, trials=config["baseline_trials"],
                 error_q50=q / 3, error_q90=q, error_q50_se=q / 30, error_q90_se=q / 10,
                 private=not m.startswith(("UNSAFE", "nonprivate")))
            for d in config["distributions"] for m, q in zip(labels, rng.uniform(0.03, 1.5, len(labels)))]


def test_baselines_plot_is_legible_with_error_bars():
    """The legend covers no bar, every x label (lower_bound_mixture included) is inside the figure and none
    overlaps another, and every bar has its +-1 s.e. error bar."""
    from matplotlib.collections import LineCollection

    from gpuprivacy.reproduce._plots import layout_problems

    config = study.study_config(quick=True)
    rows = _synthetic_baselines(config)
    fig = study.plot_baselines(config, rows)
    assert layout_problems(fig) == []
    (ax,) = fig.axes
    bars = [c for c in ax.containers if hasattr(c, "errorbar")]
    assert len(bars) == len({r["mechanism"] for r in rows})
    assert all(c.errorbar is not None for c in bars)
    assert any(isinstance(c, LineCollection) for c in ax.collections)
    labels = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
    assert labels == [d.replace("_", " ") for d in config["distributions"]]


def test_quantile_se_matches_the_normal_theory():
    # The median of n standard normals has s.e. sqrt(pi / 2) / sqrt(n) asymptotically; the 0.9 quantile
    # sqrt(0.09) / (phi(z_0.9) sqrt(n)) with phi(1.2816) = 0.17550.
    x = np.random.default_rng(1).standard_normal(40_000)
    assert study.quantile_se(x, 0.5) == pytest.approx(np.sqrt(np.pi / 2 / x.size), rel=0.1)
    assert study.quantile_se(x, 0.9) == pytest.approx(0.3 / 0.17550 / np.sqrt(x.size), rel=0.1)


def test_baseline_rows_carry_quantile_standard_errors(results):
    for row in results["baselines"]["rows"]:
        assert 0 <= row["error_q50_se"] < row["error_q90"] + row["error_q90_se"]
        assert np.isfinite(row["error_q90_se"]) and row["error_q90_se"] >= 0
