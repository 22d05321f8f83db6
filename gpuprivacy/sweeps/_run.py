"""run_sweep: compute every cell of a config once, streaming rows to a JSON-lines file."""

from __future__ import annotations

import os
import pathlib
import time
import warnings
from typing import Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._progress import Progress
from gpuprivacy.sweeps import _registry, _trials
from gpuprivacy.sweeps._config import (SweepCell, SweepConfigError, canonical_json, cell_id_of, config_digest,
                                      expand_config)
from gpuprivacy.sweeps._preflight import (check_dataset_parameters, cells_to_do,
                                          resolve_results_path)
from gpuprivacy.sweeps._rows import (OUT_OF_MEMORY, infeasible_row, is_out_of_memory, study_row, summary_metrics,
                                     with_paired)
from gpuprivacy.sweeps._trials import CellRequest, DataSpec, run_cells
from gpuprivacy.sweeps._provenance import environment_info, utc_timestamp
from gpuprivacy.sweeps._results import DIGEST_KEY, ResultsFile, read_rows

SCHEMA_VERSION = 1


class SweepMemoryWarning(RuntimeWarning):
    """Cells ran out of device memory and were not saved: the same command again, with a smaller chunk,
    computes them (a condition of the run, not of the cell, so never stored as "infeasible")."""


class SweepSummary(NamedTuple):
    """What :func:`run_sweep` did.

    Attributes:
      name: the sweep's name (config ``name`` or the file stem).
      results_path: the JSON-lines file holding one row per cell.
      rows: the rows of this config's cells, in grid order (computed now or
        found in the file).
      num_cells: number of cells in the grid.
      num_computed: cells computed by this call.
      num_skipped: cells already present in the file (resumed).
      wall_s: wall-clock seconds of this call.
      num_infeasible: cells whose row says ``"status": "infeasible"`` (the mechanism refused to run
        them, e.g. a plan beyond its budget; the row holds the error).
      num_programs_compiled: programs this process compiled for the study engine during this call
        (draws and mechanism programs; a grid over traced parameters such as epsilon adds none). Programs
        read back from JAX's persistent compilation cache (on by default for the command line: a rerun or a
        resumed sweep) are not compiled: they count in ``num_programs_loaded``.
      compile_s: seconds this process spent compiling or loading them (included in ``wall_s``).
      num_out_of_memory: cells that ran out of device memory in this call. They have no row (``rows``
        lacks them): a later run computes them; a :class:`SweepMemoryWarning` says to lower the chunk.
      num_programs_loaded: programs read back from the persistent compilation cache instead of compiled.
    """

    name: str
    results_path: pathlib.Path
    rows: list
    num_cells: int
    num_computed: int
    num_skipped: int
    wall_s: float
    num_infeasible: int = 0
    num_programs_compiled: int = 0
    compile_s: float = 0.0
    num_out_of_memory: int = 0
    num_programs_loaded: int = 0


def cell_key(seed: int, cell_id: str) -> jax.Array:
    """The cell's typed key: ``fold_in`` of both 32-bit halves of the 64-bit cell id into ``key(seed)``.

    It depends only on the seed and the cell's canonical parameters, never on
    the position of the cell in the grid, so results are the same whatever
    the order, the grid around the cell, or how often the sweep was resumed.
    """
    word = int(cell_id, 16)
    key = jax.random.key(seed)
    key = jax.random.fold_in(key, (word >> 32) & 0xFFFFFFFF)
    return jax.random.fold_in(key, word & 0xFFFFFFFF)


def run_sweep(config: str | os.PathLike | Mapping, *, results_path: str | os.PathLike | None = None,
              progress: bool = True, max_trials: int | None = None, chunk: int | None = None) -> SweepSummary:
    """Runs every cell of a sweep config that is not yet in its results file.

    The config (a TOML path or an equivalent dict; format in
    :mod:`gpuprivacy.sweeps`) is parsed and every value checked before any
    cell runs. Each finished cell appends one JSON line to ``results_path``
    (flushed and fsync-ed) carrying the cell's canonical parameters, its
    ``cell_id`` (SHA-256 of those parameters, seed included), the metrics,
    and provenance: git SHA, versions, device kind, UTC timestamp.

    Resuming: the file is read first; a partial last line left by a killed
    run is truncated; cells whose ``cell_id`` is present are skipped. Each
    cell's PRNG key is ``fold_in(key(seed), cell_id)``, so a sweep killed at
    any moment and re-run ends with every cell exactly once and the same
    numbers as an uninterrupted run. Rows of other configs in the same file
    are kept and ignored.

    Several processes (``jax.distributed``, e.g. one per host): each takes every
    ``process_count``-th block of cells still to do and runs it on its own devices into its own
    part file, and process 0 merges the parts into ``results_path`` in grid order
    (the path must be on a filesystem every process sees). ``num_computed`` is then
    this process's share; the rows equal a single process's.

    Args:
      config: path to a TOML file, or a dict with the same structure.
      results_path: the JSON-lines file; default ``results/<config stem>.jsonl``
        (``results/<name>.jsonl`` for a dict) relative to the working directory.
      progress: show a progress bar on stderr (when it is a terminal), counting trials, with ETA.
      max_trials: cap every cell's trials (a smoke run of any config); capped cells are
        distinct cells with their own ids, so they never mix with full ones.
      chunk: trials per batched call for the study engine (default: sized by a byte budget), a
        positive multiple of the local device count; the numbers do not depend on it.

    Returns:
      A :class:`SweepSummary`.

    A cell that runs out of device memory (``MemoryError``, XLA's ``RESOURCE_EXHAUSTED``) gets no
    row, so the next run computes it; a :class:`SweepMemoryWarning` says how many and to lower ``chunk``.

    Raises:
      SweepConfigError: (a ``ValueError``) the config, a data law's parameters or ``chunk`` are
        invalid; the message names the key, the value and the fix. Raised before any cell runs and
        before the results file is created.
      SweepResultsError: the results file is locked by another sweep, damaged, or
        holds a row whose parameters do not match its cell id.
    """
    start = time.perf_counter()
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise SweepConfigError(f"chunk must be a positive integer (trials per batched call), got {chunk!r}. Pass "
                               "e.g. chunk=64, or None to size it by the memory budget.")
    devices = jax.local_device_count()
    if chunk is not None and chunk % devices:
        # Each chunk is split evenly over the local devices (gpuprivacy/sweeps/_trials.py); refused here, not
        # stored as an "infeasible" row for every cell.
        below, above = max(devices, chunk - chunk % devices), chunk + devices - chunk % devices
        raise SweepConfigError(f"chunk (--chunk) must be a multiple of the {devices} local devices (each gets an "
                               f"equal share of a chunk's trials), got {chunk}. Pass e.g. chunk={below} or "
                               f"chunk={above}, or None to size it by the memory budget.")
    programs_before, compile_before = _trials.COMPILE_COUNT[0], _trials.COMPILE_SECONDS[0]
    loaded_before = _trials.LOAD_COUNT[0]
    plan = expand_config(config, max_trials=max_trials)
    check_dataset_parameters(plan, plan.cells)  # before the results file is created
    results_path = resolve_results_path(config, plan, results_path)
    env = environment_info()
    if jax.process_count() > 1:
        rows, computed, out_of_memory = _run_processes(plan, results_path, env, chunk, progress)
    else:
        with ResultsFile(results_path) as results:
            done = {row["cell_id"]: row for row in results.rows}
            todo = cells_to_do(plan, done, results_path)
            computed, out_of_memory = _compute(plan, todo, env, chunk, progress, results, done)
        rows = [done[cell.cell_id] for cell in plan.cells if cell.cell_id in done]  # not: out of memory
    if out_of_memory:
        cell, error = out_of_memory[0]
        warnings.warn(f"{len(out_of_memory)} cell(s) ran out of device memory and were not saved (the first: "
                      f"{cell.mechanism} on {cell.dataset} {dict(cell.dataset_params)}: {error[:300]}). Run the "
                      f"same command again with a smaller --chunk (chunk=...; this run: "
                      f"{chunk if chunk is not None else 'sized by the memory budget'}) to compute them; the cells "
                      "that finished are kept.", SweepMemoryWarning, stacklevel=2)
    return SweepSummary(name=plan.name, results_path=results_path, rows=rows, num_cells=len(plan.cells),
                        num_computed=computed, num_skipped=len(rows) - computed,
                        wall_s=time.perf_counter() - start,
                        num_infeasible=sum(row.get("status") == "infeasible" for row in rows),
                        num_programs_compiled=_trials.COMPILE_COUNT[0] - programs_before,
                        compile_s=_trials.COMPILE_SECONDS[0] - compile_before,
                        num_out_of_memory=len(out_of_memory),
                        num_programs_loaded=_trials.LOAD_COUNT[0] - loaded_before)


def data_key(seed: int, cell: SweepCell) -> jax.Array:
    """The key of a cell's datasets: from the seed and the dataset's canonical parameters only.

    Every mechanism and privacy parameter of a sweep therefore meets the same datasets, trial by
    trial (common random numbers): comparisons between mechanisms are paired, and each dataset is
    drawn once for all the cells that use it.
    """
    return cell_key(seed, cell_id_of({"seed": seed, "dataset": cell.dataset, "dataset_params": cell.dataset_params}))


def blocks_of(todo) -> list[list]:
    """The cells to do, in blocks that share their datasets (same dataset, parameters and trials), in grid
    order of each block's first cell; a cell that does not run on the study engine is a block of its own."""
    blocks: dict = {}
    for cell in todo:
        entry = _registry.get_mechanism(cell.mechanism)
        ident = (canonical_json([cell.dataset, cell.dataset_params, cell.num_trials]) if entry.kind == "release"
                 else cell.cell_id)
        blocks.setdefault(ident, []).append(cell)
    return list(blocks.values())


def _compute(plan, todo, env, chunk, progress, results, done, select: tuple[int, int] = (0, 1)) -> tuple[int, list]:
    """Computes ``todo`` block by block, appending each cell's row to ``results`` (durably) once its block is
    done. ``select = (i, p)``: only every p-th block from the i-th (one process's share).

    Returns the number of rows written and ``[(cell, error)]`` for the cells that ran out of device memory
    (not written, so that a later run computes them)."""
    blocks = blocks_of(todo)[select[0]::select[1]]
    data_cache: dict[str, tuple[jax.Array, _registry.SweepData]] = {}
    computed, out_of_memory = 0, []
    with Progress(sum(cell.num_trials for block in blocks for cell in block), label=f"sweep {plan.name}",
                  enabled=progress) as bar:
        for block in blocks:
            t0 = time.perf_counter()
            entry = _registry.get_mechanism(block[0].mechanism)
            if entry.kind == "release":
                rows = _study_rows(block, chunk, bar)
            else:
                try:
                    rows = [_cell_row(block[0], entry, data_cache)]
                except (MemoryError, RuntimeError) as err:
                    if not is_out_of_memory(err):
                        raise
                    rows = [{"status": OUT_OF_MEMORY, "error": f"{type(err).__name__}: {err}"[:2000]}]
                bar.update(block[0].num_trials)
            block_s = time.perf_counter() - t0
            for cell, row in zip(block, rows):
                if row.get("status") == OUT_OF_MEMORY:
                    out_of_memory.append((cell, row["error"]))
                    continue
                row = {
                    "schema": SCHEMA_VERSION,
                    "cell_id": cell.cell_id,
                    "sweep": plan.name,
                    "config_digest": config_digest(plan),
                    "seed": plan.seed,
                    **cell.canonical(),
                    **row,
                    "cell_wall_s": block_s / len(block),
                    "timestamp": utc_timestamp(),
                    **env,
                }
                done[cell.cell_id] = results.append(row)
                computed += 1
    return computed, out_of_memory


def _part_paths(results_path: pathlib.Path) -> list[pathlib.Path]:
    return sorted(results_path.parent.glob(results_path.name + ".process*"))


def _merge_parts(plan, results_path: pathlib.Path) -> None:
    """Process 0: appends the rows of every process's part file to the results file in grid order, once each,
    then deletes the parts. Also run first, to fold in the parts of a run that was killed."""
    parts = _part_paths(results_path)
    if not parts:
        return
    found = {}
    for part in parts:
        for row in read_rows(part):
            found.setdefault(row["cell_id"], row)
    with ResultsFile(results_path) as results:
        present = {row["cell_id"] for row in results.rows}
        order = [cell.cell_id for cell in plan.cells if cell.cell_id in found]
        order += [cid for cid in found if cid not in set(order)]  # rows of other configs, kept as found
        for cid in order:
            if cid not in present:
                row = {k: v for k, v in found[cid].items() if k != DIGEST_KEY}
                results.append(row)
    for part in parts:
        part.unlink()


def _run_processes(plan, results_path: pathlib.Path, env, chunk, progress) -> tuple[list, int, list]:
    """Cells over the processes of a ``jax.distributed`` run (a filesystem all of them see).

    Each process computes every ``process_count``-th block of cells still to do (cells sharing their datasets;
    from its index), on its own devices,
    into its own part file ``<results>.process<i>``; process 0 then merges the parts into the results file in
    grid order. Cells are keyed by their ids, so the rows equal a single process's, whatever the split.
    """
    from jax.experimental import multihost_utils

    me, processes = jax.process_index(), jax.process_count()
    results_path.parent.mkdir(parents=True, exist_ok=True)
    if me == 0:
        _merge_parts(plan, results_path)
    multihost_utils.sync_global_devices("gpuprivacy sweep: parts merged")
    done = {row["cell_id"]: row for row in read_rows(results_path)} if results_path.exists() else {}
    todo = cells_to_do(plan, done, results_path)
    with ResultsFile(results_path.with_name(f"{results_path.name}.process{me}")) as part:
        computed, out_of_memory = _compute(plan, todo, env, chunk, progress and me == 0, part, dict(done),
                                           select=(me, processes))
    multihost_utils.sync_global_devices("gpuprivacy sweep: cells computed")
    if me == 0:
        _merge_parts(plan, results_path)
    multihost_utils.sync_global_devices("gpuprivacy sweep: results written")
    done = {row["cell_id"]: row for row in read_rows(results_path)}
    return [done[cell.cell_id] for cell in plan.cells if cell.cell_id in done], computed, out_of_memory


def _cell_row(cell: SweepCell, entry, data_cache: dict) -> dict:
    """A cell of a summarising sweep mechanism (``fn(key, queries, params, num_trials)``)."""
    data_id = canonical_json([cell.dataset, cell.dataset_params])
    if data_id not in data_cache:
        data = _load_data(cell)
        data_cache[data_id] = (jnp.asarray(data.queries), data)
    queries, data = data_cache[data_id]
    params = dict(cell.mechanism_params, sensitivity=data.sensitivity, query_max=data.query_max)
    metrics = summary_metrics(cell, entry.fn(cell_key(cell.seed, cell.cell_id), queries, params, cell.num_trials))
    return {"num_queries": int(data.queries.shape[0]), "sensitivity": data.sensitivity,
            "query_max": data.query_max, "metrics": metrics}


def data_spec(cell: SweepCell) -> DataSpec:
    entry = _registry.get_dataset(cell.dataset)
    if entry.kind == "drawn":
        params = dict(cell.dataset_params)
        n, fresh = params.pop("n"), params.pop("fresh")
        return DataSpec(cell.dataset, n, params, distribution=entry.payload, fresh=fresh)
    data = _load_data(cell)
    return DataSpec(cell.dataset, int(data.queries.shape[0]), {}, fixed=data.queries, fresh=False)


# What a mechanism raises for a cell it cannot run (a parameter it refuses for this data size, a plan beyond
# its budget, memory): the cell's row records it and the sweep goes on. Anything else is a bug and propagates.
INFEASIBLE = (ValueError, TypeError, ArithmeticError, MemoryError, RuntimeError)


def _study_rows(block: list, chunk, bar) -> list[dict]:
    """The cells of a block (same datasets), run by the study engine (gpuprivacy/sweeps/_trials.py).

    All at once first; if that fails, cell by cell, so that an infeasible cell gets a row saying why
    (``"status": "infeasible"``, null metrics) and its block-mates their results.
    """
    data = data_spec(block[0])
    key = data_key(block[0].seed, block[0])
    requests = [CellRequest(_registry.get_mechanism(cell.mechanism).payload, dict(cell.mechanism_params),
                            cell_key(cell.seed, cell.cell_id)) for cell in block]
    try:
        exact = bool(block[0].options.get("exact", False))
        trials = run_cells(requests, data, block[0].num_trials, data_key=key, chunk=chunk, progress=bar, exact=exact)
        rows = [study_row(cell, request.mechanism, data, t) for cell, request, t in zip(block, requests, trials)]
        return with_paired(block, requests, trials, rows)
    except INFEASIBLE as err:
        if len(block) == 1:
            return [infeasible_row(block[0], data, requests[0].mechanism, err)]
    rows, trials = [], []
    for cell, request in zip(block, requests):
        try:
            (t,) = run_cells([request], data, cell.num_trials, data_key=key, chunk=chunk,
                             exact=bool(cell.options.get("exact", False)))
            rows.append(study_row(cell, request.mechanism, data, t))
            trials.append(t)
        except INFEASIBLE as err:
            rows.append(infeasible_row(cell, data, request.mechanism, err))
            trials.append(None)
    return with_paired(block, requests, trials, rows)  # the same data key: still the same datasets


def _load_data(cell: SweepCell) -> _registry.SweepData:
    entry = _registry.get_dataset(cell.dataset)
    data = entry.fn(dict(cell.dataset_params))
    if not isinstance(data, _registry.SweepData):
        raise TypeError(f"sweep dataset {cell.dataset!r} must return a SweepData, got {type(data).__name__}.")
    queries = np.asarray(data.queries, dtype=np.float64)
    if queries.ndim != 1 or queries.shape[0] < 1 or not np.isfinite(queries).all():
        raise ValueError(f"sweep dataset {cell.dataset!r} returned queries of shape {queries.shape} (need a "
                         "non-empty 1-D vector of finite floats).")
    return _registry.SweepData(queries, float(data.sensitivity), float(data.query_max))

