"""A results file is bound to its config: rows carry the config digest and seed; an edited config is refused."""

import json

import pytest

from gpuprivacy.sweeps import SweepResultsError, run_sweep, study_report


def config(**overrides):
    base = {"name": "bound", "seed": 3, "trials": 4,
            "mechanism": {"name": "laplace-median", "epsilon": 1.0, "lower": -5.0, "upper": 5.0, "clip": True},
            "dataset": {"name": "normal", "n": [7, 9]}}
    return {**base, **overrides}


def test_rows_carry_the_digest_and_the_seed_and_a_rerun_resumes(tmp_path):
    path = tmp_path / "r.jsonl"
    first = run_sweep(config(), results_path=path, progress=False)
    digests = {row["config_digest"] for row in first.rows}
    assert len(digests) == 1 and all(row["seed"] == 3 for row in first.rows)
    again = run_sweep(config(), results_path=path, progress=False)
    assert again.num_computed == 0 and again.num_skipped == 2


@pytest.mark.parametrize("edit", [{"seed": 4}, {"trials": 5}, {"dataset": {"name": "normal", "n": [7]}}])
def test_an_edited_config_into_the_same_file_is_refused_with_both_digests(tmp_path, edit):
    path = tmp_path / "r.jsonl"
    first = run_sweep(config(), results_path=path, progress=False)
    before = path.read_text()
    with pytest.raises(SweepResultsError, match="another config") as err:
        run_sweep(config(**edit), results_path=path, progress=False)
    theirs = first.rows[0]["config_digest"]
    assert theirs in str(err.value) and "this config's digest is" in str(err.value)
    assert path.read_text() == before  # nothing appended
    other = run_sweep(config(**edit), results_path=tmp_path / "new.jsonl", progress=False)
    assert other.rows[0]["config_digest"] != theirs


def test_the_report_refuses_a_file_that_mixes_configs(tmp_path):
    a = run_sweep(config(), results_path=tmp_path / "a.jsonl", progress=False)
    b = run_sweep(config(seed=5), results_path=tmp_path / "b.jsonl", progress=False)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text((tmp_path / "a.jsonl").read_text() + (tmp_path / "b.jsonl").read_text())
    with pytest.raises(ValueError, match="mixes the rows of 2 configs"):
        study_report(mixed, out_dir=tmp_path / "rep")
    assert {json.loads(line)["config_digest"] for line in mixed.read_text().splitlines()} == {
        a.rows[0]["config_digest"], b.rows[0]["config_digest"]}


def test_the_guarantee_in_a_row_names_the_neighbour_relation(tmp_path):
    rows = run_sweep(config(), results_path=tmp_path / "r.jsonl", progress=False).rows
    assert rows[0]["guarantee"] == {"type": "PureDP", "epsilon": 1.0, "neighbours": "swap"}


def test_a_metric_whose_expectation_does_not_exist_is_reported_undefined(tmp_path):
    mechanism = {"name": "smooth-sensitivity-median", "epsilon": 1.0, "lower": -5.0, "upper": 5.0, "clip": True}
    cauchy = run_sweep(config(mechanism={**mechanism, "noise": "cauchy"}, dataset={"name": "cauchy", "n": [9, 11]}),
                       results_path=tmp_path / "c.jsonl", progress=False).rows[0]
    for name in ("mae", "mae_se", "mse", "mse_se", "bias", "population_mae"):
        assert cauchy["metrics"][name] is None, name  # no mean: no number, no band
    assert cauchy["metrics"]["abs_error_q50"] is not None and "abs_error_q50" in cauchy["undefined_metrics"]
    laplace = run_sweep(config(mechanism={**mechanism, "noise": "laplace", "delta": 1e-6},
                               dataset={"name": "cauchy", "n": 9}),
                        results_path=tmp_path / "l.jsonl", progress=False).rows[0]
    assert laplace["metrics"]["mae"] is not None and "undefined_metrics" not in laplace
    report = study_report(tmp_path / "c.jsonl", out_dir=tmp_path / "rep", metric="mae")
    assert "undefined (the error has no mean" in (tmp_path / "rep" / "report.md").read_text()
    del report
