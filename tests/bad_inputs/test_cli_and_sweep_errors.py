"""Bad inputs of the sweeps, the study report, the CSV loader and the level evaluator that still slipped through
(tests/bad_inputs/test_sweep_and_cli_errors.py holds the first round): each is a message naming what is wrong,
the value and the fix (exit 2 at the CLI, no traceback) before any cell or plot, and nothing is stored that a
later run would skip for good. Each test has a positive control."""

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from gpuprivacy import datasets, oracle, sweeps
from gpuprivacy.cli import main
from gpuprivacy.sweeps import _run

CONFIG_TOML = """name = "c"
seed = 1
trials = 4
[[mechanism]]
name = "laplace-median"
epsilon = 1.0
lower = -5.0
upper = 5.0
clip = true
[dataset]
name = "normal"
n = [20, 30]
"""

# Replaces the study engine so that the cell with n = 30 runs out of memory (loaded with --import).
OUT_OF_MEMORY_PLUGIN = """from gpuprivacy.sweeps import _run
_original = _run.run_cells
def run_cells(requests, data, *args, **kwargs):
    if data.n == 30:
        raise MemoryError("cannot allocate 9 GiB")
    return _original(requests, data, *args, **kwargs)
_run.run_cells = run_cells
"""


def _config(**dataset):
    return {"name": "bad-input-test", "seed": 1, "trials": 4,
            "mechanism": {"name": "laplace-median", "epsilon": 1.0, "lower": -5.0, "upper": 5.0, "clip": True},
            "dataset": {"name": "normal", "n": [20, 30], **dataset}}


def _cli(*args, cwd, env=None):
    done = subprocess.run([sys.executable, "-m", "gpuprivacy", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# --- 1. --chunk ------------------------------------------------------------------------------------

def test_a_chunk_that_is_not_a_multiple_of_the_devices_is_refused_before_any_cell(tmp_path, monkeypatch):
    # Was: every cell stored as "infeasible" ("chunk=3 must be a multiple of the 2 local devices"), skipped by
    # every later run.
    monkeypatch.setattr(jax, "local_device_count", lambda: 2)
    with pytest.raises(sweeps.SweepConfigError, match=r"chunk \(--chunk\) must be a multiple of the 2 local "
                                                      r"devices.*got 3\. Pass e\.g\. chunk=2 or chunk=4"):
        sweeps.run_sweep(_config(), results_path=tmp_path / "r.jsonl", progress=False, chunk=3)
    assert not (tmp_path / "r.jsonl").exists()
    summary = sweeps.run_sweep(_config(), results_path=tmp_path / "r.jsonl", progress=False, chunk=4)
    assert summary.num_computed == 2 and summary.num_infeasible == 0  # positive control


def test_cli_chunk_not_a_multiple_of_the_devices_exits_2(tmp_path):
    (tmp_path / "c.toml").write_text(CONFIG_TOML)
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()}
    code, _, err = _cli("sweep", "c.toml", "--chunk", "3", "--results", "r.jsonl", "--no-progress", cwd=tmp_path,
                        env=env)
    assert code == 2 and "--chunk" in err and "got 3" in err and "2 local devices" in err, err
    assert "Traceback" not in err and not (tmp_path / "r.jsonl").exists()
    code, out, err = _cli("sweep", "c.toml", "--chunk", "2", "--results", "r.jsonl", "--no-progress", cwd=tmp_path,
                          env=env)
    assert code == 0 and "num_infeasible: 0" in out, err  # positive control
    assert [row["status"] for row in _rows(tmp_path / "r.jsonl")] == ["ok", "ok"]


# --- 2. data-law parameters ------------------------------------------------------------------------

def test_a_bad_data_law_is_refused_before_the_results_file_is_created(tmp_path):
    # Was: refused, but only after the results folder and an empty results file had been created.
    results = tmp_path / "out" / "r.jsonl"
    with pytest.raises(sweeps.SweepConfigError, match=r"dataset 'student-t' with parameters .*'df': 0\.0.*df must "
                                                      r"be finite and > 0, got 0\.0.*\[dataset\] table"):
        sweeps.run_sweep(_config(name="student-t", df=0), results_path=results, progress=False)
    assert not results.parent.exists()
    summary = sweeps.run_sweep(_config(name="student-t", df=3), results_path=results, progress=False)
    assert summary.num_computed == 2 and len(_rows(results)) == 2  # positive control


# --- 3. out of memory ------------------------------------------------------------------------------

def test_an_out_of_memory_cell_is_not_stored_and_the_rerun_computes_it(tmp_path, monkeypatch):
    original = _run.run_cells

    def run_cells(requests, data, *args, **kwargs):
        if data.n == 30:
            raise MemoryError("cannot allocate 9 GiB")
        return original(requests, data, *args, **kwargs)

    monkeypatch.setattr(_run, "run_cells", run_cells)
    results = tmp_path / "r.jsonl"
    with pytest.warns(sweeps.SweepMemoryWarning, match=r"1 cell\(s\) ran out of device memory and were not saved "
                                                       r".*'n': 30.*MemoryError: cannot allocate 9 GiB.*smaller "
                                                       r"--chunk"):
        summary = sweeps.run_sweep(_config(), results_path=results, progress=False)
    assert (summary.num_computed, summary.num_out_of_memory, summary.num_infeasible) == (1, 1, 0)
    assert [row["dataset_params"]["n"] for row in _rows(results)] == [20]  # no row that a rerun would skip
    monkeypatch.setattr(_run, "run_cells", original)
    again = sweeps.run_sweep(_config(), results_path=results, progress=False)
    assert (again.num_computed, again.num_skipped, again.num_out_of_memory) == (1, 1, 0)
    assert [(row["dataset_params"]["n"], row["status"]) for row in again.rows] == [(20, "ok"), (30, "ok")]


def test_an_out_of_memory_summarising_cell_is_not_stored_and_the_rerun_computes_it(tmp_path, monkeypatch):
    # Was: XLA's RESOURCE_EXHAUSTED in a summarising cell (report-noisy-max) ended the sweep with a traceback.
    config = {"name": "rnm", "seed": 1, "trials": 4, "mechanism": {"name": "report-noisy-max", "epsilon": 1.0},
              "dataset": {"name": "bikes-daily", "d": [90, 365]}}
    original = _run._cell_row

    def cell_row(cell, entry, data_cache):
        if cell.dataset_params["d"] == 365:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9663676416 bytes.")
        return original(cell, entry, data_cache)

    monkeypatch.setattr(_run, "_cell_row", cell_row)
    results = tmp_path / "r.jsonl"
    with pytest.warns(sweeps.SweepMemoryWarning, match="RESOURCE_EXHAUSTED.*smaller --chunk"):
        summary = sweeps.run_sweep(config, results_path=results, progress=False)
    assert (summary.num_computed, summary.num_out_of_memory) == (1, 1)
    monkeypatch.setattr(_run, "_cell_row", original)
    again = sweeps.run_sweep(config, results_path=results, progress=False)
    assert (again.num_computed, again.num_out_of_memory) == (1, 0)
    assert sorted(row["dataset_params"]["d"] for row in again.rows) == [90, 365]


def test_cli_out_of_memory_is_one_paragraph_and_the_rerun_computes_the_cell(tmp_path):
    # Was: Python's warning display (the file, the line and the source line of warnings.warn).
    (tmp_path / "c.toml").write_text(CONFIG_TOML)
    (tmp_path / "oom.py").write_text(OUT_OF_MEMORY_PLUGIN)
    code, out, err = _cli("sweep", "c.toml", "--results", "r.jsonl", "--no-progress", "--chunk", "8", "--import",
                          "oom.py", cwd=tmp_path)
    assert code == 0 and "num_out_of_memory: 1" in out, err
    assert err.startswith("gpuprivacy sweep: 1 cell(s) ran out of device memory"), err
    assert "MemoryError: cannot allocate 9 GiB" in err and "smaller --chunk" in err and "this run: 8" in err
    assert "RuntimeWarning" not in err and "warnings.warn" not in err and "Traceback" not in err
    code, out, err = _cli("sweep", "c.toml", "--results", "r.jsonl", "--no-progress", cwd=tmp_path)
    assert code == 0 and "num_computed: 1" in out and "num_skipped: 1" in out and err == "", err
    assert sorted(row["dataset_params"]["n"] for row in _rows(tmp_path / "r.jsonl")) == [20, 30]


# --- 4. paths ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def results_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "r.jsonl"
    sweeps.run_sweep(_config(), results_path=path, progress=False)
    return path


@pytest.fixture
def read_only_folder(tmp_path):
    if os.geteuid() == 0:  # root writes through permission bits; a sysfs folder refuses new files even to root
        if not pathlib.Path("/sys").is_dir():
            pytest.skip("needs a folder that refuses new files: run as a normal user, or on Linux")
        yield pathlib.Path("/sys")
        return
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def _study_report(capsys, *args):
    code = main(["study", "report", *map(str, args)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_study_report_refuses_a_report_file_that_is_a_folder(tmp_path, capsys, results_file):
    # Was: an IsADirectoryError traceback after the plot was drawn.
    (tmp_path / "out" / "report.md").mkdir(parents=True)
    code, err = _study_report(capsys, results_file, "--out", tmp_path / "out")
    assert code == 2 and f"cannot write the report file {str(tmp_path / 'out' / 'report.md')!r}: it is a folder" \
        in err and "--out" in err, err
    code, err = _study_report(capsys, results_file, "--out", tmp_path / "good")
    assert code == 0 and sorted(p.name for p in (tmp_path / "good").iterdir()) == [  # positive control
        "mae_vs_n.png", "report.md", "summary.json"]


def test_study_report_refuses_a_read_only_report_folder(capsys, results_file, read_only_folder):
    # Was: a PermissionError traceback after the plot was drawn.
    code, err = _study_report(capsys, results_file, "--out", read_only_folder)
    assert code == 2 and f"cannot write in the report folder {str(read_only_folder)!r}" in err, err
    assert "writable" in err and not (read_only_folder / "report.md").exists()


def test_sweep_path_problems_name_the_path_and_the_cause(tmp_path, capsys):
    def sweep(*args):
        code = main(["sweep", *map(str, args), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
        return err

    config = tmp_path / "c.toml"
    config.write_text(CONFIG_TOML)
    (tmp_path / "a-file").write_text("not a folder\n")
    # Was: "cannot open the results file ...: File exists".
    err = sweep(config, "--results", tmp_path / "a-file" / "r.jsonl")
    assert f"{str(tmp_path / 'a-file')!r} is a file, not a folder" in err, err
    # Was: "sweep config ... does not exist".
    err = sweep(tmp_path)
    assert f"sweep config {str(tmp_path)!r} is a directory" in err, err
    # Was: "'utf-8' codec can't decode byte 0xe9 in position 11: invalid continuation byte", no file named.
    latin = tmp_path / "latin.toml"
    latin.write_bytes(CONFIG_TOML.replace('name = "c"', 'name = "caf\xe9"').encode("latin-1"))
    err = sweep(latin)
    assert f"{latin} is not UTF-8 text: byte b'\\xe9' at offset 11 (line 1)" in err and "re-save" in err, err
    # Positive control: the same config in UTF-8 is read (and its run stops at the results path, a folder).
    latin.write_text(CONFIG_TOML.replace('name = "c"', 'name = "caf\xe9"'), encoding="utf-8")
    err = sweep(latin, "--results", tmp_path)
    assert "is a directory; pass a file name" in err, err


# --- 5. a CSV that is not UTF-8 ----------------------------------------------------------------------

def test_a_latin1_csv_names_the_byte_offset_in_the_file_and_its_line(tmp_path, capsys):
    # Was: the offset within the decoder's block (7328 here, for a byte at 31904), and no line.
    text = "x,name\n" + "".join(f"{i}.0,abc\n" for i in range(3000)) + "7.0,caf\xe9\n"
    path = tmp_path / "latin.csv"
    path.write_bytes(text.encode("latin-1"))
    offset, line = text.index("\xe9"), text.count("\n", 0, text.index("\xe9")) + 1
    assert offset > 8192  # beyond the first block the text decoder reads
    expected = f"{path} is not UTF-8 text: byte b'\\xe9' at offset {offset} (line {line})"
    with pytest.raises(ValueError, match="Re-save the file as UTF-8") as info:
        datasets.load_column(path, "x")
    assert expected in str(info.value)
    argv = ["estimate", "--data", str(path), "--column", "x", "--statistic", "mean", "--mechanism", "laplace",
            "--epsilon", "1", "--sensitivity", "1", "--seed", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err
    path.write_text(text, encoding="utf-8")  # positive control: the same text in UTF-8
    assert main(argv) == 0, capsys.readouterr().err
    assert datasets.load_column(path, "x").shape == (3001,)


# --- 6. depth > n -----------------------------------------------------------------------------------

def test_the_level_helpers_refuse_a_depth_beyond_the_rows_as_evaluate_levels_does():
    # Was: split_levels and to_powerset took depth=9 on 8 rows as depth 8, silently.
    values = oracle.evaluate_levels(oracle.mean, np.arange(8.0), depth=8)
    for call in (lambda: oracle.evaluate_levels(oracle.mean, np.arange(8.0), depth=9),
                 lambda: oracle.split_levels(values, 8, 9),
                 lambda: oracle.to_powerset(values, 8, 9, 0.0)):
        with pytest.raises(ValueError, match=r"depth must be <= n = 8 \(the rows of data\), got depth=9"):
            call()
    assert [level.shape[0] for level in oracle.split_levels(values, 8, 8)] == [1, 8, 28, 56, 70, 56, 28, 8, 1]
    assert oracle.to_powerset(values, 8, 8, 0.0).shape == (256,)  # positive control
