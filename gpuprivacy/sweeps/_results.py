"""An append-only JSON-lines results file that survives being killed.

Invariants:
* A row is one line, written with a single ``os.write`` loop on an
  ``O_APPEND`` descriptor and then ``fsync``-ed, so after a crash the file
  holds whole rows plus at most one partial last line (no trailing newline).
* Opening the file repairs that partial line by truncating it, under an
  exclusive ``flock``, so two sweeps never write one file at once.
* A complete line that is not valid JSON is never dropped silently: it is an
  error telling the user to move the file aside.
* Every row carries a ``digest`` of its own content (SHA-256 of its canonical
  JSON without the digest), so a hand-edited row is detected and named by its
  line, never counted; a cell that appears twice is an error naming both
  lines, never double-counted. (Rows written before digests existed have
  none and are read as they are.)
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib

try:  # POSIX only; elsewhere the file is simply not locked.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


class SweepResultsError(RuntimeError, ValueError):
    """The results file cannot be used as it is; the message says why and what to do."""


DIGEST_KEY = "digest"


def row_digest(row: dict) -> str:
    """SHA-256 (hex, 16 characters) of the row's canonical JSON without its digest."""
    body = {k: v for k, v in row.items() if k != DIGEST_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class ResultsFile:
    """Opens (creating if needed), locks, repairs and reads a results file."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.rows: list[dict] = []
        self.repaired_bytes = 0
        self._fd: int | None = None

    def __enter__(self) -> "ResultsFile":
        if self.path.is_dir():
            raise SweepResultsError(f"results path {str(self.path)!r} is a directory; pass a file name, e.g. "
                                    f"{str(self.path / 'results.jsonl')!r}.")
        blocked = file_in_the_way(self.path.parent)
        if blocked is not None:
            raise SweepResultsError(f"results path {str(self.path)!r}: {str(blocked)!r} is a file, not a folder, so "
                                    "the results file cannot be created there. Pass a results path in a folder.")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as err:
            raise SweepResultsError(f"cannot open the results file {str(self.path)!r} for writing: "
                                    f"{err.strerror or err}. Pass a results path in a writable directory.") from None
        self._fd = fd
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise SweepResultsError(f"{self.path} is being written by another sweep (it is locked). "
                                            "Wait for it to finish or pass another results_path.") from None
            if created:
                _fsync_dir(self.path.parent)
            self._read_and_repair()
        except BaseException:
            os.close(fd)
            self._fd = None
            raise
        return self

    def _read_and_repair(self) -> None:
        fd = self._fd
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
        end = data.rfind(b"\n") + 1  # keep everything up to the last newline
        if end < len(data):
            # A partial last line from a killed writer: drop it before appending.
            os.ftruncate(fd, end)
            os.fsync(fd)
            self.repaired_bytes = len(data) - end
            data = data[:end]
        self.rows = parse_rows(self.path, data)

    def append(self, row: dict) -> dict:
        """Writes ``row`` (with its digest) durably and returns it as stored."""
        row = {**row, DIGEST_KEY: row_digest(row)}
        line = (json.dumps(row, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        self.rows.append(row)
        return row

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # also releases the flock
            self._fd = None


def parse_rows(path, data: bytes) -> list[dict]:
    """The rows of a results file's complete lines, each checked: JSON, its digest, no cell twice."""
    rows: list[dict] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(data.split(b"\n")[:-1] if data else [], start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("cell_id"), str):
            raise SweepResultsError(
                f"{path}, line {number}, is not a sweep results row: {line[:80]!r}. The file may be "
                "damaged or not a gpuprivacy results file; move it aside or delete that line, then rerun.")
        if DIGEST_KEY in row and row[DIGEST_KEY] != row_digest(row):
            raise SweepResultsError(
                f"{path}, line {number} (cell {row['cell_id']}): the row was changed after it was written "
                "(its digest does not match its content). Restore it, or delete that line to recompute the "
                "cell; an edited result is never used.")
        if row["cell_id"] in seen:
            raise SweepResultsError(
                f"{path}, line {number}, repeats cell {row['cell_id']} of line {seen[row['cell_id']]}. "
                "Delete one of the two lines; a cell is never counted twice.")
        seen[row["cell_id"]] = number
        rows.append(row)
    return rows


def read_rows(path) -> list[dict]:
    """The rows of a results file, read-only (no lock, no repair): for reports.

    A partial last line (a run killed mid-write) is ignored; a damaged, edited or repeated row is an
    error naming its line, exactly as when a sweep resumes.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        raise FileNotFoundError(f"results file {str(path)!r} is a directory. Pass the JSON-lines file a sweep "
                                "wrote inside it (default results/<config stem>.jsonl).")
    if not path.is_file():
        raise FileNotFoundError(f"results file {str(path)!r} does not exist. Pass the JSON-lines file a sweep "
                                "wrote (default results/<config stem>.jsonl).")
    data = path.read_bytes()
    return parse_rows(path, data[:data.rfind(b"\n") + 1])


def file_in_the_way(folder: pathlib.Path) -> pathlib.Path | None:
    """The first component of ``folder`` (itself included) that exists and is not a folder, or None."""
    for candidate in reversed((folder, *folder.parents)):
        if candidate.exists() and not candidate.is_dir():
            return candidate
    return None


def _fsync_dir(directory: pathlib.Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover  (e.g. platforms without directory descriptors)
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
