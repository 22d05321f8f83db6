"""Tiny studies for tests/reproduce/test_parallel_studies.py; importing this module registers them (a worker
process imports it too, by the module name its study functions carry)."""

from __future__ import annotations

import os
import pathlib
import time

from gpuprivacy.reproduce import register_study

HANDSHAKE_ENV = "GPUPRIVACY_TEST_HANDSHAKE_S"  # how long a handshake study waits for its partner


def _handshake(me: str, partner: str):
    """A study that finishes only if ``partner`` runs at the same time: it announces itself, then waits for the
    partner's announcement. Run one after the other, the first waits in vain and fails."""
    def study(study_dir: pathlib.Path, *, quick, progress):
        out = study_dir.parent
        (out / f"{me}.started").write_text(str(os.getpid()))
        deadline = time.monotonic() + float(os.environ.get(HANDSHAKE_ENV, "120"))
        while not (out / f"{partner}.started").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{me} ran alone: {partner} never started while it ran")
            time.sleep(0.02)
        (study_dir / "report.md").write_text(f"{me} met {partner}\n")
        return {"seed": 0, "parameters": {}, "pid": os.getpid()}
    return study


def _failing(study_dir, *, quick, progress):
    print("about to fail")
    raise ValueError("the failing test study fails (marker 7f3a)")


def _trivial(study_dir, *, quick, progress):
    (study_dir / "report.md").write_text("trivial\n")
    print("trivial study ran")
    return {"seed": 0, "parameters": {}, "pid": os.getpid()}


def _sleeper(study_dir, *, quick, progress):
    (study_dir.parent / f"{study_dir.name}.pid").write_text(str(os.getpid()))
    time.sleep(600)
    return {"seed": 0, "parameters": {}}


register_study("test-handshake-a", _handshake("test-handshake-a", "test-handshake-b"), "test", replace=True)
register_study("test-handshake-b", _handshake("test-handshake-b", "test-handshake-a"), "test", replace=True)
register_study("test-failing", _failing, "test", replace=True)
register_study("test-trivial", _trivial, "test", replace=True)
register_study("test-sleeper-a", _sleeper, "test", replace=True)
register_study("test-sleeper-b", _sleeper, "test", replace=True)
