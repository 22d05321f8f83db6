"""What every results file records about the software and hardware."""

from __future__ import annotations

import datetime
import functools
import os
import pathlib
import platform
import subprocess

import jax
import numpy as np

from gpuprivacy._version import __version__


@functools.cache
def _git() -> tuple[str | None, bool | None]:
    root = pathlib.Path(__file__).resolve().parents[2]
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        if pathlib.Path(top).resolve() != root:  # e.g. an installed copy inside some other repository
            return None, None
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (sha or None), bool(status.strip())


def environment_info() -> dict:
    """Versions, git state and device of this process, as a JSON-ready dict.

    ``git_sha`` is the commit of the gpuprivacy source tree when it is a git
    checkout (None for an installed wheel); ``git_dirty`` says whether tracked
    files differ from that commit.
    """
    import jaxlib


    sha, dirty = _git()
    devices = jax.devices()
    return {
        "gpuprivacy_version": __version__,
        "git_sha": sha,
        "git_dirty": dirty,
        "python_version": platform.python_version(),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "numpy_version": np.__version__,
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "x64": bool(jax.config.read("jax_enable_x64")),
        # XLA:CPU's emitters may round a transcendental function otherwise in its last bit (gpuprivacy._config).
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def utc_timestamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
