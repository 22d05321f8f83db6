"""Progress on stderr for long work (no extra dependency): a bar on a terminal, a line now and then in a log."""

from __future__ import annotations

import os
import sys
import time

# Seconds between the plain progress lines written when stderr is not a terminal (a log under nohup, a CI
# job): often enough to see a run is alive, rarely enough to keep the log short.
LOG_INTERVAL_S = float(os.environ.get("GPUPRIVACY_PROGRESS_INTERVAL", "30"))

_COMPILE_SECONDS = [0.0]  # XLA compile seconds of this process so far (a jax.monitoring listener adds them)
_LISTENING = [False]


def _on_event(event: str, duration: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILE_SECONDS[0] += duration


def compile_seconds() -> float:
    """Seconds this process has spent in XLA compilation since progress reporting started listening."""
    if not _LISTENING[0]:
        import jax

        jax.monitoring.register_event_duration_secs_listener(_on_event)
        _LISTENING[0] = True
    return _COMPILE_SECONDS[0]


class Progress:
    """Prints ``label [#####.....] done/total  rate  eta`` to stderr.

    On a terminal (or with ``force``) a bar redrawn in place; otherwise (a log file, a pipe) one plain line
    every :data:`LOG_INTERVAL_S` seconds and one at the end, so a long run under ``nohup`` shows it is alive.
    Silent when ``enabled`` is False. The rate and the ETA leave out the time spent compiling XLA programs
    meanwhile (the first items of a study mostly compile), so the first ETA is not a compile-time artefact.
    Use as a context manager and call :meth:`update` with the number of items finished.
    """

    def __init__(self, total: int, label: str = "", *, enabled: bool = True, force: bool = False,
                 stream=None, min_interval: float = 0.2, log_interval: float | None = None):
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = bool(enabled)
        self.as_bar = force or is_tty
        self.done = 0
        self.start = time.perf_counter()
        self.compile_start = compile_seconds() if self.enabled else 0.0
        self._last = self.start if not self.as_bar else 0.0
        self._lines = 0
        self.min_interval = min_interval if self.as_bar else (LOG_INTERVAL_S if log_interval is None
                                                               else float(log_interval))

    def update(self, count: int = 1) -> None:
        self.done += int(count)
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < self.min_interval and (self.done < self.total or not self.as_bar):
            return
        self._last = now
        self._draw(now)

    def _rate_and_eta(self, now: float) -> tuple[float, float, float]:
        compiling = max(compile_seconds() - self.compile_start, 0.0)
        working = max(now - self.start - compiling, 1e-9)
        rate = self.done / working
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        return rate, eta, compiling

    def _draw(self, now: float) -> None:
        rate, eta, compiling = self._rate_and_eta(now)
        eta_text = f"{eta:,.0f}s" if eta != float("inf") else "?"
        if self.as_bar:
            width = 30
            frac = self.done / self.total if self.total else 1.0
            filled = int(round(width * min(frac, 1.0)))
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                              f"{self.done}/{self.total}  {rate:,.1f}/s  eta {eta_text} ")
        else:
            percent = 100.0 * self.done / self.total if self.total else 100.0
            self.stream.write(f"{self.label}: {self.done}/{self.total} ({percent:.0f}%)  {rate:,.1f}/s  eta "
                              f"{eta_text} (excluding compiling: {compiling:,.0f}s so far)  elapsed "
                              f"{now - self.start:,.0f}s\n")
            self._lines += 1
        self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.as_bar:
            self._draw(now)
            self.stream.write("\n")
            self.stream.flush()
        elif self._lines:  # a log that showed progress gets its last line; a short run stays silent
            self._draw(now)
