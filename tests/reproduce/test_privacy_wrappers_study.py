"""reproduce("linder2025-privacy-wrappers", quick=True): files, plots, and numbers checked against spec 000."""

import csv
import json
import math

import pytest

from gpuprivacy import subsets
from gpuprivacy.reproduce import list_studies, reproduce

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    (folder,) = reproduce("linder2025-privacy-wrappers", quick=True, out_dir=tmp_path_factory.mktemp("reproduce"), progress=False)
    return folder


@pytest.fixture(scope="module")
def results(study_dir):
    return json.loads((study_dir / "results.json").read_text(encoding="utf-8"))


def test_registered():
    assert "linder2025-privacy-wrappers" in {study.name for study in list_studies()}


def test_files_and_plots(study_dir):
    for name in ("accuracy.png", "depth_ratio.png"):
        assert (study_dir / name).read_bytes()[:8] == PNG_MAGIC
    report = (study_dir / "report.md").read_text(encoding="utf-8")
    assert "Achieved depth vs the lower-bound bracket" in report and "Feasibility" in report
    assert json.loads((study_dir / "metadata.json").read_text(encoding="utf-8"))["seed"]


def test_depths_match_spec_numbers(results):
    rows = {(r["wrapper"], r["epsilon"], r["setting"]): r for r in results["depths"]}
    # Spec 000 §5.2: Sens-o-Matic (1, 0.05, 2^16) -> 118/236; Subset-Extension (1, 1e-6) -> [836, 924].
    som = rows[("sens_o_matic", 1.0, "k=2^16, beta=0.05")]
    assert (som["depth_low"], som["depth_high"]) == (118, 236)
    se = rows[("subset_extension", 1.0, "delta=1e-6")]
    assert (se["depth_low"], se["depth_high"]) == (836, 924)
    assert rows[("tahoe", 1.0, "delta=1e-6")]["depth_high"] == 274
    # Sens-o-Matic's lam is about 16x its bracket (spec 000 §6: "achieves lam ~ 16 x bracket").
    assert 13 < som["ratio"] < 18


def test_feasibility_table_is_exact_and_timed(results):
    feasibility = results["feasibility"]
    assert feasibility["seconds_per_query"] > 0
    for row in feasibility["table"]:
        assert row["queries"] == subsets.query_count(row["n"], row["depth"])
        assert row["projected_seconds"] == pytest.approx(row["queries"] * feasibility["seconds_per_query"])


def test_accuracy_rows_and_csv(study_dir, results):
    with open(study_dir / "accuracy.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(results["accuracy"])
    by = {(r["wrapper"], r["epsilon"]): r for r in results["accuracy"]}
    # Laplace-type noise falls like 1/epsilon: white-box Laplace at eps 16 vs 2 is about 8x better.
    ratio = by[("white_box_laplace", 2.0)]["mean_abs_error"] / by[("white_box_laplace", 16.0)]["mean_abs_error"]
    assert 4 < ratio < 16
    assert all(r["bot_rate"] == 0.0 for r in results["accuracy"])
    assert not any(math.isnan(r["mean_abs_error"]) for r in results["accuracy"])
