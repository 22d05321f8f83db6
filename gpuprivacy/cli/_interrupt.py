"""Ctrl-C: exit 130 with a resume hint, without a traceback and without tearing the interpreter down.

A ``KeyboardInterrupt`` reaches the main thread while XLA's own threads may still be compiling or running;
letting Python finalize then (module teardown, garbage collection of live device buffers) crashed with
SIGSEGV (rc -11 in 1 of 6 tries of ``reproduce rnm-bikes --quick`` here, 4 of 6 by hand on another day), and
a ``KeyboardInterrupt`` raised inside JAX's garbage-collection callback is swallowed ("Exception ignored"),
so the run went on and exited 0. So the CLI installs its own SIGINT handler before any computation starts
JAX's threads (an interrupt during the imports, before that, is Python's own ``KeyboardInterrupt``; no XLA
thread exists yet); it prints one line, flushes the streams and leaves with ``os._exit(130)`` (the shell's code
for SIGINT). Nothing is lost by skipping finalization: results files are
appended one complete, flushed row at a time and a partial last line is ignored on resume; the oracle
sandbox's workers die with their engine (``PR_SET_PDEATHSIG``, killed as a process group).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a process stopped by Ctrl-C

# Commands whose finished work is on disk and picked up by running the same command again.
_RESUMABLE = {"sweep": "finished cells are saved in the results file",
              "reproduce": "finished studies and cells are saved"}


def interrupted(command: str) -> None:
    """Prints what was kept and how to go on, then ends the process at once with status 130."""
    kept = _RESUMABLE.get(command)
    hint = f"{kept}; run the same command again to resume." if kept else "run the command again to start over."
    try:
        print(f"gpuprivacy {command}: interrupted (Ctrl-C); {hint}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def exit_on_interrupt(command: str) -> Iterator[None]:
    """Within the block, Ctrl-C ends ``command`` through :func:`interrupted`; the old handler comes back after.

    Only in the main thread and only over Python's default SIGINT handler: a SIGINT that the parent set to be
    ignored (``nohup``, a background job) stays ignored, and a caller's own handler is kept.
    """
    installed = (threading.current_thread() is threading.main_thread()
                 and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if installed:
        signal.signal(signal.SIGINT, lambda signum, frame: interrupted(command))
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)
