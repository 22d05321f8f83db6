"""reproduce("rnm-bikes", quick=True): files, plots and sane numbers."""

import csv
import json
import math
import pathlib
import sys

import numpy as np
import pytest

from gpuprivacy.datasets import bikes_daily_queries
from gpuprivacy.reproduce import StudyInfo, list_studies, register_study, reproduce, rnm_bikes_config
from gpuprivacy.sweeps import expand_sweep

ROOT = pathlib.Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NOISES = ("laplace", "gumbel", "exponential")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    folders = reproduce("rnm-bikes", quick=True, out_dir=out, progress=False)
    return folders


@pytest.fixture(scope="module")
def study_dir(quick_run):
    assert len(quick_run) == 1
    return quick_run[0]


@pytest.fixture(scope="module")
def results(study_dir):
    return json.loads((study_dir / "results.json").read_text())


def curve(records, d, noise):
    rs = sorted((r for r in records if r["d"] == d and r["noise"] == noise), key=lambda r: r["epsilon"])
    return (np.array([r["epsilon"] for r in rs]), np.array([r["accuracy"] for r in rs]),
            np.array([r["accuracy_se"] for r in rs]))


def test_study_folder_has_every_file(study_dir):
    assert study_dir.name == "rnm-bikes" and study_dir.is_dir()
    names = {p.name for p in study_dir.iterdir()}
    assert {"report.md", "results.json", "results.csv", "metadata.json", "cells_quick.jsonl", "accuracy_d90.png",
            "accuracy_d365.png"} <= names


@pytest.mark.parametrize("d", [90, 365])
def test_plots_are_valid_nontrivial_pngs(study_dir, d):
    from matplotlib.image import imread

    path = study_dir / f"accuracy_d{d}.png"
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 20_000  # three curves, bands, legend: far more than a blank canvas (~5 kB)
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] >= 300 and image.shape[1] >= 500
    # Not a blank image: many distinct colours (curves in blue, orange, green).
    colours = np.unique((image[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50


def test_report_describes_run_results_plots_and_differences(study_dir, results):
    report = (study_dir / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# ")
    for needle in ("QUICK", "## What was run", "## Results", "## Where and why the numbers differ from the paper",
                   "![accuracy vs epsilon, d = 90](accuracy_d90.png)",
                   "![accuracy vs epsilon, d = 365](accuracy_d365.png)", "monotonic=False", "1/6946",
                   "200 independent trials", "seed 20240213"):
        assert needle in report, needle
    # Every grid point appears in the tables.
    for eps in sorted({r["epsilon"] for r in results["records"]}):
        assert f"\n| {eps:g} | " in report


def test_numbers_are_sane(results):
    records = results["records"]
    config = rnm_bikes_config(quick=True)
    num_eps = len(config["mechanism"][0]["epsilon"]) + 1
    assert len(records) == 2 * 3 * num_eps
    for r in records:
        assert 0.0 <= r["accuracy"] <= 1.0 and 0.0 <= r["prob_true_argmax"] <= 1.0
        assert r["accuracy_se"] >= 0 and r["num_trials"] == 200 and r["sensitivity"] == 1 / 6946
    for d in (90, 365):
        q = bikes_daily_queries(d)
        uniform = 1 - float(np.mean(q.max() - q))
        assert results["uniform_random_accuracy"][str(d)] == pytest.approx(uniform, rel=1e-12)
        for noise in NOISES:
            eps, acc, se = curve(records, d, noise)
            assert eps[0] == 1e-4 and eps[-1] == 1.0
            # At epsilon = 1 the noise scale (2.9e-4) is below the top gap: close to 1.
            assert acc[-1] > 0.999, (d, noise, acc)
            # At epsilon = 1e-4 (scale 2.9 >> range) selection is nearly uniform: far from 1,
            # and not below uniform random selection by more than 4 SE.
            assert acc[0] < 0.95
            assert acc[0] > uniform - 4 * se[0]
            # Increasing overall: large net gain, strong rank correlation, and no step down by more
            # than 4 combined standard errors (plus float slack on the plateau at 1).
            assert acc[-1] - acc[0] > 0.1
            ranks_eps, ranks_acc = np.argsort(np.argsort(eps)), np.argsort(np.argsort(acc, kind="stable"))
            assert np.corrcoef(ranks_eps, ranks_acc)[0, 1] > 0.8
            steps = np.diff(acc)
            tolerance = 4 * np.sqrt(se[1:] ** 2 + se[:-1] ** 2) + 1e-12
            assert (steps > -tolerance).all(), (d, noise, acc)


def test_reference_point_matches_spec_within_monte_carlo_noise(results):
    # Spec 004 Sec 5.5 [R]: at epsilon = 0.0353, d = 365: Laplace 0.995, EM 0.994, PF 0.997 (1000 trials).
    reference = {"laplace": 0.995, "gumbel": 0.994, "exponential": 0.997}
    for noise, expected in reference.items():
        (r,) = [r for r in results["records"] if r["d"] == 365 and r["noise"] == noise and r["epsilon"] == 0.0353]
        assert abs(r["accuracy"] - expected) < 0.004 + 4 * r["accuracy_se"], (noise, r["accuracy"])


def test_csv_equals_json(study_dir, results):
    with open(study_dir / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(results["records"])
    for row, record in zip(rows, results["records"], strict=True):
        assert row["cell_id"] == record["cell_id"] and row["noise"] == record["noise"]
        assert float(row["accuracy"]) == record["accuracy"] and float(row["epsilon"]) == record["epsilon"]
        assert int(row["d"]) == record["d"]


def test_metadata_records_provenance(study_dir):
    meta = json.loads((study_dir / "metadata.json").read_text())
    assert meta["study"] == "rnm-bikes" and meta["quick"] is True and meta["seed"] == 20240213
    for key in ("git_sha", "jax_version", "jaxlib_version", "numpy_version", "python_version", "device_kind",
                "wall_s", "started_utc", "finished_utc", "parameters"):
        assert key in meta, key
    assert meta["parameters"] == rnm_bikes_config(quick=True)
    assert 0 < meta["wall_s"]  # its time target is a benchmark (BENCHMARKS.md), not a timed test
    assert set(meta["files"]) == {p.name for p in study_dir.iterdir()}


def test_rerun_resumes_from_cells_and_gives_the_same_numbers(study_dir, results):
    (folder,) = reproduce("rnm-bikes", quick=True, out_dir=study_dir.parent, progress=False)
    meta = json.loads((folder / "metadata.json").read_text())
    assert meta["sweep"]["num_computed"] == 0 and meta["sweep"]["num_skipped"] == meta["sweep"]["num_cells"]
    assert json.loads((folder / "results.json").read_text())["records"] == results["records"]


def test_example_toml_is_the_full_study_grid():
    from_toml = expand_sweep(ROOT / "experiments" / "configs" / "rnm_bikes.toml")
    from_study = expand_sweep(rnm_bikes_config(quick=False))
    assert [c.cell_id for c in from_toml] == [c.cell_id for c in from_study]
    full = rnm_bikes_config(quick=False)
    assert full["trials"] == 1000 and len(full["mechanism"][0]["epsilon"]) == 25


def test_list_and_unknown_study():
    studies = list_studies()
    assert all(isinstance(s, StudyInfo) for s in studies)
    assert "rnm-bikes" in [s.name for s in studies]
    with pytest.raises(ValueError, match=r"unknown study 'rnm-bike'\. Known studies: .*rnm-bikes"):
        reproduce("rnm-bike", quick=True, out_dir="unused")
    with pytest.raises(ValueError, match="study name must match"):
        register_study("Bad Name", lambda *a, **k: {}, "x")


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r"pip install gpuprivacy\[plots\]"):
        reproduce("rnm-bikes", quick=True, out_dir=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # failed before computing anything


def test_custom_study_gets_its_folder_and_metadata(tmp_path):
    def study(study_dir, *, quick, progress):
        (study_dir / "report.md").write_text(f"quick={quick}\n")
        return {"seed": 5, "parameters": {"x": 1}}

    register_study("test-custom-study", study, "a test study", replace=True)
    (folder,) = reproduce("test-custom-study", quick=False, out_dir=tmp_path, progress=False)
    assert folder == tmp_path / "test-custom-study"
    assert (folder / "report.md").read_text() == "quick=False\n"
    meta = json.loads((folder / "metadata.json").read_text())
    assert meta["seed"] == 5 and meta["quick"] is False and math.isfinite(meta["wall_s"])
