"""reproduce("steinke2025-blackbox-estimation", quick=True): files, plots, and numbers checked against spec 002."""

import json
import math

import pytest

from gpuprivacy import designs
from gpuprivacy.reproduce import list_studies, reproduce

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed002")
    folder, = reproduce("steinke2025-blackbox-estimation", quick=True, out_dir=out, progress=False)
    return folder


def test_study_is_listed():
    assert "steinke2025-blackbox-estimation" in [s.name for s in list_studies()]


def test_files_and_plots(study):
    for name in ("report.md", "results.json", "metadata.json", "tradeoff_median.png", "tradeoff_logistic.png"):
        assert (study / name).exists(), name
    for name in ("tradeoff_median.png", "tradeoff_logistic.png"):
        assert (study / name).read_bytes()[:8] == PNG_MAGIC
    report = (study / "report.md").read_text()
    assert "Table 6.1" in report and "k achieved vs lower bounds" in report


def test_tradeoff_rows_follow_the_block_design_formulas(study):
    results = json.loads((study / "results.json").read_text())
    for task in ("median", "logistic"):
        block = results["tradeoff"][task]
        t = block["t"]
        assert t == designs.required_t("pure", epsilon=2.0, num_outputs=block["num_outputs"], beta=0.1)[0]
        for row in block["rows"]:
            assert row["k"] == math.comb(t + row["c"], row["c"])
            assert row["rows_per_evaluation"] == row["c"] * (row["n"] // (t + row["c"]))
            assert row["private_mae"] >= 0 and 0 <= row["within_min_max"] <= 1
        # More data per evaluation for more oracle calls (the trade-off of Thm 1.1).
        kept = [r["rows_per_evaluation"] for r in block["rows"]]
        assert kept == sorted(kept) and len(set(kept)) == len(kept)
        # The non-private statistic on all n rows beats the one on n - m rows on average.
        assert block["rows"][0]["nonprivate_n_mae"] < block["rows"][0]["nonprivate_n_minus_m_mae"]


def test_table_6_1_and_bounds(study):
    results = json.loads((study / "results.json").read_text())
    rows = {r["row"]: r for r in results["table_6_1"]}
    assert rows["1 (c=1)"]["k"] == 23 and rows["1 (c=1)"]["schonheim"] == 23  # S&A is optimal (3.31)
    assert rows["2 (c=2)"]["k"] == 276 and rows["2 (c=2)"]["schonheim"] == 43  # spec §3.4
    assert rows["2 (c=2)"]["lower_3_11"] == pytest.approx(6.84, abs=0.01)
    assert rows["5"]["k"] == math.comb(2400, 22) == rows["5"]["schonheim"]  # (3.29)
    for row in results["k_vs_lower_bounds"]:
        assert row["lower_3_11"] <= row["schonheim_3_17"] <= row["k_block"]
        assert row["thm_5_1_log10"] < 0  # vacuous in this regime (spec §5.3, pitfall 19)


def _synthetic_tradeoff(max_c):
    rows = [{"task": "median", "c": c, "t": 14, "k": math.comb(14 + c, c), "private_mae": 0.1 * c,
             "private_mae_se": 0.02, "nonprivate_n_minus_m_mae": 0.1 / c, "nonprivate_n_minus_m_mae_se": 0.01,
             "nonprivate_n_mae": 0.03, "nonprivate_n_mae_se": 0.005, "trials": 12} for c in range(1, max_c + 1)]
    return {"task": "median", "t": 14, "num_outputs": 81, "truth": 0.0, "rows": rows}


@pytest.mark.parametrize("max_c", [2, 3, 6])
def test_tradeoff_plot_has_one_plain_tick_per_design_and_error_bars(max_c):
    """x ticks only at the designs' k (no log-axis minor labels 2x10^1, 3x10^1, ... that overlapped), none
    overlapping another or leaving the figure, the legend over no data, and error bars on both means."""
    from matplotlib.container import ErrorbarContainer

    from gpuprivacy.reproduce import _blackbox_estimation as study_module
    from gpuprivacy.reproduce._plots import layout_problems

    result = _synthetic_tradeoff(max_c)
    fig = study_module.plot_tradeoff(result)
    assert layout_problems(fig) == []
    (ax,) = fig.axes
    shown = [t.get_text().split("\n")[0] for t in ax.get_xticklabels() if t.get_text()]
    assert set(shown) <= {str(r["k"]) for r in result["rows"]} and str(result["rows"][0]["k"]) in shown
    assert not [t for t in ax.get_xticklabels(minor=True) if t.get_text()]
    assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 2


def test_tradeoff_rows_carry_standard_errors(study):
    results = json.loads((study / "results.json").read_text())
    for task in ("median", "logistic"):
        for row in results["tradeoff"][task]["rows"]:
            assert row["trials"] >= 2
            for name in ("private_mae", "nonprivate_n_minus_m_mae", "nonprivate_n_mae"):
                assert 0 <= row[f"{name}_se"] <= row[name] + 1e-12  # nonnegative values: s.d. <= sqrt(n) mean
