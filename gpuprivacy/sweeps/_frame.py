"""Sweep results as one flat table: a column per axis, metric and guarantee field (pandas, optional)."""

from __future__ import annotations

import os

from gpuprivacy.sweeps._results import DIGEST_KEY, read_rows

# Row fields that describe the cell (kept first, in this order, when present).
_IDENTITY = ("sweep", "config_digest", "seed", "cell_id", "mechanism", "dataset", "num_trials", "n", "status",
             "target", "population_value", "error")
# "paired": a list per cell (its paired differences), one record per pair in read_paired / paired_rows.
_DROPPED = ("schema", DIGEST_KEY, "paired")


def flat_rows(path: str | os.PathLike) -> list[dict]:
    """The rows of a results file (digest-checked), each flattened to one level.

    Mechanism and dataset parameters become columns by their names (a dataset parameter whose name a
    mechanism parameter already has is ``dataset_<name>``); the guarantee becomes ``guarantee`` (its type)
    and ``guarantee_<field>``; metrics keep their names (``mae``, ``mae_se``, ...) unless a column already
    has it, then ``metric_<name>``; the environment fields (versions, device, timestamp) stay as they are.
    A row's paired differences (a list) are left out: :func:`paired_rows` and :func:`read_paired` give them.
    """
    out = []
    for row in read_rows(path):
        flat = {k: row[k] for k in _IDENTITY if k in row}
        for key, value in (row.get("mechanism_params") or {}).items():
            flat[key] = value
        for key, value in (row.get("dataset_params") or {}).items():
            flat[key if key not in flat else f"dataset_{key}"] = value
        guarantee = row.get("guarantee") or {}
        flat["guarantee"] = guarantee.get("type")
        for key, value in guarantee.items():
            if key != "type":
                flat[f"guarantee_{key}"] = value
        for key, value in (row.get("metrics") or {}).items():
            flat[key if key not in flat else f"metric_{key}"] = value
        for key, value in row.items():
            if key not in flat and key not in _DROPPED and key not in ("mechanism_params", "dataset_params",
                                                                     "guarantee", "metrics"):
                flat[key] = value
        out.append(flat)
    return out


def read_results(path: str | os.PathLike):
    """A sweep's results file as a flat ``pandas.DataFrame``: one row per cell, one column per axis and metric.

    Columns: the cell (``sweep``, ``config_digest``, ``seed``, ``cell_id``, ``mechanism``, ``dataset``,
    ``num_trials``, ``n``, ``status``, ...), every mechanism and dataset parameter, the guarantee
    (``guarantee``, ``guarantee_epsilon``, ...), every metric (``mae``, ``mae_se``, ``abs_error_q50``, ...) and
    the environment; see :func:`flat_rows` for how clashing names are told apart. Rows are checked by their
    digests as they are read. Needs pandas (``pip install "gpuprivacy[pandas]"``); :func:`flat_rows` gives the
    same table as a list of dicts without it.

    Examples:
      >>> frame = read_results("results/five_medians.jsonl")  # doctest: +SKIP
      >>> frame.groupby(["mechanism", "n"])["mae"].mean()  # doctest: +SKIP
    """
    try:
        import pandas
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("read_results returns a pandas DataFrame; install pandas (pip install "
                          "\"gpuprivacy[pandas]\"), or use gpuprivacy.sweeps.flat_rows for a list of dicts.") from None
    return pandas.DataFrame.from_records(flat_rows(path))


def paired_rows(path: str | os.PathLike) -> list[dict]:
    """The paired differences of a results file (digest-checked), one flat dict per (cell, comparable cell).

    Each has the cell (``sweep``, ``cell_id``, ``mechanism``, ``dataset``, ``num_trials``, ``n``), its mechanism
    and dataset parameters as columns (as :func:`flat_rows` names them), the other cell (``versus_cell``,
    ``versus_mechanism`` and its parameters as ``versus_<name>``) and the pair's fields: ``trials``,
    ``abs_error_difference`` and ``_se``, ``population_abs_error_difference`` and ``_se``, ``win_rate`` and
    ``_se``, ``population_win_rate`` and ``_se``, ``tie_rate``, where both cells have exact errors (``exact =
    true``) ``expected_abs_error_difference`` and ``_se``, ``expected_abs_error_max_difference`` and
    ``expected_abs_error_dominance``, and, where a mean is undefined, ``note`` (see gpuprivacy/sweeps/_paired.py).
    """
    from gpuprivacy.sweeps._paired import paired_records

    return paired_records(read_rows(path))


def read_paired(path: str | os.PathLike):
    """A results file's paired differences as a ``pandas.DataFrame``, one row per pair (see :func:`paired_rows`).

    Examples:
      >>> pairs = read_paired("results/five_medians.jsonl")  # doctest: +SKIP
      >>> pairs[pairs.versus_mechanism == "nonprivate"][["mechanism", "epsilon", "abs_error_difference"]]  # doctest: +SKIP
    """
    try:
        import pandas
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("read_paired returns a pandas DataFrame; install pandas (pip install "
                          "\"gpuprivacy[pandas]\"), or use gpuprivacy.sweeps.paired_rows for a list of dicts.") from None
    return pandas.DataFrame.from_records(paired_rows(path))
