"""What a sweep checks before its first cell runs (and before the results file is created, where it can).

Every data law's parameters (by the law), every mechanism's parameters (by the mechanism, stating its guarantee
abstractly on data of each size), and the results file: it must hold only this config's rows, each matching its
cell id. :func:`~gpuprivacy.sweeps.run_sweep` and the dry run (:func:`~gpuprivacy.sweeps.dry_run`) share them.
"""

from __future__ import annotations

import math
import pathlib
from typing import Mapping

import jax.numpy as jnp

from gpuprivacy.sweeps import _registry
from gpuprivacy.sweeps._config import SweepConfigError, canonical_json, config_digest
from gpuprivacy.sweeps._results import SweepResultsError
from gpuprivacy.sweeps._trials import release_guarantee


def resolve_results_path(config, plan, results_path) -> pathlib.Path:
    """``results_path``, or the default ``results/<config stem>.jsonl`` (``results/<name>.jsonl`` for a dict)."""
    if results_path is None:
        stem = pathlib.Path(config).stem if not isinstance(config, Mapping) else plan.name
        results_path = pathlib.Path("results") / f"{stem}.jsonl"
    return pathlib.Path(results_path)


def check_one_config(plan, done: dict, results_path) -> None:
    """A results file holds the rows of one config: rows of another (an edited seed, trials or grid) are refused
    with both digests named, so a report never mixes them."""
    mine = config_digest(plan)
    ids = {cell.cell_id for cell in plan.cells}
    for row in done.values():
        theirs = row.get("config_digest")
        if theirs == mine or (theirs is None and row.get("cell_id") in ids):
            continue  # this config's row (or, from before digests, one of its cells)
        raise SweepResultsError(
            f"{results_path} holds the results of another config (config digest {theirs or 'none'}, cell "
            f"{row.get('cell_id')}) and this config's digest is {mine}: an edited config (seed, trials, grid) "
            "writes a new file. Pass another results path (--results NEW.jsonl), or delete the file to start "
            "over; rerun the same config to resume it.")


def cells_to_do(plan, done: dict, results_path) -> list:
    """The cells not in ``done``, after checking that every row found belongs to its cell id."""
    check_one_config(plan, done, results_path)
    for cell in plan.cells:
        row = done.get(cell.cell_id)
        if row is not None and any(row.get(k) != v for k, v in cell.canonical().items()):
            found = {k: row.get(k) for k in cell.canonical()}
            raise SweepResultsError(
                f"{results_path}: the row with cell_id {cell.cell_id} has parameters {found}, but that id "
                f"belongs to {cell.canonical()}. The file was edited or written by an incompatible version; "
                "move it aside or pass another results_path.")
    todo = [cell for cell in plan.cells if cell.cell_id not in done]
    check_release_parameters(plan, todo)
    return todo


def check_dataset_parameters(plan, cells) -> None:
    """Every distinct data law of the cells is checked by the law itself (``check_parameters``) before any cell
    runs and before the results file is created: ``scale = -1``, ``df = 0`` or ``low >= high`` is an error naming
    the dataset, the parameters and the law's message, not an infeasible row."""
    checked = set()
    for cell in cells:
        entry = _registry.get_dataset(cell.dataset)
        if entry.kind != "drawn":
            continue
        params = {k: v for k, v in cell.dataset_params.items() if k not in ("n", "fresh")}
        ident = canonical_json([cell.dataset, params])
        if ident in checked:
            continue
        checked.add(ident)
        try:
            entry.payload.check_parameters(**params)
        except (ValueError, TypeError) as err:
            raise SweepConfigError(f"{plan.source}: dataset {cell.dataset!r} with parameters {params} is refused "
                                   f"by its law: {err} Fix it in the [dataset] table.") from None


def check_release_parameters(plan, cells) -> None:
    """Every distinct (mechanism, parameters) of the study cells is checked by the mechanism itself, before any
    cell runs: its guarantee is stated abstractly (no noise) on a small dataset of each data size in the sweep,
    so a value the mechanism refuses (epsilon <= 0, lower >= upper, an unstatable guarantee) is an error naming
    the cell. Refused at some sizes only, the parameters are valid and those cells are infeasible: they run,
    and their rows say why they could not."""
    outcomes: dict[str, list] = {}
    checked = set()
    for cell in cells:
        entry = _registry.get_mechanism(cell.mechanism)
        if entry.kind != "release":
            continue
        n = int(cell.dataset_params.get("n", 8)) if _registry.get_dataset(cell.dataset).kind == "drawn" else 8
        ident = canonical_json([cell.mechanism, cell.mechanism_params])
        if (ident, n) in checked:
            continue
        checked.add((ident, n))
        params = cell.mechanism_params
        lower, upper = params.get("lower"), params.get("upper")  # None: unset (the nonprivate baseline's default)
        lower, upper = -math.inf if lower is None else lower, math.inf if upper is None else upper
        # A small dataset inside the mechanism's public bounds, so only the parameters can be refused.
        example = (jnp.full((n,), (lower + upper) / 2, jnp.float64) if math.isfinite(lower) and math.isfinite(upper)
                   else jnp.linspace(0.0, 1.0, n, dtype=jnp.float64))
        try:
            release_guarantee(entry.payload, dict(cell.mechanism_params), example)
            outcomes.setdefault(ident, []).append(None)
        except (ValueError, TypeError) as err:
            outcomes.setdefault(ident, []).append((cell, err))
    for results in outcomes.values():
        if all(result is not None for result in results):
            cell, err = results[0]
            raise SweepConfigError(f"{plan.source}: the cell {canonical_json(cell.canonical())} is refused by "
                                   f"{cell.mechanism}: {err}")
