"""The command line's persistent XLA compilation cache: a rerun or a resumed sweep compiles nothing again.

Compiling is most of a short study's time (each mechanism program takes 0.1-3 s on CPU). Every ``gpuprivacy``
command keeps JAX's persistent compilation cache in a user cache folder, so that the second run of the same
programs (a rerun, a resumed sweep, the next ``reproduce``) reads them back instead:

* ``GPUPRIVACY_COMPILATION_CACHE=off`` turns it off; ``GPUPRIVACY_COMPILATION_CACHE=DIR`` puts it in ``DIR``;
* a ``JAX_COMPILATION_CACHE_DIR`` (or ``jax_compilation_cache_dir``) the user set already wins;
* the default folder is ``$XDG_CACHE_HOME/gpuprivacy/xla`` (``~/.cache/gpuprivacy/xla``), bounded to
  :data:`MAX_CACHE_BYTES` (JAX evicts the least recently used programs beyond it; it needs the ``filelock``
  package for that, a dependency of gpuprivacy).

A cached program is the same executable XLA would build (JAX keys it by the program, the compile options, the
backend and the jaxlib version), so releases are bitwise those of a cold run. Nothing of the data is in it:
programs are keyed and built from shapes and code, never from data values.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib

ENV = "GPUPRIVACY_COMPILATION_CACHE"
MAX_CACHE_BYTES = 2 * 1024**3
# Every program is kept, however fast it compiled: a rerun or a resumed sweep then compiles nothing at all
# (reading a small program back costs about what compiling it does; the folder is bounded by MAX_CACHE_BYTES).
MIN_COMPILE_SECONDS = 0.0


def default_folder() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "gpuprivacy" / "xla"


def enable_compilation_cache() -> str | None:
    """Turns JAX's persistent compilation cache on for this process; the folder used, or ``None`` (off)."""
    import jax

    setting = os.environ.get(ENV, "").strip()
    if setting.lower() in ("off", "0", "false", "no"):
        return None
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or jax.config.jax_compilation_cache_dir:
        return jax.config.jax_compilation_cache_dir or os.environ["JAX_COMPILATION_CACHE_DIR"]  # the user's
    folder = pathlib.Path(setting) if setting else default_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # an unwritable home (a sandboxed CI): run without the cache rather than fail the command
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    if importlib.util.find_spec("filelock") is not None:  # JAX bounds (evicts from) the cache only with filelock
        jax.config.update("jax_compilation_cache_max_size", MAX_CACHE_BYTES)
    return str(folder)
