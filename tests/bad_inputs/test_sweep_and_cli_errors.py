"""Config, option and path errors of the sweeps and the CLI: a clear message (exit 2 at the CLI, no traceback)
before any cell runs, never a warning and an "infeasible" row, never a traceback."""

import subprocess
import sys

import numpy as np
import pytest

from gpuprivacy import datasets, oracle, sweeps
from gpuprivacy.sweeps import _run

MECHANISM = {"name": "laplace-median", "epsilon": 1.0, "lower": -5.0, "upper": 5.0, "clip": True}


def _config(**dataset):
    return {"name": "bad-input-test", "seed": 1, "trials": 4, "mechanism": [MECHANISM],
            "dataset": {"name": "normal", "n": [20], **dataset}}


def _cli(*args, cwd):
    done = subprocess.run([sys.executable, "-m", "gpuprivacy", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)
    return done.returncode, done.stderr


@pytest.mark.parametrize("dataset,bad", [({"scale": -1.0}, "scale"), ({"name": "student-t", "df": 0.0}, "df"),
                                         ({"name": "uniform", "low": 1.0, "high": 1.0}, "low")])
def test_a_bad_data_law_is_a_config_error_before_any_cell(tmp_path, dataset, bad):
    # Was: a warning per cell and "infeasible" rows, exit 0.
    with pytest.raises(sweeps.SweepConfigError, match=rf"dataset '.*' with parameters .* is refused by its law"):
        sweeps.run_sweep(_config(**dataset), results_path=tmp_path / "r.jsonl", progress=False)
    assert not (tmp_path / "r.jsonl").exists() or (tmp_path / "r.jsonl").read_text() == ""
    summary = sweeps.run_sweep(_config(scale=2.0), results_path=tmp_path / "ok.jsonl", progress=False)
    assert summary.num_computed == 1  # positive control


@pytest.mark.parametrize("chunk", [0, -3, 2.5, True])
def test_chunk_must_be_a_positive_integer(tmp_path, chunk):
    # Was: --chunk 0 stored ZeroDivisionError rows as permanent "infeasible" cells.
    with pytest.raises(sweeps.SweepConfigError, match="chunk must be a positive integer"):
        sweeps.run_sweep(_config(), results_path=tmp_path / "r.jsonl", progress=False, chunk=chunk)


def test_cli_chunk_zero_exits_2(tmp_path):
    (tmp_path / "c.toml").write_text('name = "c"\nseed = 1\ntrials = 4\n[[mechanism]]\nname = "laplace-median"\n'
                                     'epsilon = 1.0\nlower = -5.0\nupper = 5.0\nclip = true\n[dataset]\n'
                                     'name = "normal"\nn = [20]\n')
    code, err = _cli("sweep", "c.toml", "--chunk", "0", "--no-progress", cwd=tmp_path)
    assert code == 2 and "--chunk must be >= 1, got 0" in err and "Traceback" not in err
    code, err = _cli("sweep", "c.toml", "--results", str(tmp_path), "--no-progress", cwd=tmp_path)
    assert code == 2 and "is a directory" in err and "Traceback" not in err
    (tmp_path / "bad.py").write_text("def f(:\n")
    code, err = _cli("sweep", "c.toml", "--import", "bad.py", "--no-progress", cwd=tmp_path)
    assert code == 2 and "SyntaxError" in err and "bad.py" in err and "Traceback" not in err
    (tmp_path / "boom.py").write_text("raise RuntimeError('boom')\n")
    code, err = _cli("sweep", "c.toml", "--import", "boom.py", "--no-progress", cwd=tmp_path)
    assert code == 2 and "RuntimeError: boom" in err and "Traceback" not in err
    code, err = _cli("study", "report", str(tmp_path), cwd=tmp_path)
    assert code == 2 and "is a directory" in err and "Traceback" not in err


def test_an_out_of_memory_cell_is_not_stored_and_a_rerun_computes_it(tmp_path, monkeypatch):
    config = _config(n=[20, 30])
    original = _run.run_cells

    def run_cells(requests, data, *args, **kwargs):
        if data.n == 30:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9 GiB.")
        return original(requests, data, *args, **kwargs)

    monkeypatch.setattr(_run, "run_cells", run_cells)
    with pytest.warns(RuntimeWarning, match="ran out of device memory and were not saved.*smaller --chunk"):
        summary = sweeps.run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    assert summary.num_computed == 1 and summary.num_infeasible == 0
    monkeypatch.setattr(_run, "run_cells", original)
    again = sweeps.run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    assert again.num_computed == 1  # the cell that ran out of memory, and only it
    assert sorted(r["dataset_params"]["n"] for r in again.rows) == [20, 30]


def test_a_latin1_csv_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(b"x,name\n1.0,caf\xe9\n")
    with pytest.raises(ValueError, match=r"latin.csv is not UTF-8 text: byte b'\\xe9' at offset 14.*Re-save"):
        datasets.load_column(path, "x")
    path.write_bytes(b"x,name\n1.0,cafe\n")
    np.testing.assert_array_equal(datasets.load_column(path, "x"), [1.0])


def test_evaluate_levels_refuses_a_depth_beyond_the_rows_as_removals_does():
    with pytest.raises(ValueError, match=r"depth must be <= n = 8.*got depth=9"):
        oracle.evaluate_levels(oracle.mean, np.arange(8.0), depth=9)
    assert np.asarray(oracle.evaluate_levels(oracle.mean, np.arange(8.0), depth=8)).shape == (256,)
