"""Progress reporting: a bar on a terminal, plain lines in a log, an ETA without the compile time."""

import io
import time

from gpuprivacy import _progress
from gpuprivacy._progress import Progress


class _Log(io.StringIO):
    def isatty(self):
        return False


def test_a_log_gets_a_line_every_interval_and_one_at_the_end():
    log = _Log()
    with Progress(10, "sweep x", stream=log, log_interval=0.0) as bar:
        for _ in range(10):
            bar.update()
    lines = log.getvalue().splitlines()
    assert len(lines) == 11 and "\r" not in log.getvalue()
    assert lines[0].startswith("sweep x: 1/10 (10%)") and lines[-1].startswith("sweep x: 10/10 (100%)")
    assert "eta" in lines[0] and "excluding compiling" in lines[0]


def test_a_short_run_in_a_log_stays_silent():
    log = _Log()
    with Progress(10, "quick", stream=log) as bar:  # the default interval (30 s) never passes here
        bar.update(10)
    assert log.getvalue() == ""


def test_disabled_writes_nothing():
    log = _Log()
    with Progress(3, "off", stream=log, enabled=False, log_interval=0.0) as bar:
        bar.update(3)
    assert log.getvalue() == ""


def test_the_eta_leaves_out_compiling(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    bar = Progress(100, "study", stream=_Log(), log_interval=0.0)
    compiled = _progress.compile_seconds()
    # 10 items in 11 s, of which 10 s were compiling: 1 s of work, so 10 items/s and 9 s to go.
    clock[0] += 11.0
    monkeypatch.setattr(_progress, "_COMPILE_SECONDS", [compiled + 10.0])
    bar.done = 10
    rate, eta, compiling = bar._rate_and_eta(clock[0])
    assert (round(rate, 6), round(eta, 6), compiling) == (10.0, 9.0, 10.0)
    # Without the compile time excluded the first ETA would have been 99 s.
    assert round((100 - 10) / (10 / 11.0)) == 99
