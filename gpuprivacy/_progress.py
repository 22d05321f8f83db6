"""A minimal progress bar on stderr for long work (no extra dependency)."""

from __future__ import annotations

import sys
import time


class Progress:
    """Prints ``label [#####.....] done/total  rate  eta`` to stderr.

    Silent when ``enabled`` is False or stderr is not a terminal and
    ``force`` is not set, so scripts and CI logs stay clean. Use as a context
    manager and call :meth:`update` with the number of items finished.
    """

    def __init__(self, total: int, label: str = "", *, enabled: bool = True, force: bool = False,
                 stream=None, min_interval: float = 0.2):
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        is_tty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = enabled and (force or is_tty)
        self.done = 0
        self.start = time.perf_counter()
        self._last = 0.0
        self.min_interval = min_interval

    def update(self, count: int = 1) -> None:
        self.done += int(count)
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < self.min_interval and self.done < self.total:
            return
        self._last = now
        self._draw(now)

    def _draw(self, now: float) -> None:
        width = 30
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(width * min(frac, 1.0)))
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else float("inf")
        eta = (self.total - self.done) / rate if rate > 0 and rate != float("inf") else 0.0
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                          f"{self.done}/{self.total}  {rate:,.1f}/s  eta {eta:,.0f}s ")
        self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()
