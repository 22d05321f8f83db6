"""reproduce("lebensold2024-gaussian-selection", quick=True): files, plots, and numbers checked against spec 004."""

import csv
import json

import numpy as np
import pytest

from gpuprivacy.reproduce import list_studies, reproduce, run_gaussian_selection_part, gaussian_selection_config

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
QUICK_PNGS = {
    "fig1_expost_vs_exante.png", "fig1_heatmap.png", "fig2_expost_vs_threshold.png", "fig3_rnm_mc_vs_quadrature.png",
    "fig7_rnm_pure_vs_postprocessing.png", "fig8_rnm_difference_heatmap.png", "rnm_bikes.png",
    "rnm_lcl-synthetic.png", "fsrc_bikes_scatter.png", "fsrc_bikes_spend.png", "fsrc_lcl-synthetic_scatter.png",
    "fsrc_lcl-synthetic_spend.png",
}

# Spec 004 Sec. 5.3 (Fig. 7 grid: Delta = 1e-3, [0, 1], delta = 1e-5; rows sigma, columns
# d = 16, 28, 52, 95, 172, 312, 565, 1024), copied here independently of the study module.
FIG7_D = [16, 28, 52, 95, 172, 312, 565, 1024]
FIG7_SPEC = {
    "pure": {
        0.1: [0.20405, 0.21492, 0.22434, 0.23183, 0.23814, 0.24370, 0.24868, 0.25323],
        0.2: [0.05797, 0.06211, 0.06591, 0.06907, 0.07181, 0.07428, 0.07654, 0.07863],
        0.3: [0.02921, 0.03165, 0.03395, 0.03589, 0.03760, 0.03917, 0.04060, 0.04194],
        0.4: [0.01846, 0.02017, 0.02179, 0.02318, 0.02441, 0.02554, 0.02659, 0.02757],
        0.5: [0.01315, 0.01445, 0.01569, 0.01677, 0.01773, 0.01862, 0.01944, 0.02021],
    },
    "analytic": {
        0.1: [0.1254, 0.1703, 0.2386, 0.3313, 0.4578, 0.6334, 0.8765, 1.2151],
        0.2: [0.0586, 0.0798, 0.1120, 0.1556, 0.2151, 0.2976, 0.4112, 0.5686],
        0.3: [0.0375, 0.0510, 0.0718, 0.0999, 0.1382, 0.1913, 0.2644, 0.3655],
        0.4: [0.0272, 0.0371, 0.0523, 0.0729, 0.1009, 0.1397, 0.1932, 0.2672],
        0.5: [0.0212, 0.0290, 0.0409, 0.0570, 0.0790, 0.1095, 0.1515, 0.2095],
    },
    "bbghs": {
        0.1: [0.1394, 0.1887, 0.2636, 0.3650, 0.5030, 0.6942, 0.9582, 1.3252],
        0.3: [0.0422, 0.0573, 0.0803, 0.1113, 0.1535, 0.2118, 0.2919, 0.4024],
        0.5: [0.0241, 0.0328, 0.0460, 0.0639, 0.0883, 0.1219, 0.1681, 0.2318],
    },
    "markov": {
        0.1: [0.1927, 0.2553, 0.3486, 0.4725, 0.6379, 0.8632, 1.1688, 1.5867],
        0.3: [0.0641, 0.0848, 0.1156, 0.1564, 0.2107, 0.2843, 0.3833, 0.5175],
        0.5: [0.0384, 0.0508, 0.0693, 0.0937, 0.1262, 0.1701, 0.2292, 0.3092],
    },
}
# Spec 004 Sec. 5.4, Fig. 1: (rho, sigma) -> (t*, median, p80); None = "> 200".
FIG1_SPEC = {(0.5, 0.2): (29, 9, 33), (0.5, 0.3): (37, 4, 13), (0.65, 0.2): (66, 22, 94),
             (0.65, 0.3): (65, 7, 22), (0.75, 0.2): (137, 43, None), (0.75, 0.3): (102, 9, 33)}


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    (folder,) = reproduce("lebensold2024-gaussian-selection", quick=True, out_dir=tmp_path_factory.mktemp("reproduce"), progress=False)
    return folder


@pytest.fixture(scope="module")
def results(study_dir):
    return json.loads((study_dir / "results.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def parts(results):
    return results["parts"]


def test_study_is_registered():
    assert "lebensold2024-gaussian-selection" in [s.name for s in list_studies()]


def test_folder_has_every_file(study_dir, parts):
    names = {p.name for p in study_dir.iterdir()}
    assert {"report.md", "results.json", "results.csv", "rnm_offline.csv", "fsrc_runs.csv", "metadata.json"} <= names
    assert QUICK_PNGS <= names
    assert {name for part in parts.values() for name in part["figures"]} == QUICK_PNGS


@pytest.mark.parametrize("name", sorted(QUICK_PNGS))
def test_plots_are_valid_nontrivial_pngs(study_dir, name):
    from matplotlib.image import imread

    path = study_dir / name
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 20_000  # curves, labels and legends: far more than a blank canvas (~5 kB)
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] >= 300 and image.shape[1] >= 500
    rgb = (image[..., :3] * 255).astype(np.uint32)
    colours = np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2])
    assert colours.size > 50  # not blank: curves and markers in several colours


def test_report_has_results_comparison_and_differences(study_dir, parts):
    report = (study_dir / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# ")
    for needle in ("QUICK", "## What was run", "## Results", "## Ours vs reference values",
                   "## Where and why the numbers differ from the paper", "**Log of the ratio**",
                   "**Theorem 10 typo**", "**FSRC counterexample and the sound δ**",
                   "**Baseline calibration fairness**", "**Data-dependent normalisation**",
                   "Thm 11 (Algorithm 2); see docs/errata.md", "App. B.3, Fig. 16; see docs/errata.md",
                   "Sec. 4.1, App. B.3; see docs/errata.md",
                   "SYNTHETIC", "Lap(2Δ/ε)", "Lap(dΔ/ε)", "Seed 240206137"):
        assert needle in report, needle
    for name in QUICK_PNGS:
        assert f"]({name})" in report, name
    # Markdown tables: every row of a table has as many cells as its header.
    lines = report.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            width = lines[i - 1].count("|")
            j = i + 1
            while j < len(lines) and lines[j].startswith("| "):
                assert lines[j].count("|") == width, lines[j]
                j += 1


def test_figure7_matches_spec_to_1e4(parts):
    fig7 = parts["figures7_8"]["figure7"]
    assert fig7["d"] == FIG7_D
    for kind, table in FIG7_SPEC.items():
        values = np.array(fig7[kind])
        for sigma, expected in table.items():
            row = values[fig7["sigmas"].index(sigma)]
            np.testing.assert_allclose(row, expected, rtol=0, atol=1e-4, err_msg=f"{kind}, sigma={sigma}")
    pure = np.array(fig7["pure"])
    assert (np.diff(pure, axis=1) > 0).all() and (np.diff(pure, axis=0) < 0).all()
    # Spec 5.3: the pure bound is worse than the analytic Gaussian exactly at sigma = 0.1, d = 16 and 28.
    assert parts["figures7_8"]["pure_worse_than_analytic"] == [[0.1, 16], [0.1, 28]]


def test_expost_increases_with_t_at_every_threshold(parts):
    fig2 = parts["figure2"]
    post = np.array(fig2["epsilon_post"])
    assert fig2["times"] == [1, 2, 3, 5, 10, 20, 50, 100] and post.shape == (8, len(fig2["thresholds"]))
    assert (np.diff(post, axis=0) > 0).all()
    assert fig2["increasing_in_t"] is True
    # t = 1 grows with rho; t = 2 is smallest at rho = (a + b)/2 (spec 7.4).
    assert (np.diff(post[0]) > 0).all()
    assert fig2["t2_argmin_threshold"] == pytest.approx(0.5)
    np.testing.assert_allclose(post[2, [0, 5, 10]], [0.02889, 0.02536, 0.02271], rtol=0, atol=1e-5)
    growth = fig2["growth"]["epsilon_post"]
    assert np.all(np.diff(growth) > 0) and growth[-1] == pytest.approx(0.16362, abs=1e-5)


def test_monte_carlo_rnm_within_five_standard_errors_of_quadrature(parts):
    # |MC - quadrature| < 5 SE fails with probability about 6e-7 per point when the estimator is unbiased
    # and the SE is right; SE < 2e-3 keeps the band meaningful (the band would be vacuous for the paper's
    # plain estimator).
    for record in parts["figure3"]["records"]:
        assert 0 < record["mc_se"] < 2e-3, record
        assert abs(record["mc"] - record["quadrature"]) < 5 * record["mc_se"], record
    quadrature = [r["quadrature"] for r in parts["figure3"]["records"]]
    np.testing.assert_allclose(quadrature, [0.12594, 0.17443, 0.22036, 0.26614, 0.30067, 0.33636, 0.35867, 0.37829,
                                            0.40127, 0.41699], rtol=0, atol=1e-5)


def test_figure1_stopping_times_and_crossings(parts):
    fig1 = parts["figure1"]
    for curve in fig1["curves"]:
        t_star, median, p80 = FIG1_SPEC[(curve["threshold"], curve["sigma"])]
        assert (curve["t_star"], curve["median"]) == (t_star, median), curve["threshold"]
        if p80 is None:
            assert curve["p80"] > 200 and curve["survival_200"] == pytest.approx(0.205, abs=5e-4)
        else:
            assert curve["p80"] == p80
        post = np.array(curve["epsilon_post"])
        assert (np.diff(post) > 0).all()
        # t* is the crossing: ex-post below ex-ante up to t*, above after.
        assert post[t_star - 1] < curve["ex_ante_bbghs"] < post[t_star]
    for simulation in fig1["simulations"]:
        assert simulation["within_dkw"] and simulation["max_survival_deviation"] <= simulation["dkw_bound"]
        assert abs(simulation["median_mc"] - simulation["median_exact"]) <= 2
    heat = fig1["heatmap"]
    assert np.array(heat["epsilon_post"]).shape == (3, len(heat["sigmas"]), 20)


def test_fsrc_respects_budget_and_f1_is_a_rate(parts):
    for dataset in parts["fsrc_online"]["datasets"]:
        budget = dataset["budget"]
        for entry in dataset["entries"]:
            for name in ("fsrc", "fsrc_budget"):
                summary = entry[name]
                assert all(0.0 <= f <= 1.0 for f in summary["per_run"]["f1"])
                assert all(s > 0 for s in summary["per_run"]["spent"])
                assert np.all(np.diff(summary["spent_by_step_mean"]) >= -1e-12)
            for summary in list(entry["whitehouse"].values()) + list(entry["whitehouse_budget"].values()):
                assert all(0.0 <= f <= 1.0 for f in summary["per_run"]["f1"])
            # FSRC with a budget (Algorithm 4): every run it admitted had spent + eps_max_j < budget, and every
            # halt had spent + eps_max_j >= budget, on every released transcript. The realised spend then stays
            # below budget + (largest ex-post loss of one run - eps_max_1): the last admitted run is charged its
            # realised eps_post(t), which can exceed its eps_max (spec 4.3), so "spend <= budget" is not an
            # invariant of FSRC; it holds for the Whitehouse filter, whose spend is charged in advance.
            rule = entry["fsrc_budget_rule"]
            assert rule["holds"] is True and rule["max_admitted_total"] < budget, rule
            assert rule["min_halting_total"] is None or rule["min_halting_total"] >= budget, rule
            assert max(entry["fsrc_budget"]["per_run"]["spent"]) < budget + rule["excess_allowance"]
            assert entry["fsrc_budget"]["max_spent_by_step"] < budget + rule["excess_allowance"]
            for summary in entry["whitehouse_budget"].values():
                assert summary["max_spent_by_step"] <= budget
            # Same keys, no budget: the filters release the same bits, so F1 agrees; the sound schedule never
            # uses more delta than 1/N, the paper's constant-delta rule uses (number of runs) / N.
            assert entry["fsrc"]["per_run"]["f1"] == entry["whitehouse"]["markov"]["per_run"]["f1"]
            assert entry["fsrc"]["delta_used"]["max"] <= dataset["delta"]
            assert entry["paper_mode_delta_used"]["mean"] > 10 * dataset["delta"]
            assert entry["paper_mode_same_release"] is True


def test_offline_rnm_numbers_are_sane(parts):
    records = parts["rnm_offline"]["records"]
    config = gaussian_selection_config(quick=True)["rnm_offline"]
    jobs = [(ds["name"], d) for ds in config["datasets"] for d in ds["d"]]
    assert len(records) == len(jobs) * len(config["sigmas"]) * 5
    summaries = {(s["dataset"], s["d"]): s for s in parts["rnm_offline"]["datasets"]}
    for r in records:
        uniform = summaries[(r["dataset"], r["d"])]["uniform_accuracy"]
        assert r["accuracy"] <= 1.0 and r["accuracy"] > uniform - 4 * r["accuracy_se"] - 1e-12, r
        assert r["accuracy_se"] >= 0 and r["trials"] == config["trials"]
        assert r["epsilon"] == r["epsilon_pure"] > 0
    # Spec 7.9: at equal epsilon the standard calibrations beat Gaussian RNM and the post-processing Laplace.
    at = {r["mechanism"]: r for r in records if r["dataset"] == "bikes" and r["d"] == 365 and r["sigma"] == 0.1}
    for mechanism in ("laplace_standard", "exponential_mechanism", "permute_and_flip"):
        assert at[mechanism]["accuracy"] > at["gaussian"]["accuracy"] > at["laplace_post_processing"]["accuracy"]
    assert at["gaussian"]["epsilon_pure"] == pytest.approx(0.0353, abs=5e-5)


def test_deterministic_comparisons_all_agree_and_csv_equals_json(study_dir, results):
    comparisons = results["comparisons"]
    assert len(comparisons) > 250
    deterministic = [r for r in comparisons if not r["note"]]
    assert deterministic and all(r["status"] == "ok" for r in deterministic), \
        [r for r in deterministic if r["status"] != "ok"]
    with open(study_dir / "results.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [row["quantity"] for row in rows] == [r["quantity"] for r in comparisons]
    assert [row["status"] for row in rows] == [r["status"] for r in comparisons]


def test_metadata_records_configuration_and_provenance(study_dir):
    meta = json.loads((study_dir / "metadata.json").read_text())
    assert meta["study"] == "lebensold2024-gaussian-selection" and meta["quick"] is True and meta["seed"] == 240206137
    assert meta["parameters"] == gaussian_selection_config(quick=True)
    assert set(meta["part_wall_s"]) == set(meta["parameters"]["parts"])
    for key in ("git_sha", "jax_version", "device_kind", "wall_s"):
        assert key in meta, key
    assert set(meta["files"]) == {p.name for p in study_dir.iterdir()}


def test_configs():
    quick, full = gaussian_selection_config(quick=True), gaussian_selection_config(quick=False)
    assert full["figure1"]["simulation_trials"] == 10_000 and len(full["figure1"]["heatmap_sigmas"]) == 20
    assert full["rnm_offline"]["trials"] == 1000 and full["fsrc_online"]["runs"] == 50
    assert {ds["name"] for ds in full["rnm_offline"]["datasets"]} == {"bikes", "lcl-synthetic", "near-synthetic"}
    assert full["fsrc_online"]["datasets"][1]["num_days"] == 829
    assert quick["figures7_8"]["d"] == full["figures7_8"]["d"] == FIG7_D
    with pytest.raises(TypeError, match="quick must be True or False"):
        gaussian_selection_config(quick=1)
    with pytest.raises(ValueError, match="unknown gaussian-selection part 'figure4'"):
        run_gaussian_selection_part("figure4", "unused")
