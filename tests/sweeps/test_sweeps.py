"""run_sweep: grid expansion, results rows, determinism, resume after a real kill, config errors."""

import fcntl
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from gpuprivacy.datasets import bikes_daily_queries
from gpuprivacy.sweeps import (
    SweepConfigError,
    SweepData,
    SweepParameter,
    SweepResultsError,
    cell_key,
    expand_sweep,
    list_sweep_datasets,
    list_sweep_mechanisms,
    register_sweep_dataset,
    register_sweep_mechanism,
    run_sweep,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = 20261123


def rnm_config(**overrides):
    config = {
        "name": "test",
        "seed": SEED,
        "trials": 50,
        "mechanism": {"name": "report-noisy-max", "noise": ["laplace", "gumbel", "exponential"],
                      "epsilon": [0.01, 1]},
        "dataset": {"name": "bikes-daily", "d": [90, 365]},
    }
    config.update(overrides)
    return config


def read_rows(path):
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]


def metrics_by_id(rows):
    return {row["cell_id"]: row["metrics"] for row in rows}


# ---------------------------------------------------------------- grid expansion


def test_grid_is_the_cartesian_product_in_order():
    cells = expand_sweep(rnm_config(trials=[10, 20]))
    assert len(cells) == 3 * 2 * 2 * 2
    assert len({c.cell_id for c in cells}) == len(cells)
    first = cells[0]
    assert first.mechanism == "report-noisy-max" and first.dataset == "bikes-daily" and first.seed == SEED
    # Canonical params: ints become floats for epsilon, defaults are filled in.
    assert first.mechanism_params == {"epsilon": 0.01, "noise": "laplace", "monotonic": False}
    assert [c.num_trials for c in cells[:2]] == [10, 20]
    assert [c.dataset_params["d"] for c in cells[:4]] == [90, 90, 365, 365]
    assert cells[4].mechanism_params["epsilon"] == 1.0 and cells[8].mechanism_params["noise"] == "gumbel"
    grid = {(c.mechanism_params["noise"], c.mechanism_params["epsilon"], c.dataset_params["d"], c.num_trials)
            for c in cells}
    assert grid == {(n, e, d, t) for n in ("laplace", "gumbel", "exponential") for e in (0.01, 1.0)
                    for d in (90, 365) for t in (10, 20)}


def test_cell_id_is_a_stable_hash_of_the_canonical_cell():
    cell = expand_sweep(rnm_config(mechanism={"name": "report-noisy-max", "epsilon": 1, "noise": "gumbel"},
                                   dataset={"name": "bikes-daily", "d": 90}))[0]
    # Pinned: a change here silently invalidates every results file (resume would redo all cells).
    assert cell.cell_id == "933518e48f203b8d"
    # 1 and 1.0, an explicit default and an omitted one, and key order give the same cell.
    same = expand_sweep(rnm_config(dataset={"d": 90, "name": "bikes-daily"},
                                   mechanism={"monotonic": False, "epsilon": 1.0, "name": "report-noisy-max"}))
    assert same[0].cell_id == cell.cell_id
    assert expand_sweep(rnm_config(seed=SEED + 1, mechanism={"name": "report-noisy-max", "epsilon": 1},
                                   dataset={"name": "bikes-daily", "d": 90}))[0].cell_id != cell.cell_id


def test_array_of_tables_are_united():
    config = rnm_config(mechanism=[{"name": "report-noisy-max", "epsilon": [0.1, 1.0]},
                                   {"name": "report-noisy-max", "epsilon": 0.5, "noise": "laplace"}],
                        dataset=[{"name": "bikes-daily", "d": 90}, {"name": "synthetic-uniform", "d": 20}])
    cells = expand_sweep(config)
    assert len(cells) == 3 * 2
    assert {c.dataset for c in cells} == {"bikes-daily", "synthetic-uniform"}
    assert cells[-1].dataset_params == {"d": 20, "seed": 0, "population": 1000.0}


def test_example_config_expands():
    cells = expand_sweep(ROOT / "experiments" / "configs" / "rnm_bikes.toml")
    assert len(cells) == 3 * 26 * 2
    assert {c.num_trials for c in cells} == {1000}


def test_registries_list_builtins():
    assert "report-noisy-max" in list_sweep_mechanisms()
    assert {"bikes-daily", "synthetic-uniform"} <= set(list_sweep_datasets())


# ---------------------------------------------------------------- bad configs


def write(tmp_path, text, name="cfg.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD_TOML = """
seed = 1
trials = 10
[mechanism]
name = "report-noisy-max"
epsilon = [0.1, 1.0]
[dataset]
name = "bikes-daily"
d = 90
"""


@pytest.mark.parametrize("old, new, expected", [
    ('name = "report-noisy-max"', 'name = "report-noisy-min"',
     r"unknown mechanism 'report-noisy-min' in key 'name' of \[mechanism\]\. Did you mean 'report-noisy-max'.*\? "
     r"Known mechanisms: .*report-noisy-max"),
    ('name = "bikes-daily"', 'name = "bikes-hourly"',
     r"unknown dataset 'bikes-hourly' in key 'name' of \[dataset\]\. Did you mean 'bikes-daily'\? Known datasets: "
     r".*bikes-daily"),
    ("epsilon = [0.1, 1.0]", "epsilom = [0.1, 1.0]",
     r"key 'epsilom' of \[mechanism\] is not a parameter of mechanism 'report-noisy-max'\. Did you mean 'epsilon'\? "
     r"Its parameters are: "
     r"epsilon \(required\).*Remove or rename the key"),
    ("d = 90", "days = 90", r"key 'days' of \[dataset\] is not a parameter of dataset 'bikes-daily'"),
    ("epsilon = [0.1, 1.0]", "epsilon = []", r"key 'epsilon' of \[mechanism\] is an empty list, so the grid has no "
     r"cells\. Give at least one value"),
    ("epsilon = [0.1, 1.0]", "epsilon = [0.1, -1.0]", r"key 'epsilon' of \[mechanism\] has the invalid value -1\.0 "
     r"\(item 2 of the list\): epsilon must be finite and > 0.*epsilon = \[0\.01, 0\.1, 1\.0\]"),
    ("epsilon = [0.1, 1.0]", "epsilon = 0", r"key 'epsilon' of \[mechanism\] has the invalid value 0: epsilon must "
     r"be finite and > 0"),
    ("epsilon = [0.1, 1.0]", 'epsilon = "1"', r"key 'epsilon' of \[mechanism\] has the invalid value '1': epsilon "
     r"must be a real number"),
    ("epsilon = [0.1, 1.0]", "noise = 'laplace'", r"\[mechanism\] does not set 'epsilon', which mechanism "
     r"'report-noisy-max' requires\. Add e\.g\. epsilon = "),
    ("trials = 10", "trials = 0",
     r"key 'trials' has the invalid value 0: trials must be >= 1, got 0\. .*trials = 1000"),
    ("trials = 10", "trials = [10, -5]", r"key 'trials' has the invalid value -5"),
    ("trials = 10", "trials = 2.5", r"key 'trials' has the invalid value 2\.5: trials must be an integer"),
    ("trials = 10", "", r"no 'trials' key\. Add e\.g\. trials = 1000"),
    ("seed = 1", "", r"no 'seed' key\. Add e\.g\. seed = "),
    ("seed = 1", "seed = -3", r"key 'seed' has the invalid value -3"),
    ("seed = 1", "seed = 1\nsed = 2", r"unknown top-level key\(s\) \['sed'\]\. Allowed:"),
    ("d = 90", "d = 1000", r"key 'd' of \[dataset\] has the invalid value 1000: d must be <= 731"),
    ("epsilon = [0.1, 1.0]", "epsilon = 1\nnoise = 'gaussian'", r"key 'noise' of \[mechanism\] has the invalid "
     r"value 'gaussian': noise must be one of \('laplace', 'gumbel', 'exponential'\)"),
    ("epsilon = [0.1, 1.0]", "epsilon = 1\nmonotonic = 'no'", r"key 'monotonic' of \[mechanism\] .*true or false"),
    ("epsilon = [0.1, 1.0]", "epsilon = [1, 1.0]", r"the grid lists the same cell twice"),
    ('[dataset]\nname = "bikes-daily"\nd = 90', "", r"no \[dataset\] table"),
    ('name = "bikes-daily"\n', "", r"\[dataset\] has no 'name' key"),
    ("epsilon = [0.1, 1.0]", "epsilon = [0.1, [1.0]]", r"key 'epsilon' of \[mechanism\] holds \[1\.0\]"),
    ("seed = 1", "seed = = 1", r"cfg\.toml: not valid TOML"),
])
def test_bad_config_names_the_key_and_the_fix(tmp_path, old, new, expected):
    assert old in GOOD_TOML
    path = write(tmp_path, GOOD_TOML.replace(old, new, 1))
    with pytest.raises(SweepConfigError, match=expected) as info:
        run_sweep(path, results_path=tmp_path / "out.jsonl", progress=False)
    assert str(path) in str(info.value)
    assert not (tmp_path / "out.jsonl").exists()  # nothing is written for a bad config


def test_good_toml_runs_and_errors_name_array_tables(tmp_path):
    assert run_sweep(write(tmp_path, GOOD_TOML), results_path=tmp_path / "ok.jsonl", progress=False).num_cells == 2
    text = GOOD_TOML.replace("[mechanism]", "[[mechanism]]").replace(
        "[dataset]", '[[mechanism]]\nname = "report-noisy-max"\nepsilon = -1\n[dataset]')
    with pytest.raises(SweepConfigError, match=r"key 'epsilon' of the 2nd \[\[mechanism\]\] table"):
        expand_sweep(write(tmp_path, text))


def test_missing_config_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_sweep(tmp_path / "nope.toml")


# ---------------------------------------------------------------- results file


def test_results_rows_carry_parameters_metrics_and_provenance(tmp_path):
    path = tmp_path / "r.jsonl"
    summary = run_sweep(rnm_config(), results_path=path, progress=False)
    assert summary.num_cells == 12 and summary.num_computed == 12 and summary.num_skipped == 0
    assert summary.results_path == path and summary.name == "test"
    rows = read_rows(path)
    assert len(rows) == 12 and rows == summary.rows
    cells = expand_sweep(rnm_config())
    assert [r["cell_id"] for r in rows] == [c.cell_id for c in cells]
    for row, cell in zip(rows, cells, strict=True):
        assert row["mechanism"] == "report-noisy-max" and row["mechanism_params"] == cell.mechanism_params
        assert row["dataset"] == "bikes-daily" and row["dataset_params"] == cell.dataset_params
        assert row["seed"] == SEED and row["num_trials"] == 50 and row["sweep"] == "test"
        assert row["num_queries"] == cell.dataset_params["d"] and row["query_max"] == 1.0
        assert row["sensitivity"] == 1 / 6946
        for key in ("git_sha", "git_dirty", "jax_version", "jaxlib_version", "device_kind", "timestamp",
                    "gpuprivacy_version", "backend", "cell_wall_s"):
            assert key in row
        assert row["jax_version"] and row["device_kind"] and row["timestamp"].endswith("+00:00")
        m = row["metrics"]
        assert set(m) == {"accuracy", "accuracy_se", "prob_true_argmax", "prob_true_argmax_se",
                          "mean_selected_query"}
        assert 0 <= m["accuracy"] <= 1 and 0 <= m["prob_true_argmax"] <= 1 and m["accuracy_se"] >= 0
        if row["mechanism_params"]["epsilon"] == 1.0:  # noise scale 2.9e-4, below the top gaps (1e-3, 1.8e-2)
            # P(miss the argmax) <= ~0.05 per trial at d = 90, so with 50 trials
            # P(prob_true_argmax <= 0.6) = P(Bin(50, 0.05) >= 20) < 1e-6; misses cost <= 1e-3 each.
            assert m["accuracy"] > 0.998 and m["prob_true_argmax"] > 0.6
        else:
            assert m["accuracy"] < 1.0


def test_git_sha_is_recorded_in_a_checkout(tmp_path):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    row = run_sweep(rnm_config(trials=2), results_path=tmp_path / "g.jsonl", progress=False).rows[0]
    assert row["git_sha"] == sha.strip()


def test_default_results_path_is_results_stem_jsonl(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, GOOD_TOML, name="my_grid.toml")
    summary = run_sweep(path, progress=False)
    assert summary.results_path == pathlib.Path("results") / "my_grid.jsonl"
    assert len(read_rows(tmp_path / "results" / "my_grid.jsonl")) == 2


# ---------------------------------------------------------------- metric correctness


def test_metrics_match_exact_exponential_mechanism_probabilities(tmp_path):
    # Two queries, gap g: Gumbel noise is the exponential mechanism, so
    # P(top) = 1 / (1 + exp(-eps g / (2 Delta))) exactly; eq. (39) gives
    # accuracy = 1 - (1 - p_hat) g / q_max with no sampling error of its own.
    gap, population = 0.01, 1000.0
    register_sweep_dataset("test-two-queries", lambda p: SweepData(np.array([0.5, 0.5 + gap]), 1 / population, 2.0),
                           replace=True)
    epsilon, trials = 0.2, 20000
    config = {"seed": 7, "trials": trials, "dataset": {"name": "test-two-queries"},
              "mechanism": {"name": "report-noisy-max", "noise": "gumbel", "epsilon": epsilon}}
    m = run_sweep(config, results_path=tmp_path / "t.jsonl", progress=False).rows[0]["metrics"]
    p = 1 / (1 + math.exp(-epsilon * gap * population / 2))
    se = math.sqrt(p * (1 - p) / trials)
    assert abs(m["prob_true_argmax"] - p) < 5 * se  # fails with probability ~6e-7 when correct
    assert m["prob_true_argmax_se"] == pytest.approx(math.sqrt(m["prob_true_argmax"] * (1 - m["prob_true_argmax"])
                                                               / trials))
    assert m["accuracy"] == pytest.approx(1 - (1 - m["prob_true_argmax"]) * gap / 2.0, rel=1e-12)


def test_tiny_epsilon_gives_uniform_random_accuracy(tmp_path):
    # Noise scale 2/6946/1e-7 ~ 2900 >> range 1: selection is uniform, and eq. (39)
    # accuracy must be 0.7285 on the first 365 days (spec 004 Sec 5.5).
    config = rnm_config(trials=4000, mechanism={"name": "report-noisy-max", "noise": "laplace", "epsilon": 1e-7},
                        dataset={"name": "bikes-daily", "d": 365})
    m = run_sweep(config, results_path=tmp_path / "u.jsonl", progress=False).rows[0]["metrics"]
    q = bikes_daily_queries(365)
    assert abs(m["accuracy"] - (1 - np.mean(q.max() - q))) < 5 * m["accuracy_se"]
    assert abs(m["prob_true_argmax"] - 1 / 365) < 5 * math.sqrt(1 / 365 / 4000)


def test_custom_mechanism_receives_params_and_trials(tmp_path):
    seen = []

    def probe(key, queries, params, num_trials):
        seen.append((params, num_trials, queries.shape))
        return {"sum": float(np.asarray(queries).sum()) * params["scale"], "nan": float("nan")}

    register_sweep_mechanism("test-probe", probe, parameters={"scale": SweepParameter(float, default=1.0)},
                             replace=True)
    rows = run_sweep({"seed": 0, "trials": 3, "mechanism": {"name": "test-probe", "scale": [1, 2]},
                      "dataset": {"name": "synthetic-uniform", "d": 5, "population": 10}},
                     results_path=tmp_path / "p.jsonl", progress=False).rows
    assert [r["metrics"]["nan"] for r in rows] == [None, None]  # NaN is stored as null
    assert rows[1]["metrics"]["sum"] == pytest.approx(2 * rows[0]["metrics"]["sum"])
    assert seen[0] == ({"scale": 1.0, "sensitivity": 0.1, "query_max": 1.0}, 3, (5,))


# ---------------------------------------------------------------- determinism and resume


def test_same_config_same_metrics_independent_of_grid_and_order(tmp_path):
    a = run_sweep(rnm_config(), results_path=tmp_path / "a.jsonl", progress=False).rows
    b = run_sweep(rnm_config(), results_path=tmp_path / "b.jsonl", progress=False).rows
    assert metrics_by_id(a) == metrics_by_id(b)
    # A reordered sub-grid computes the shared cells identically (keys come from the cell id).
    sub = rnm_config(mechanism={"name": "report-noisy-max", "noise": ["exponential", "laplace"], "epsilon": 0.01},
                     dataset={"name": "bikes-daily", "d": [365, 90]})
    c = metrics_by_id(run_sweep(sub, results_path=tmp_path / "c.jsonl", progress=False).rows)
    assert len(c) == 4 and all(metrics_by_id(a)[cid] == m for cid, m in c.items())
    # Another seed gives other numbers.
    d = run_sweep(rnm_config(seed=SEED + 1), results_path=tmp_path / "d.jsonl", progress=False).rows
    assert [r["metrics"] for r in d] != [r["metrics"] for r in a]


def test_resume_skips_present_cells_and_refuses_another_config(tmp_path):
    # A results file holds one config (issue 29): a rerun resumes it; another config (another seed, or a grid
    # that grew) is refused, naming both digests, and writes nothing (tests/sweeps/test_results_binding.py).
    path = tmp_path / "r.jsonl"
    small = rnm_config(mechanism={"name": "report-noisy-max", "noise": "laplace", "epsilon": [0.01, 1]})
    first = run_sweep(small, results_path=path, progress=False)
    assert first.num_computed == 4
    for other in (rnm_config(seed=3, trials=5), rnm_config()):
        with pytest.raises(SweepResultsError, match="another config"):
            run_sweep(other, results_path=path, progress=False)
    again = run_sweep(small, results_path=path, progress=False)
    assert again.num_computed == 0 and again.num_skipped == 4 and again.rows == first.rows
    ids = [r["cell_id"] for r in read_rows(path)]
    assert len(ids) == len(set(ids)) == 4


def test_truncated_last_line_is_repaired(tmp_path):
    path = tmp_path / "t.jsonl"
    reference = run_sweep(rnm_config(), results_path=tmp_path / "ref.jsonl", progress=False)
    lines = (tmp_path / "ref.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:5]) + lines[5][:37])  # a kill in the middle of row 6
    summary = run_sweep(rnm_config(), results_path=path, progress=False)
    assert summary.num_skipped == 5 and summary.num_computed == 7
    rows = read_rows(path)
    assert [r["cell_id"] for r in rows] == [r["cell_id"] for r in reference.rows]
    assert metrics_by_id(rows) == metrics_by_id(reference.rows)


def test_damaged_middle_line_is_an_error(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"cell_id": "a", "metrics": {}}\nnot json\n{"cell_id": "b", "metrics": {}}\n')
    with pytest.raises(SweepResultsError, match=r"x\.jsonl, line 2, is not a sweep results row.*move it aside"):
        run_sweep(rnm_config(), results_path=path, progress=False)
    assert path.read_text().count("\n") == 3  # untouched


def test_row_whose_parameters_contradict_its_id_is_an_error(tmp_path):
    path = tmp_path / "e.jsonl"
    run_sweep(rnm_config(), results_path=path, progress=False)
    rows = read_rows(path)
    rows[3]["mechanism_params"]["epsilon"] = 123.0  # a hand edit that keeps the id
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SweepResultsError, match=r"line 4 \(cell .*\): the row was changed after it was written"):
        run_sweep(rnm_config(), results_path=path, progress=False)
    del rows[3]["digest"]  # a row without a digest (an older file): the parameter check still catches it
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SweepResultsError, match=f"the row with cell_id {rows[3]['cell_id']} has parameters"):
        run_sweep(rnm_config(), results_path=path, progress=False)


def test_a_hand_edited_metric_is_detected_by_its_digest(tmp_path):
    path = tmp_path / "m.jsonl"
    run_sweep(rnm_config(), results_path=path, progress=False)
    lines = path.read_text().splitlines()
    row = json.loads(lines[6])
    key = sorted(row["metrics"])[0]
    row["metrics"][key] = 0.123456  # plausible, silent: only the digest can tell
    lines[6] = json.dumps(row, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SweepResultsError, match=r"line 7 .*changed after it was written"):
        run_sweep(rnm_config(), results_path=path, progress=False)


def test_a_duplicated_row_is_named_and_never_counted_twice(tmp_path):
    path = tmp_path / "d.jsonl"
    run_sweep(rnm_config(), results_path=path, progress=False)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[2]]) + "\n")  # 13 lines for 12 cells
    with pytest.raises(SweepResultsError, match=rf"line {len(lines) + 1}, repeats cell .* of line 3"):
        run_sweep(rnm_config(), results_path=path, progress=False)


def test_the_cli_reports_a_damaged_or_locked_results_file_without_a_traceback(tmp_path, capsys):
    import fcntl
    import os

    from gpuprivacy.cli import main

    config = tmp_path / "c.toml"
    config.write_text(GOOD_TOML)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text('{"cell_id": "a"}\nnot json\n')
    assert main(["sweep", str(config), "--results", str(damaged), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "line 2, is not a sweep results row" in err and "Traceback" not in err
    locked = tmp_path / "locked.jsonl"
    locked.write_text("")
    fd = os.open(locked, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert main(["sweep", str(config), "--results", str(locked), "--no-progress"]) == 2
        assert "locked" in capsys.readouterr().err
    finally:
        os.close(fd)


def test_cell_keys_accept_the_full_seed_range():
    a = cell_key(2**63 - 1, "ffffffffffffffff")
    b = cell_key(2**63 - 1, "ffffffff00000000")
    c = cell_key(0, "ffffffffffffffff")
    data = [np.asarray(jax.random.key_data(k)).tolist() for k in (a, b, c)]
    assert len({str(x) for x in data}) == 3
    assert expand_sweep(rnm_config(seed=2**63 - 1))[0].seed == 2**63 - 1


def test_locked_results_file_is_refused(tmp_path):
    path = tmp_path / "l.jsonl"
    path.touch()
    with open(path, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(SweepResultsError, match="being written by another sweep"):
            run_sweep(rnm_config(), results_path=path, progress=False)


def test_progress_bar_draws_to_a_terminal(tmp_path, monkeypatch):
    class FakeTTY:
        def __init__(self):
            self.text = []

        def write(self, s):
            self.text.append(s)

        def flush(self):
            pass

        def isatty(self):
            return True

    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    summary = run_sweep(rnm_config(), results_path=tmp_path / "p.jsonl", progress=True)
    total = sum(row["num_trials"] for row in summary.rows)  # the bar counts trials, with an ETA
    assert "sweep test [" in "".join(tty.text) and f"{total}/{total}" in "".join(tty.text)
    assert "eta" in "".join(tty.text)


KILL_TOML = """
name = "kill"
seed = 11
trials = 1000
[mechanism]
name = "report-noisy-max"
noise = "laplace"
epsilon = [0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0]
[dataset]
name = "synthetic-uniform"
d = 500
seed = [1, 2, 3]
"""


def test_resume_after_a_real_sigkill(tmp_path):
    config = write(tmp_path, KILL_TOML)
    total = len(expand_sweep(config))
    killed = tmp_path / "killed.jsonl"
    # The child's mechanism sleeps 40 ms per batched call (once per cell here), so the kill lands
    # mid-sweep on any hardware; sleeping does not change the numbers, which must equal a clean run's.
    code = ("import time\n"
            "import gpuprivacy.mechanisms as mechanisms\n"
            "real = mechanisms.report_noisy_max\n"
            "def slow(*args, **kwargs):\n"
            "    time.sleep(0.04)\n"
            "    return real(*args, **kwargs)\n"
            "mechanisms.report_noisy_max = slow\n"
            "from gpuprivacy.sweeps import run_sweep\n"
            f"run_sweep({str(config)!r}, results_path={str(killed)!r}, progress=False)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    stderr_path = tmp_path / "stderr.txt"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=stderr)
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and proc.poll() is None:
            if killed.exists() and killed.read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"the sweep ended before it was killed: {stderr_path.read_text()[-2000:]}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    rows_at_kill = killed.read_bytes().count(b"\n")
    assert 3 <= rows_at_kill < total, "the kill must land in the middle of the sweep"

    resumed = run_sweep(config, results_path=killed, progress=False)
    assert resumed.num_skipped == rows_at_kill and resumed.num_computed == total - rows_at_kill
    rows = read_rows(killed)
    ids = [r["cell_id"] for r in rows]
    assert len(ids) == total and len(set(ids)) == total  # every cell exactly once
    assert set(ids) == {c.cell_id for c in expand_sweep(config)}

    clean = run_sweep(config, results_path=tmp_path / "clean.jsonl", progress=False)
    assert clean.num_computed == total
    assert metrics_by_id(rows) == metrics_by_id(clean.rows)
