"""The nonprivate baseline (the exact statistic, flagged not private) and the paired differences between the
cells of a block (mechanisms compared trial by trial on the same datasets), with the report's table."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import audit, datasets, sweeps
from gpuprivacy.cli import main
from gpuprivacy.sweeps import SweepConfigError, run_sweep
from gpuprivacy.sweeps._mechanisms import TARGETS, builtin_sweepables
from gpuprivacy.sweeps._paired import (EXACT_TIE_RTOL, PairedCell, comparable, mean_difference, pair, paired_entries,
                                       win_rate)

NOT_PRIVATE = {"type": "NotPrivate", "kind": "none", "private": False}
BOX = {"lower": -5.0, "upper": 5.0, "clip": True}


# --- the pure functions, on arrays with known answers ----------------------------------------------------------

def test_mean_difference_and_win_rate_by_hand():
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.0, 2.0, 1.0, 5.0])
    mean, se, m = mean_difference(a, b)  # d = [1, 0, 2, -1]
    assert m == 4 and mean == pytest.approx(0.5)
    assert se == pytest.approx(math.sqrt(((0.5**2) + 0.5**2 + 1.5**2 + 1.5**2) / 3) / 2)
    w, w_se, ties = win_rate(a, b)  # a < b only at the last trial; one tie
    assert (w, ties) == (0.25, 0.25) and w_se == pytest.approx(math.sqrt(0.25 * 0.75 / 4))
    assert all(math.isnan(v) for v in mean_difference([], [])[:2])


def _cell(cell_id, values, targets, valid=None, params=None, population=None, **kw):
    values, targets = np.asarray(values, float), np.asarray(targets, float)
    valid = np.ones(values.shape[0], bool) if valid is None else np.asarray(valid, bool)
    return PairedCell(cell_id, cell_id, params if params is not None else {"epsilon": 1.0}, values, targets, valid,
                      population, **kw)


def test_a_pair_uses_the_trials_both_released_against_the_statistic_and_the_population():
    targets = [0.0, 1.0, 2.0, 3.0, 4.0]
    a = _cell("a", [0.5, 1.0, 2.5, 3.0, 9.0], targets, valid=[1, 1, 1, 1, 0], population=1.0)
    b = _cell("b", [1.0, 3.0, 2.0, 3.5, 4.0], targets, valid=[1, 0, 1, 1, 1], population=1.0)
    entry = pair(a, b)  # both released: trials 0, 2, 3; |e_a| = .5, .5, 0; |e_b| = 1, 0, .5
    assert entry["trials"] == 3 and entry["versus_cell"] == "b"
    assert entry["abs_error_difference"] == pytest.approx(np.mean([-0.5, 0.5, -0.5]))
    assert entry["abs_error_difference_se"] == pytest.approx(np.std([-0.5, 0.5, -0.5], ddof=1) / math.sqrt(3))
    assert entry["win_rate"] == pytest.approx(2 / 3)
    # Against the population value 1: |a - 1| = .5, 1.5, 2; |b - 1| = 0, 1, 2.5.
    assert entry["population_abs_error_difference"] == pytest.approx(np.mean([0.5, 0.5, -0.5]))
    assert entry["population_win_rate"] == pytest.approx(1 / 3)
    reverse = pair(b, a)
    assert reverse["abs_error_difference"] == pytest.approx(-entry["abs_error_difference"])
    assert "note" not in entry


def test_an_error_with_no_mean_has_a_null_mean_difference_and_a_win_rate():
    a = _cell("a", [0.1, 0.2, 30.0], [0.0, 0.0, 0.0], no_mean=True)
    b = _cell("b", [0.5, 0.5, 0.5], [0.0, 0.0, 0.0])
    entry = pair(b, a)
    assert entry["abs_error_difference"] is None and entry["abs_error_difference_se"] is None
    assert entry["win_rate"] == pytest.approx(1 / 3) and entry["win_rate_se"] is not None
    assert "no mean" in entry["note"] and "a" in entry["note"]


def test_which_cells_are_comparable():
    t = [0.0, 1.0, 2.0]
    eps1 = _cell("e1", t, t, params={"epsilon": 1.0})
    assert not comparable(eps1, _cell("e2", t, t, params={"epsilon": 2.0}))  # other privacy parameters
    assert not comparable(eps1, _cell("q", t, [0.0, 1.0, 2.5], params={"epsilon": 1.0}))  # another statistic
    assert comparable(eps1, _cell("np", t, t, params={"statistic": "median"}))  # the baseline: no epsilon
    assert comparable(eps1, _cell("pure", t, t, params={"epsilon": 1.0, "delta": None}))  # unset delta
    assert not comparable(eps1, _cell("idx", t, t, real=False))
    assert [len(e) for e in paired_entries([eps1, _cell("np", t, t, params={})])] == [1, 1]


EXACT_FIELDS = ("expected_abs_error_difference", "expected_abs_error_difference_se",
                "expected_abs_error_max_difference", "expected_abs_error_dominance")


def test_exact_errors_pair_over_the_datasets_both_released():
    targets = [0.0] * 5
    a = _cell("a", [0.0] * 5, targets, valid=[1, 1, 1, 1, 0], exact={"expected_abs_error": [1.0, 2.0, 3.0, 4.0, 0.0]})
    b = _cell("b", [0.0] * 5, targets, exact={"expected_abs_error": [2.0, 2.0, 1.0, 5.0, 9.0]})
    entry = pair(a, b)  # both released: datasets 0..3; a - b = -1, 0, 2, -1
    d = np.array([-1.0, 0.0, 2.0, -1.0])
    assert entry["expected_abs_error_difference"] == pytest.approx(0.0, abs=1e-15)
    assert entry["expected_abs_error_difference_se"] == pytest.approx(np.std(d, ddof=1) / 2)
    assert entry["expected_abs_error_max_difference"] == 2.0
    assert entry["expected_abs_error_dominance"] == 0.75  # a <= b on datasets 0, 1 (a tie) and 3
    reverse = pair(b, a)
    assert reverse["expected_abs_error_max_difference"] == 1.0 and reverse["expected_abs_error_dominance"] == 0.5
    # A tie within the relative tolerance counts for A; a difference beyond it does not.
    tie = _cell("t", [0.0], [0.0], exact={"expected_abs_error": [1.0 + 0.5 * EXACT_TIE_RTOL]})
    one = _cell("o", [0.0], [0.0], exact={"expected_abs_error": [1.0]})
    beyond = _cell("x", [0.0], [0.0], exact={"expected_abs_error": [1.0 + 4 * EXACT_TIE_RTOL]})
    assert pair(tie, one)["expected_abs_error_dominance"] == 1.0
    assert pair(beyond, one)["expected_abs_error_dominance"] == 0.0 and pair(one, beyond)[
        "expected_abs_error_dominance"] == 1.0
    assert sweeps.exact_dominance([1.0, 3.0], [2.0, 2.0]) == (0.5, 1.0)
    assert all(math.isnan(v) for v in sweeps.exact_dominance([], []))


def test_cells_without_exact_errors_have_no_exact_fields():
    t = [0.0, 1.0]
    with_exact = _cell("e", t, t, exact={"expected_abs_error": [1.0, 1.0]})
    for other in (_cell("none", t, t), _cell("empty", t, t, exact={}),
                  _cell("median-only", t, t, exact={"median_abs_error": [1.0, 1.0]})):
        assert not set(EXACT_FIELDS) & set(pair(with_exact, other)) and not set(EXACT_FIELDS) & set(
            pair(other, with_exact))
    assert set(EXACT_FIELDS) <= set(pair(with_exact, with_exact))


# --- the baseline ----------------------------------------------------------------------------------------------

def test_nonprivate_releases_each_statistic_exactly():
    release = builtin_sweepables()["nonprivate"].release
    key = jax.random.key(0)
    x = jnp.asarray(np.random.default_rng(1).normal(size=24))
    expected = {
        (("statistic", "median"),): TARGETS["median"].statistic(x, {}),
        (("statistic", "quantile"), ("quantile", 0.9)): TARGETS["quantile"].statistic(x, {"quantile": 0.9}),
        (("statistic", "mean"),): np.mean(np.asarray(x)),
        (("statistic", "clipped-mean"), ("lower", -0.5), ("upper", 0.5)): np.mean(np.clip(x, -0.5, 0.5)),
        (("statistic", "count"), ("cutoff", 0.0)): np.sum(np.asarray(x) >= 0.0),
        (("statistic", "row-mean"), ("dim", 3), ("lower", -1.0), ("upper", 1.0)):
            np.clip(np.asarray(x), -1, 1).reshape(8, 3).mean(axis=0),
        (("statistic", "oracle"), ("oracle", "variance")): TARGETS["oracle"].statistic(x, {"oracle": "variance"}),
    }
    for params, want in expected.items():
        out = release(key, x, **dict(params))
        np.testing.assert_allclose(np.asarray(out.value), np.asarray(want), rtol=1e-12, err_msg=str(params))
        assert out.guarantee == sweeps.NotPrivate() and not hasattr(out.guarantee, "epsilon")
    with pytest.raises(ValueError, match="quantile = 0.9 does not apply to statistic = 'median'"):
        release(key, x, quantile=0.9)
    with pytest.raises(ValueError, match="needs quantile"):
        release(key, x, statistic="quantile")


def test_nonprivate_is_the_only_non_private_sweepable_and_is_never_audited():
    table = builtin_sweepables()
    assert [name for name, m in table.items() if not m.private] == ["nonprivate"]
    assert "nonprivate" not in {audit.parse_name(name)[0] for name in audit.registered()}
    assert "epsilon" not in table["nonprivate"].parameters and "delta" not in table["nonprivate"].parameters
    # What users register is private by construction (register_mechanism cannot clear the flag).
    assert sweeps._mechanisms.make_sweepable(table["laplace-median"].release, target="median").private


def test_sweep_list_marks_nonprivate_as_not_private(capsys):
    assert main(["sweep", "--list", "--json"]) == 0
    mechanisms = json.loads(capsys.readouterr().out)["mechanisms"]
    assert mechanisms["nonprivate"]["private"] is False
    assert mechanisms["nonprivate"]["description"].startswith("NOT PRIVATE")
    assert all(item["private"] for name, item in mechanisms.items() if name != "nonprivate" and "private" in item)
    assert main(["sweep", "--list"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("nonprivate(")]
    assert "NOT PRIVATE" in line


def _config(mechanisms, **overrides):
    return {"name": "paired-test", "seed": 5, "trials": 64, "mechanism": mechanisms,
            "dataset": {"name": "normal", "n": 50}, **overrides}


def test_a_config_giving_nonprivate_an_epsilon_is_refused(tmp_path):
    for mechanism in ({"name": "nonprivate", "epsilon": 1.0},
                      {"name": ["laplace-median", "nonprivate"], "epsilon": 1.0, **BOX}):
        with pytest.raises(SweepConfigError, match=r"key 'epsilon' .* nonprivate is NOT private .* takes no privacy "
                                                   r"parameter"):
            run_sweep(_config(mechanism), results_path=tmp_path / "r.jsonl", progress=False)
    assert not (tmp_path / "r.jsonl").exists()
    with pytest.raises(SweepConfigError, match="needs quantile"):
        run_sweep(_config({"name": "nonprivate", "statistic": "quantile"}), results_path=tmp_path / "r.jsonl",
                  progress=False)


# --- a tiny sweep: the engine's pairs ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def study(tmp_path_factory):
    path = tmp_path_factory.mktemp("paired") / "r.jsonl"
    config = _config([{"name": "piecewise-laplace-median", "epsilon": [2.0, 4.0], **BOX},
                      {"name": ["laplace-median", "smooth-sensitivity-median"], "epsilon": 2.0, **BOX},
                      {"name": "nonprivate"}])
    summary = run_sweep(config, results_path=path, progress=False)
    rows = {(r["mechanism"], r["mechanism_params"].get("epsilon")): r for r in summary.rows}
    return path, summary.rows, rows


def _entry(row, versus):
    """``row``'s pair with ``versus``: a mechanism name (one cell of it) or a row."""
    (entry,) = [e for e in row["paired"] if (e["versus_cell"] == versus["cell_id"] if isinstance(versus, dict)
                                             else e["versus_mechanism"] == versus)]
    return entry


def test_nonprivate_rows_have_zero_error_sampling_error_and_no_guarantee(study):
    _, _, rows = study
    row = rows[("nonprivate", None)]
    assert row["guarantee"] == NOT_PRIVATE and row["status"] == "ok"
    assert row["metrics"]["mae"] == 0.0 and row["metrics"]["mse"] == 0.0
    assert row["metrics"]["population_mae"] > 0.0 and row["population_value"] == 0.0
    assert row["metrics"]["epsilon"] is None and row["metrics"]["delta"] is None and row["metrics"]["rho"] is None
    assert "epsilon" not in json.dumps(row["guarantee"]) and "epsilon" not in row["mechanism_params"]
    for other in study[1]:  # and no private row is mistaken for it
        if other["mechanism"] != "nonprivate":
            assert other["guarantee"]["type"] != "NotPrivate" and other["metrics"]["epsilon"] > 0


def test_paired_means_are_differences_of_means_with_a_smaller_paired_standard_error(study):
    _, _, rows = study
    plm, laplace, base = rows[("piecewise-laplace-median", 2.0)], rows[("laplace-median", 2.0)], \
        rows[("nonprivate", None)]
    assert plm["metrics"]["released"] == laplace["metrics"]["released"] == 1.0
    for a, b in ((plm, laplace), (plm, base), (laplace, base)):
        entry = _entry(a, b)
        assert entry["trials"] == 64 and entry["versus_cell"] == b["cell_id"]
        # A paired mean of differences is the difference of the means when every trial released.
        assert entry["abs_error_difference"] == pytest.approx(a["metrics"]["mae"] - b["metrics"]["mae"], abs=1e-12)
        assert entry["population_abs_error_difference"] == pytest.approx(
            a["metrics"]["population_mae"] - b["metrics"]["population_mae"], abs=1e-12)
    # Against the population value both errors share each dataset's sampling error: pairing removes it.
    entry = _entry(plm, "nonprivate")
    unpaired = math.hypot(plm["metrics"]["population_mae_se"], base["metrics"]["population_mae_se"])
    assert entry["population_abs_error_difference_se"] < 0.75 * unpaired
    assert entry["win_rate"] == 0.0  # the exact statistic always wins against its own data ...
    assert _entry(base, plm)["win_rate"] == 1.0
    assert 0.0 < entry["population_win_rate"] < 1.0  # ... not always against the population


def test_cells_with_other_privacy_parameters_are_not_paired_and_the_baseline_pairs_with_all(study):
    _, _, rows = study
    plm2, plm4 = rows[("piecewise-laplace-median", 2.0)], rows[("piecewise-laplace-median", 4.0)]
    assert plm4["cell_id"] not in {e["versus_cell"] for e in plm2["paired"]}
    assert {e["versus_mechanism"] for e in plm4["paired"]} == {"nonprivate"}
    assert {e["versus_cell"] for e in rows[("nonprivate", None)]["paired"]} == {
        r["cell_id"] for key, r in rows.items() if key[0] != "nonprivate"}


def test_the_cauchy_release_pairs_with_a_null_mean_and_a_win_rate(study):
    _, _, rows = study
    cauchy = rows[("smooth-sensitivity-median", 2.0)]
    for entry in cauchy["paired"]:
        assert entry["abs_error_difference"] is None and entry["population_abs_error_difference"] is None
        assert 0.0 <= entry["win_rate"] <= 1.0 and entry["win_rate_se"] is not None and "no mean" in entry["note"]
    assert _entry(rows[("laplace-median", 2.0)], "smooth-sensitivity-median")["abs_error_difference"] is None


def test_read_results_stays_flat_and_read_paired_has_one_row_per_pair(study):
    pandas = pytest.importorskip("pandas")
    path, summary_rows, _ = study
    frame = sweeps.read_results(path)
    assert "paired" not in frame.columns
    assert not any(isinstance(v, (dict, list)) for v in frame.iloc[0].tolist())
    pairs = sweeps.read_paired(path)
    assert isinstance(pairs, pandas.DataFrame)
    assert len(pairs) == sum(len(r.get("paired", ())) for r in summary_rows) == 3 + 1 + 3 + 3 + 4  # PLM2, PLM4, LM2, SSM2, NP
    got = pairs[(pairs.mechanism == "piecewise-laplace-median") & (pairs.epsilon == 2.0)
                & (pairs.versus_mechanism == "laplace-median")]
    assert len(got) == 1 and got.iloc[0]["versus_epsilon"] == 2.0


def test_paired_table_names_the_reference_with_intervals(study):
    _, summary_rows, rows = study
    table = sweeps.paired_table(summary_rows)
    assert table.startswith("## Paired differences")
    lines = [line for line in table.splitlines() if line.startswith("| piecewise-laplace-median")]
    assert len(lines) == 2 and all("nonprivate" in line for line in lines)
    entry = _entry(rows[("piecewise-laplace-median", 2.0)], "nonprivate")
    low = entry["abs_error_difference"] - 1.959963984540054 * entry["abs_error_difference_se"]
    assert f"{entry['abs_error_difference']:.4g} [{low:.4g}, " in table
    assert "| smooth-sensitivity-median |" in table and "undefined" in table
    other = sweeps.paired_table(summary_rows, reference="laplace-median")
    assert "| piecewise-laplace-median |" in other and "laplace-median (" in other
    assert sweeps.paired_table([{k: v for k, v in r.items() if k != "paired"} for r in summary_rows]) == ""


def test_the_study_report_has_the_paired_section_and_refuses_an_unknown_reference(study, tmp_path):
    path, _, _ = study
    out = sweeps.study_report(path, out_dir=tmp_path / "report")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Paired differences" in report and "nonprivate" in report.split("## Paired differences")[1]
    assert out["files"][0].name == "report.md"
    sweeps.study_report(path, out_dir=tmp_path / "other", reference="laplace-median")
    assert "laplace-median (" in (tmp_path / "other" / "report.md").read_text()
    with pytest.raises(ValueError, match="'laplace' is not a mechanism of .* its mechanisms are"):
        sweeps.study_report(path, out_dir=tmp_path / "bad", reference="laplace")
    assert not (tmp_path / "bad").exists()  # refused before anything is written


# --- a tiny sweep with exact = true: the exact errors paired ------------------------------------------------------

def test_an_exact_sweep_pairs_the_exact_errors_as_run_cells_gives_them(tmp_path):
    config = {"name": "paired-exact", "seed": 7, "trials": 16, "exact": True,
              "mechanism": [{"name": ["piecewise-laplace-median", "inverse-sensitivity-median"], "epsilon": 1.0,
                             **BOX},
                            {"name": "nonprivate"}],
              "dataset": {"name": "normal", "n": 15, "scale": 2.0}}
    summary = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    rows = {r["mechanism"]: r for r in summary.rows}
    plm, inv = rows["piecewise-laplace-median"], rows["inverse-sensitivity-median"]
    entry, reverse = _entry(plm, inv), _entry(inv, plm)
    # By hand: the same cells through run_cells, with the engine's keys (data key from the seed and the dataset,
    # noise keys from the cells), give each dataset's exact errors.
    cells = {c.mechanism: c for c in sweeps.expand_sweep(config)}
    table = builtin_sweepables()
    spec = sweeps.DataSpec("normal", 15, {"loc": 0.0, "scale": 2.0}, distribution=datasets.distribution("normal"))
    names = ("piecewise-laplace-median", "inverse-sensitivity-median")
    requests = [sweeps.CellRequest(table[name], dict(cells[name].mechanism_params),
                                   sweeps.cell_key(7, cells[name].cell_id)) for name in names]
    a_trials, b_trials = sweeps.run_cells(requests, spec, 16, data_key=sweeps.data_key(7, cells[names[0]]), exact=True)
    assert np.all(a_trials.valid) and np.all(b_trials.valid)
    a, b = a_trials.exact["expected_abs_error"], b_trials.exact["expected_abs_error"]
    assert entry["trials"] == 16
    assert entry["expected_abs_error_dominance"] == np.mean(a <= b) == 1.0  # Durfee 2025, Thm 2
    assert entry["expected_abs_error_max_difference"] == pytest.approx(np.max(a - b), rel=1e-12) and np.max(a - b) < 0
    assert entry["expected_abs_error_difference"] == pytest.approx(np.mean(a - b), rel=1e-12)
    assert entry["expected_abs_error_difference_se"] == pytest.approx(np.std(a - b, ddof=1) / 4, rel=1e-12)
    assert entry["expected_abs_error_difference"] == pytest.approx(
        plm["metrics"]["expected_abs_error"] - inv["metrics"]["expected_abs_error"], rel=1e-9)
    assert reverse["expected_abs_error_dominance"] == np.mean(b <= a) == 0.0
    # The baseline has no exact errors: its pairs carry none.
    assert not set(EXACT_FIELDS) & set(_entry(plm, "nonprivate"))
