"""reproduce(..., jobs=N): studies side by side, each in a process of its own, none outliving the caller."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from gpuprivacy.cli import main as cli_main
from gpuprivacy.reproduce import StudyFailed, register_study, reproduce
from tests.reproduce import _studies_in_processes as studies

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_jobs_run_studies_at_the_same_time_in_their_own_processes(tmp_path):
    # Each handshake study finishes only if its partner runs while it waits: the property "side by side".
    folders = reproduce(["test-handshake-a", "test-handshake-b"], quick=True, out_dir=tmp_path, progress=False,
                        jobs=2)
    assert folders == [tmp_path / "test-handshake-a", tmp_path / "test-handshake-b"]
    pids = {json.loads((folder / "metadata.json").read_text())["pid"] for folder in folders}
    assert len(pids) == 2 and os.getpid() not in pids
    assert (folders[0] / "report.md").read_text() == "test-handshake-a met test-handshake-b\n"


def test_a_study_in_a_worker_writes_the_numbers_it_writes_in_this_process(tmp_path):
    (alone,) = reproduce("rnm-bikes", quick=True, out_dir=tmp_path / "here", progress=False, jobs=1)
    beside, trivial = reproduce(["rnm-bikes", "test-trivial"], quick=True, out_dir=tmp_path / "workers",
                                progress=False, jobs=2)  # two studies, two jobs: each in a worker process
    assert json.loads((trivial / "metadata.json").read_text())["pid"] != os.getpid()
    assert (beside / "results.csv").read_bytes() == (alone / "results.csv").read_bytes()
    records = [json.loads((folder / "results.json").read_text())["records"] for folder in (alone, beside)]
    assert records[0] == records[1] and len(records[0]) > 0


def test_one_job_runs_them_one_after_the_other(tmp_path, monkeypatch):
    # The positive control of the test above: in one process, one at a time, the first waits in vain.
    monkeypatch.setenv(studies.HANDSHAKE_ENV, "0.5")
    with pytest.raises(RuntimeError, match="test-handshake-a ran alone"):
        reproduce(["test-handshake-a", "test-handshake-b"], quick=True, out_dir=tmp_path, progress=False, jobs=1)


def test_a_failing_study_is_named_with_its_output_and_the_others_finish(tmp_path, capsys):
    with pytest.raises(StudyFailed, match=r"(?s)study 'test-failing' failed in its process \(exit status 1\).*"
                                          r"about to fail.*marker 7f3a"):
        reproduce(["test-failing", "test-trivial"], quick=True, out_dir=tmp_path, progress=False, jobs=2)
    assert (tmp_path / "test-trivial" / "report.md").read_text() == "trivial\n"
    assert not (tmp_path / "test-failing" / "metadata.json").exists()
    assert "trivial study ran" in capsys.readouterr().out  # a worker's output is passed on


def _gone(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie has ended (its new parent reaps it)


@pytest.mark.skipif(not pathlib.Path("/proc/self/stat").exists(), reason="reads /proc to see a process end")
def test_no_worker_outlives_a_killed_caller(tmp_path):
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import tests.reproduce._studies_in_processes; "
              "from gpuprivacy.reproduce import reproduce; "
              "reproduce(['test-sleeper-a', 'test-sleeper-b'], quick=True, out_dir=sys.argv[2], progress=False, "
              "jobs=2)")
    caller = subprocess.Popen([sys.executable, "-c", script, str(ROOT), str(tmp_path)])
    try:
        files = [tmp_path / "test-sleeper-a.pid", tmp_path / "test-sleeper-b.pid"]
        deadline = time.monotonic() + 120
        while not all(f.exists() and f.read_text() for f in files):
            assert caller.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        workers = [int(f.read_text()) for f in files]
        assert not any(_gone(pid) for pid in workers)  # both running, sleeping for 10 minutes
        caller.send_signal(signal.SIGKILL)  # no cleanup code of the caller runs
        caller.wait()
        deadline = time.monotonic() + 20
        while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in workers), "a worker outlived its killed caller"
    finally:
        caller.kill()
        caller.wait()


def test_a_study_a_worker_cannot_import_is_refused_before_any_runs(tmp_path, monkeypatch):
    def study(study_dir, *, quick, progress):
        raise AssertionError("must not run")

    study.__module__ = "__main__"  # registered by a script: a worker process would not find it
    register_study("test-from-a-script", study, "test", replace=True)
    with pytest.raises(ValueError, match=r"study 'test-from-a-script' is registered by '__main__'.*Pass jobs=1"):
        reproduce(["test-trivial", "test-from-a-script"], quick=True, out_dir=tmp_path, progress=False, jobs=2)
    assert not (tmp_path / "test-trivial").exists()


def test_a_study_folder_that_cannot_be_made_is_an_error_before_any_worker_starts(tmp_path):
    (tmp_path / "test-trivial").write_text("a file where the study's folder goes")
    with pytest.raises(FileExistsError):
        reproduce(["test-handshake-a", "test-trivial"], quick=True, out_dir=tmp_path, progress=False, jobs=2)
    assert not (tmp_path / "test-handshake-a.started").exists()


def test_jobs_is_checked(tmp_path):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match=r"jobs \(--jobs\) must be a positive integer .*got"):
            reproduce(["test-trivial"], quick=True, out_dir=tmp_path, progress=False, jobs=bad)
    with pytest.raises(ValueError, match="no study to run"):
        reproduce([], quick=True, out_dir=tmp_path, progress=False)


def test_cli_jobs_and_names(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:  # argparse's own exit for a bad value: status 2, no traceback
        cli_main(["reproduce", "test-trivial", "--jobs", "0", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "--jobs must be >= 1, got 0" in capsys.readouterr().err
    assert cli_main(["reproduce", "all", "test-trivial", "--out", str(tmp_path)]) == 2
    assert "pass 'all' alone or study names" in capsys.readouterr().err
    assert cli_main(["reproduce", "test-trivial", "test-handshake-a", "test-handshake-b", "--quick", "--jobs", "3",
                     "--out", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["folders"] == [str(tmp_path / n) for n in ("test-trivial", "test-handshake-a", "test-handshake-b")]
