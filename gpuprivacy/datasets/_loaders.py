"""One numeric column of a user's file, as float64: CSV, NumPy ``.npy``/``.npz`` and Parquet.

This is the curator's boundary (STYLE, "errors vs totality"): every problem
with the data is an eager error here, naming the file, the line or row and
the fix, before anything is released. Rows are never dropped or guessed.
"""

from __future__ import annotations

import csv
import math
import os
import pathlib
import zipfile
from typing import Any

import numpy as np

_SUFFIXES = {".csv": "csv", ".npy": "npy", ".npz": "npz", ".parquet": "parquet", ".pq": "parquet"}
_NEVER_DROPS = "gpuprivacy never drops rows silently."


def load_column(path: str | os.PathLike, column: str | int | None = None, *,
                allow_nonfinite: bool = False) -> np.ndarray:
    """Reads one numeric column of a file into a fresh ``float64[n]`` array.

    The format comes from the suffix:

    * ``.csv``: a header row, then data rows. ``column`` is a header name
      (None if the file has exactly one column). A header naming the column
      twice, a row with a missing or extra cell, or a cell that is not a
      number is an error naming the line. Blank lines are skipped.
    * ``.npy``: a 1-d array (``column=None``) or a 2-d ``[n, k]`` array with
      ``column`` an integer index (None if ``k == 1``).
    * ``.npz``: ``column`` is the key of a 1-d array (None if the archive
      holds exactly one array).
    * ``.parquet`` / ``.pq``: ``column`` is a column name (None if the file
      has exactly one); needs ``pyarrow`` (``pip install pyarrow``). Nulls
      count as non-finite values.

    Integer and boolean values are converted to float64 (integers above
    :math:`2^{53}` in magnitude round).

    Args:
      path: the file.
      column: which column, as above.
      allow_nonfinite: keep NaN and +-inf (and Parquet nulls, as NaN) instead
        of raising. Mechanisms expect finite data: impute before a release.

    Returns:
      ``float64[n]`` with ``n >= 1``, writable and not shared with any cache.

    Raises:
      FileNotFoundError: no such file.
      ImportError: a Parquet file without ``pyarrow`` installed.
      TypeError: a ``column`` of the wrong type for the format, or non-numeric data.
      ValueError: anything else wrong with the file; the message names the
        line (CSV) or row (arrays), the value and the fix.

    Examples:
      >>> import pathlib, tempfile
      >>> folder = pathlib.Path(tempfile.mkdtemp())
      >>> _ = (folder / "data.csv").write_text("id,x\\n1,0.5\\n2,1.5\\n")
      >>> load_column(folder / "data.csv", "x")
      array([0.5, 1.5])
      >>> np.save(folder / "data.npy", np.arange(3))
      >>> load_column(folder / "data.npy")
      array([0., 1., 2.])
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or pathlib.Path), got {type(path).__name__}.")
    if not isinstance(allow_nonfinite, (bool, np.bool_)):
        raise TypeError(f"allow_nonfinite must be True or False, got {allow_nonfinite!r}.")
    path = pathlib.Path(path)
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: cannot tell the format from the suffix {path.suffix!r}. Supported: "
                         f"{', '.join(sorted(_SUFFIXES))}. Rename the file or convert it.")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file. Pass the path of a {kind} file.")
    if kind == "csv":
        return _load_csv(path, column, bool(allow_nonfinite))
    if kind == "npy":
        values = _load_npy(path, column)
    elif kind == "npz":
        values = _load_npz(path, column)
    else:
        values = _load_parquet(path, column)
    return _finish(path, values, bool(allow_nonfinite))


# --- CSV --------------------------------------------------------------------------------------------

def _load_csv(path: pathlib.Path, column: Any, allow_nonfinite: bool) -> np.ndarray:
    try:
        return _read_csv(path, column, allow_nonfinite)
    except UnicodeDecodeError as err:
        # The decoder reads the file in blocks, so err.start counts from the start of a block: decode the bytes
        # again to name the byte's offset in the file, and its line.
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as whole:
            err = whole
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path} is not UTF-8 text: byte {err.object[err.start:err.start + 1]!r} at offset "
                         f"{err.start} (line {line}) cannot be decoded ({err.reason}). Re-save the file as UTF-8 "
                         f"(e.g. iconv -f latin1 -t utf-8 {path.name} > utf8.csv, or 'CSV UTF-8' in a "
                         "spreadsheet).") from None


def _read_csv(path: pathlib.Path, column: Any, allow_nonfinite: bool) -> np.ndarray:
    if column is not None and not isinstance(column, str):
        raise TypeError(f"column must be a header name (str) for a CSV file, got {column!r}.")
    # utf-8-sig: a byte-order mark written by spreadsheet programs is not part of the first header name.
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: the file is empty; it needs a header row and data rows.") from None
        header = [h.strip() for h in header]
        if column is None:
            if len(header) != 1:
                raise ValueError(f"{path} has {len(header)} columns {header}; pass column=<name> to pick one.")
            column = header[0]
        if column not in header:
            hint = " (the names are compared after stripping spaces)" if column != column.strip() else ""
            raise ValueError(f"column {column!r} is not in {path}; its columns are {header}{hint}.")
        if header.count(column) > 1:
            raise ValueError(f"{path}: the header names column {column!r} {header.count(column)} times; rename "
                             "the duplicates so that column picks exactly one.")
        j = header.index(column)
        values, nonfinite, first = [], 0, None
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}, line {line}: {len(row)} cell(s) under a header of {len(header)} "
                                 "column(s). Fix the row (a missing or an extra cell); gpuprivacy never guesses "
                                 "which cell belongs to which column.")
            cell = row[j].strip()
            try:
                value = float(cell)
            except ValueError:
                raise ValueError(f"{path}, line {line}, column {column!r}: {cell!r} is not a number. Clean the "
                                 f"column first; {_NEVER_DROPS}") from None
            if not math.isfinite(value):
                nonfinite += 1
                first = first or (line, cell)
            values.append(value)
    if not values:
        raise ValueError(f"{path}: column {column!r} has no data rows.")
    if nonfinite and not allow_nonfinite:
        raise ValueError(f"{path}, column {column!r}: {nonfinite} value(s) are not finite (NaN or inf); the first "
                         f"is {first[1]!r} on line {first[0]}. Remove or impute them first, or pass "
                         f"allow_nonfinite=True to keep them; {_NEVER_DROPS}")
    return np.array(values, dtype=np.float64)


# --- NumPy ------------------------------------------------------------------------------------------

def _np_load(path: pathlib.Path):
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as err:  # object arrays need pickle, which we never allow
        raise ValueError(f"{path}: cannot be read without pickle ({err}). Save a numeric array, e.g. "
                         "np.save(path, np.asarray(values, dtype=np.float64)).") from None
    except (OSError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"{path}: not a readable NumPy file ({err}).") from None


def _load_npy(path: pathlib.Path, column: Any) -> np.ndarray:
    array = _np_load(path)
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{path}: expected a single array in a .npy file, got {type(array).__name__}.")
    if column is not None and (isinstance(column, bool) or not isinstance(column, (int, np.integer))):
        raise TypeError(f"column must be None or an integer column index for a .npy file, got {column!r}.")
    if array.ndim == 1:
        if column is not None:
            raise ValueError(f"{path} holds a 1-d array of shape {array.shape}; pass column=None.")
        return _numeric(path, array, "the array")
    if array.ndim == 2:
        k = array.shape[1]
        if column is None:
            if k != 1:
                raise ValueError(f"{path} holds a 2-d array of shape {array.shape}; pass column=<index in "
                                 f"0..{k - 1}> to pick a column.")
            column = 0
        if not -k <= column < k:
            raise ValueError(f"column {column} is out of range for {path}, whose array has shape {array.shape}; "
                             f"pass an index in 0..{k - 1}.")
        return _numeric(path, array[:, column], f"column {column}")
    raise ValueError(f"{path} holds an array of shape {array.shape}; load_column reads a 1-d array or one column "
                     "of a 2-d array. Reshape or slice it first.")


def _load_npz(path: pathlib.Path, column: Any) -> np.ndarray:
    if column is not None and not isinstance(column, str):
        raise TypeError(f"column must be the key (str) of an array in a .npz file, got {column!r}.")
    with _np_load(path) as archive:
        keys = list(archive.files)
        if column is None:
            if len(keys) != 1:
                raise ValueError(f"{path} holds {len(keys)} arrays {keys}; pass column=<key> to pick one.")
            column = keys[0]
        if column not in keys:
            raise ValueError(f"key {column!r} is not in {path}; its keys are {keys}. Pass one as column.")
        array = archive[column]
    if array.ndim != 1:
        raise ValueError(f"{path}[{column!r}] has shape {array.shape}; load_column reads a 1-d array. Save the "
                         "column you need as its own key.")
    return _numeric(path, array, repr(column))


def _numeric(path: pathlib.Path, array: np.ndarray, what: str) -> np.ndarray:
    if array.dtype == np.bool_ or np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating):
        return array
    raise TypeError(f"{path}: {what} has dtype {array.dtype}, not real numbers. Convert it, e.g. "
                    "np.asarray(values, dtype=np.float64), and save it again.")


# --- Parquet ----------------------------------------------------------------------------------------

def _load_parquet(path: pathlib.Path, column: Any) -> np.ndarray:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ImportError(f"reading the Parquet file {path} needs pyarrow, which is not installed. Install it "
                          "with `pip install pyarrow`, or convert the file to CSV or .npy.") from None
    if column is not None and not isinstance(column, str):
        raise TypeError(f"column must be a column name (str) for a Parquet file, got {column!r}.")
    try:
        names = list(pyarrow.parquet.read_schema(path).names)
    except pyarrow.ArrowException as err:
        raise ValueError(f"{path}: not a readable Parquet file ({err}).") from None
    if column is None:
        if len(names) != 1:
            raise ValueError(f"{path} has {len(names)} columns {names}; pass column=<name> to pick one.")
        column = names[0]
    if column not in names:
        raise ValueError(f"column {column!r} is not in {path}; its columns are {names}.")
    if names.count(column) > 1:
        raise ValueError(f"{path}: the schema names column {column!r} {names.count(column)} times; rename the "
                         "duplicates so that column picks exactly one.")
    data = pyarrow.parquet.read_table(path, columns=[column]).column(0)
    kind = data.type
    types = pyarrow.types
    if not (types.is_integer(kind) or types.is_floating(kind) or types.is_boolean(kind) or types.is_decimal(kind)):
        raise TypeError(f"{path}: column {column!r} has type {kind}, not real numbers. Convert it first.")
    return data.cast(pyarrow.float64()).to_numpy(zero_copy_only=False)  # nulls become NaN


def _finish(path: pathlib.Path, values: np.ndarray, allow_nonfinite: bool) -> np.ndarray:
    out = np.array(values, dtype=np.float64, copy=True)
    if out.size == 0:
        raise ValueError(f"{path}: the column has no data rows.")
    bad = ~np.isfinite(out)
    if bad.any() and not allow_nonfinite:
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{path}: {int(bad.sum())} value(s) are not finite (NaN, inf or null); the first is "
                         f"{float(out[row])!r} at row {row} (0-based). Remove or impute them first, or pass "
                         f"allow_nonfinite=True to keep them; {_NEVER_DROPS}")
    return out
