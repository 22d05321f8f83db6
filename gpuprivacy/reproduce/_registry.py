"""A registry of reproduction studies and :func:`reproduce`, which runs them."""

from __future__ import annotations

import json
import os
import pathlib
import re
import time
from typing import Callable, NamedTuple, Sequence

from gpuprivacy.reproduce._parallel import default_jobs, run_in_processes
from gpuprivacy.reproduce._plots import require_matplotlib
from gpuprivacy.sweeps import environment_info, utc_timestamp

StudyFn = Callable[..., dict]
"""``fn(study_dir: pathlib.Path, *, quick: bool, progress: bool) -> dict``.

Writes ``report.md``, raw numbers (JSON, CSV) and PNG plots into
``study_dir`` (which exists) and returns a JSON-ready dict of what was run
(at least ``seed`` and ``parameters``); :func:`reproduce` adds provenance and
wall time and writes it as ``metadata.json``.
"""

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class StudyInfo(NamedTuple):
    """A registered study: ``name`` (folder and CLI name), a one-line ``description`` and its ``aliases``."""

    name: str
    description: str
    aliases: tuple[str, ...] = ()


class _Study(NamedTuple):
    fn: StudyFn
    description: str
    aliases: tuple[str, ...]


_STUDIES: dict[str, _Study] = {}
_ALIASES: dict[str, str] = {}


def register_study(name: str, fn: StudyFn, description: str, *, aliases: tuple[str, ...] = (),
                   replace: bool = False) -> None:
    """Registers a reproduction study under ``name``.

    Args:
      name: lowercase letters, digits and dashes (it names the output folder);
        ``"all"`` is reserved.
      fn: ``fn(study_dir, *, quick, progress) -> dict`` (see :data:`StudyFn`).
      description: one line for :func:`list_studies`.
      aliases: other names that run the same study (e.g. an older name, so
        that scripts written against it keep working); the study still writes
        into ``out_dir/<name>/``.
      replace: allow replacing an existing registration.
    """
    if not isinstance(name, str) or not _NAME.match(name) or name == "all":
        raise ValueError(f"study name must match {_NAME.pattern} and not be 'all', got {name!r}.")
    if not callable(fn):
        raise TypeError(f"fn for study {name!r} must be callable, got {type(fn).__name__}.")
    if name in _STUDIES and not replace:
        raise ValueError(f"a study named {name!r} is already registered. Pick another name or pass replace=True.")
    aliases = tuple(aliases)
    for alias in aliases:
        if not isinstance(alias, str) or not _NAME.match(alias) or alias == "all":
            raise ValueError(f"study alias must match {_NAME.pattern} and not be 'all', got {alias!r}.")
        if alias == name:
            raise ValueError(f"study {name!r} lists its own name as an alias; an alias is another name for it "
                             "(e.g. an older one). Remove it from aliases.")
        taken = alias in _STUDIES or _ALIASES.get(alias, name) != name
        if taken and not replace:
            raise ValueError(f"the alias {alias!r} of study {name!r} is already a study name or another study's "
                             "alias. Pick another alias or pass replace=True.")
    _STUDIES[name] = _Study(fn, str(description), aliases)
    for alias in aliases:
        _ALIASES[alias] = name


def resolve_study(name: str) -> str:
    """The registered study name for ``name`` (a study name or one of its aliases)."""
    if name in _STUDIES:
        return name
    if name in _ALIASES:
        return _ALIASES[name]
    known = ", ".join(sorted(_STUDIES)) or "none"
    aliases = ", ".join(f"{a} -> {n}" for a, n in sorted(_ALIASES.items()))
    hint = f" (aliases: {aliases})" if aliases else ""
    raise ValueError(f"unknown study {name!r}. Known studies: {known}{hint}; or pass 'all'.")


def list_studies() -> list[StudyInfo]:
    """The registered studies, sorted by name."""
    return [StudyInfo(name, _STUDIES[name].description, _STUDIES[name].aliases) for name in sorted(_STUDIES)]


def reproduce(names: str | Sequence[str], *, quick: bool, out_dir: str | os.PathLike,
              progress: bool = True, jobs: int | None = 1) -> list[pathlib.Path]:
    """Runs registered studies (a name, a list of names, or ``"all"``), each into ``out_dir/<name>/``.

    Each folder receives ``report.md`` (what was run, parameters, results
    tables, the plots, and where and why the numbers differ from the
    paper), raw numbers as JSON and CSV, PNG plots, and ``metadata.json``
    (seed, git SHA, versions, device, wall time). Sweep-based studies also
    keep their JSON-lines sweep rows, so re-running into the same folder
    resumes an interrupted run; delete the folder for a fresh one.

    Args:
      names: a name (or alias) from :func:`list_studies`, a list of them, or ``"all"``.
      quick: a reduced run (fewer trials and grid points) for smoke tests;
        the report says so.
      out_dir: parent folder; created if missing.
      progress: show progress bars on stderr (when it is a terminal).
      jobs: studies run at once, each in a process of its own (1: one after the other, in this process);
        ``None``: one per CPU core on a CPU-only host, 1 with an accelerator. The numbers are the same either
        way; several at once finish sooner where compiling and Python leave cores idle (``reproduce all
        --quick`` on 2 cores: see BENCHMARKS.md).

    Returns:
      The study folders, in the order of ``names`` (``"all"``: sorted by name).

    Raises:
      ValueError: for an unknown study name or a ``jobs`` that is not a positive integer.
      ImportError: if matplotlib is missing (``pip install gpuprivacy[plots]``).
      StudyFailed: (a ``RuntimeError``) a study run in another process failed; the message names it and holds
        its output (the other studies still ran).

    Examples:
      >>> [s.name for s in list_studies()][-1]
      'tzamos2020-private-median'
      >>> resolve_study("seed004")
      'lebensold2024-gaussian-selection'
    """
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True or False, got {quick!r}.")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs (--jobs) must be a positive integer (studies run at once), got {jobs!r}. Pass "
                         "e.g. jobs=2, 1 to run them one after the other, or None for one per CPU core.")
    if isinstance(names, str):
        names = sorted(_STUDIES) if names == "all" else [resolve_study(names)]
    else:
        names = list(dict.fromkeys(resolve_study(name) for name in names))  # each study once, in the order given
        if not names:
            raise ValueError("no study to run: pass a study name, a list of names, or 'all'.")
    require_matplotlib()  # fail before any computation
    out_dir = pathlib.Path(out_dir)
    jobs = default_jobs(len(names)) if jobs is None else jobs
    if jobs > 1 and len(names) > 1:
        modules = [getattr(_STUDIES[name].fn, "__module__", None) for name in names]
        for name, module in zip(names, modules):
            if not module or module == "__main__":  # a worker process imports the module that registers it
                raise ValueError(f"study {name!r} is registered by {module or 'no module'!r}, which a worker "
                                 "process cannot import, so it cannot run beside the others. Pass jobs=1 to run "
                                 "the studies in this process, or register it in an importable module.")
        for name in names:  # here, so that a folder the studies cannot use is this call's OSError, not a worker's
            (out_dir / name).mkdir(parents=True, exist_ok=True)
        run_in_processes(names, modules, quick=quick, out_dir=out_dir.resolve(), jobs=jobs, progress=progress)
        return [out_dir / name for name in names]
    return [run_study(name, quick=quick, out_dir=out_dir, progress=progress) for name in names]


def run_study(name: str, *, quick: bool, out_dir: str | os.PathLike, progress: bool) -> pathlib.Path:
    """Runs the registered study ``name`` in this process into ``out_dir/<name>/`` and writes its metadata."""
    study_dir = pathlib.Path(out_dir) / name
    study_dir.mkdir(parents=True, exist_ok=True)
    started = utc_timestamp()
    t0 = time.perf_counter()
    details = _STUDIES[name].fn(study_dir, quick=quick, progress=progress)
    metadata = {
        "study": name,
        "description": _STUDIES[name].description,
        "quick": quick,
        **details,
        **environment_info(),
        "started_utc": started,
        "finished_utc": utc_timestamp(),
        "wall_s": time.perf_counter() - t0,
        "files": sorted(p.name for p in study_dir.iterdir() if p.is_file() and p.name != "metadata.json")
                 + ["metadata.json"],
    }
    (study_dir / "metadata.json").write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return study_dir
