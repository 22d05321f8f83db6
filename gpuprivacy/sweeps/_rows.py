"""A sweep cell's row: its metrics, its guarantee as the release states it, and its status.

``study_row`` turns a cell's per-trial results (:class:`~gpuprivacy.sweeps.CellTrials`) into the row a sweep
writes; ``with_paired`` adds the paired differences of the cells of one block (same datasets); an infeasible or
out-of-domain cell gets a row that says why, never ``"status": "ok"``.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from gpuprivacy.sweeps._config import SweepCell
from gpuprivacy.sweeps._mechanisms import TARGETS
from gpuprivacy.sweeps._metrics import MEAN_METRICS, cell_metrics
from gpuprivacy.sweeps._paired import PairedCell, paired_entries
from gpuprivacy.sweeps._trials import ROWS_OUTSIDE_DOMAIN, DataSpec

# The status of a cell that ran out of device memory: never written, so a rerun computes it.
OUT_OF_MEMORY = "out-of-memory"


def summary_metrics(cell: SweepCell, raw) -> dict:
    """The metrics a summarising sweep mechanism returned, as JSON numbers (non-finite ones as null)."""
    if not isinstance(raw, Mapping) or not raw:
        raise TypeError(f"sweep mechanism {cell.mechanism!r} must return a non-empty dict of metrics, got "
                        f"{type(raw).__name__}.")
    out = {}
    for name, value in raw.items():
        value = float(np.asarray(value))  # raises for non-scalars
        out[str(name)] = value if math.isfinite(value) else None  # JSON has no NaN/inf: stored as null
    return out


def with_paired(block: list, requests: list, trials: list, rows: list[dict]) -> list[dict]:
    """Adds to each released cell's row its paired differences with the comparable cells of its block
    (``"paired"``, when there is one; gpuprivacy/sweeps/_paired.py): the per-trial errors of every cell on
    the same datasets exist together only here, so cells of different blocks or runs are never paired."""
    index, cells = [], []
    for i, (cell, request, t, row) in enumerate(zip(block, requests, trials, rows)):
        if t is None or row.get("status") != "ok":
            continue
        index.append(i)
        cells.append(PairedCell(cell.cell_id, cell.mechanism, dict(cell.mechanism_params), t.values, t.targets,
                                t.valid, t.population, no_mean=error_has_no_mean(request.mechanism, cell.mechanism_params),
                                real=TARGETS[request.mechanism.target].kind == "real", exact=dict(t.exact or {})))
    for i, entries in zip(index, paired_entries(cells)):
        if entries:
            rows[i] = {**rows[i], "paired": entries}
    return rows


def error_has_no_mean(mechanism, params) -> bool:
    return mechanism.error_has_no_mean is not None and bool(mechanism.error_has_no_mean(params))


def is_out_of_memory(err: Exception) -> bool:
    """Whether ``err`` says the device ran out of memory (a condition of this run, not of the cell)."""
    text = str(err)
    return isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in text or "Out of memory" in text \
        or "out of memory" in text


def infeasible_row(cell: SweepCell, data: DataSpec, mechanism, err: Exception | str) -> dict:
    if not isinstance(err, str) and is_out_of_memory(err):
        # Not stored: a later run (another --chunk, a larger device) computes it; "infeasible" would be for good.
        return {"status": OUT_OF_MEMORY, "error": f"{type(err).__name__}: {err}"[:2000]}
    message = err if isinstance(err, str) else f"{type(err).__name__}: {err}".strip()
    return {"n": data.n, "status": "infeasible", "error": message[:2000], "guarantee": None,
            "target": mechanism.target, "population_value": None, "chunk": None, "devices": None,
            "metrics": {}}


def study_row(cell: SweepCell, mechanism, data: DataSpec, trials) -> dict:
    outside = trials.info.get(ROWS_OUTSIDE_DOMAIN)
    if outside is not None and np.any(np.asarray(outside) > 0):
        return outside_domain_row(cell, data, mechanism, np.asarray(outside))
    no_mean = error_has_no_mean(mechanism, cell.mechanism_params)
    metrics = cell_metrics(trials, cell.mechanism_params, target_kind=TARGETS[mechanism.target].kind,
                           coverage_radius=cell.options.get("coverage_radius"),
                           extra=tuple(cell.options.get("metrics", ())), error_has_no_mean=no_mean)
    metrics = {k: (float(v) if math.isfinite(v) else None) for k, v in metrics.items()}
    notes = {"undefined_metrics": f"{', '.join(m for m in MEAN_METRICS if not m.endswith('_se'))} undefined: "
                                  "this release's error has no mean (Cauchy noise, unclamped), so a sample mean "
                                  "estimates nothing; compare abs_error_q50, abs_error_q90, abs_error_q99"} \
        if no_mean else {}
    guarantee = guarantee_json(trials.guarantee)
    if not mechanism.private:
        # The nonprivate baseline: no guarantee at all, said plainly (never an epsilon; metrics epsilon/delta null).
        guarantee = {"type": "NotPrivate", "kind": "none", "private": False}
    elif guarantee is not None:
        guarantee["neighbours"] = mechanism.neighbours  # the relation under which it holds (a reader compares)
    return {"n": data.n, "status": "ok", **notes, "guarantee": guarantee, "target": mechanism.target,
            "population_value": trials.population, "chunk": trials.chunk, "devices": trials.devices,
            "metrics": metrics}


def outside_domain_row(cell: SweepCell, data: DataSpec, mechanism, outside: np.ndarray) -> dict:
    """The row of a cell whose data have rows outside the declared domain and that does not clip.

    The direct call raises on such data ("data has k row(s) outside the declared domain"); the sweep says so in
    the cell's row instead of reporting a release on data the mechanism never accepted.
    """
    params = cell.mechanism_params
    first = int(np.argmax(outside > 0))
    message = (f"ValueError: the data of {int(np.sum(outside > 0))} of {outside.shape[0]} trials have rows outside "
               f"the declared domain [lower, upper] = [{params.get('lower')!r}, {params.get('upper')!r}] (trial "
               f"{first}: {int(outside[first])} of {data.n} rows), and the cell does not clip. Set clip = true in "
               f"the mechanism's parameters to clamp them to the domain, or widen lower/upper (public values, not "
               f"read from the data).")
    return infeasible_row(cell, data, mechanism, message)


def guarantee_json(guarantee) -> dict | None:
    if guarantee is None:
        return None
    fields = {k: float(v) for k, v in vars(guarantee).items()} if hasattr(guarantee, "__dict__") else {}
    return {"type": type(guarantee).__name__, **fields}
