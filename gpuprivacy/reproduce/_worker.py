"""One reproduction study in a process of its own (started by :func:`gpuprivacy.reproduce._parallel.run_in_processes`).

``python -m gpuprivacy.reproduce._worker SPEC`` (with the caller's ``sys.path`` as ``PYTHONPATH``), SPEC a JSON
object: the study's ``name``, the ``module`` whose import registers it, ``quick``, ``out_dir``, ``progress`` and
the caller's ``jax`` settings.
The worker exits at once when its standard input (a pipe held by the caller only) reaches end-of-file: the
caller has ended, whatever the way, and no study runs on without it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading


def _exit_when_caller_ends() -> None:
    def watch():
        try:
            while os.read(0, 4096):  # the caller never writes; b"" is end-of-file: it closed the pipe or died
                pass
        finally:
            os._exit(1)
    threading.Thread(target=watch, name="exit-when-caller-ends", daemon=True).start()


def main(argv: list[str]) -> int:
    _exit_when_caller_ends()
    spec = json.loads(argv[0])
    import jax

    for key, value in spec["jax"].items():
        jax.config.update(key, value)
    importlib.import_module(spec["module"])
    from gpuprivacy.reproduce._registry import run_study

    run_study(spec["name"], quick=spec["quick"], out_dir=spec["out_dir"], progress=spec["progress"])
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
