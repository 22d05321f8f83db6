"""run_sweep: compute every cell of a config once, streaming rows to a JSON-lines file."""

from __future__ import annotations

import math
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
from gpuprivacy.mechanisms import guarantee_of
from gpuprivacy.sweeps._config import (SweepCell, SweepConfigError, canonical_json, cell_id_of, config_digest,
                                      expand_config)
from gpuprivacy.sweeps._mechanisms import TARGETS
from gpuprivacy.sweeps._metrics import MEAN_METRICS, cell_metrics
from gpuprivacy.sweeps._trials import ROWS_OUTSIDE_DOMAIN, CellRequest, DataSpec, run_cells
from gpuprivacy.sweeps._provenance import environment_info, utc_timestamp
from gpuprivacy.sweeps._results import DIGEST_KEY, ResultsFile, SweepResultsError, read_rows

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
        (draws and mechanism programs; a grid over traced parameters such as epsilon adds none).
      compile_s: seconds this process spent compiling them (included in ``wall_s``).
      num_out_of_memory: cells that ran out of device memory in this call. They have no row (``rows``
        lacks them): a later run computes them; a :class:`SweepMemoryWarning` says to lower the chunk.
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


def _metrics(cell: SweepCell, raw) -> dict:
    if not isinstance(raw, Mapping) or not raw:
        raise TypeError(f"sweep mechanism {cell.mechanism!r} must return a non-empty dict of metrics, got "
                        f"{type(raw).__name__}.")
    out = {}
    for name, value in raw.items():
        value = float(np.asarray(value))  # raises for non-scalars
        out[str(name)] = value if math.isfinite(value) else None  # JSON has no NaN/inf: stored as null
    return out


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
    plan = expand_config(config, max_trials=max_trials)
    _check_dataset_parameters(plan, plan.cells)  # before the results file is created
    if results_path is None:
        stem = pathlib.Path(config).stem if not isinstance(config, Mapping) else plan.name
        results_path = pathlib.Path("results") / f"{stem}.jsonl"
    results_path = pathlib.Path(results_path)
    env = environment_info()
    if jax.process_count() > 1:
        rows, computed, out_of_memory = _run_processes(plan, results_path, env, chunk, progress)
    else:
        with ResultsFile(results_path) as results:
            done = {row["cell_id"]: row for row in results.rows}
            todo = _todo(plan, done, results_path)
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
                        num_out_of_memory=len(out_of_memory))


def _check_one_config(plan, done: dict, results_path) -> None:
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


def _todo(plan, done: dict, results_path) -> list:
    """The cells not in ``done``, after checking that every row found belongs to its cell id."""
    _check_one_config(plan, done, results_path)
    for cell in plan.cells:
        row = done.get(cell.cell_id)
        if row is not None and any(row.get(k) != v for k, v in cell.canonical().items()):
            found = {k: row.get(k) for k in cell.canonical()}
            raise SweepResultsError(
                f"{results_path}: the row with cell_id {cell.cell_id} has parameters {found}, but that id "
                f"belongs to {cell.canonical()}. The file was edited or written by an incompatible version; "
                "move it aside or pass another results_path.")
    todo = [cell for cell in plan.cells if cell.cell_id not in done]
    _check_release_parameters(plan, todo)
    return todo


def _check_dataset_parameters(plan, cells) -> None:
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


def data_key(seed: int, cell: SweepCell) -> jax.Array:
    """The key of a cell's datasets: from the seed and the dataset's canonical parameters only.

    Every mechanism and privacy parameter of a sweep therefore meets the same datasets, trial by
    trial (common random numbers): comparisons between mechanisms are paired, and each dataset is
    drawn once for all the cells that use it.
    """
    return cell_key(seed, cell_id_of({"seed": seed, "dataset": cell.dataset, "dataset_params": cell.dataset_params}))


def _blocks(todo) -> list[list]:
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
    blocks = _blocks(todo)[select[0]::select[1]]
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
                    if not _out_of_memory(err):
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
    todo = _todo(plan, done, results_path)
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
    metrics = _metrics(cell, entry.fn(cell_key(cell.seed, cell.cell_id), queries, params, cell.num_trials))
    return {"num_queries": int(data.queries.shape[0]), "sensitivity": data.sensitivity,
            "query_max": data.query_max, "metrics": metrics}


def _data_spec(cell: SweepCell) -> DataSpec:
    entry = _registry.get_dataset(cell.dataset)
    if entry.kind == "drawn":
        params = dict(cell.dataset_params)
        n, fresh = params.pop("n"), params.pop("fresh")
        return DataSpec(cell.dataset, n, params, distribution=entry.payload, fresh=fresh)
    data = _load_data(cell)
    return DataSpec(cell.dataset, int(data.queries.shape[0]), {}, fixed=data.queries, fresh=False)


# The status of a cell that ran out of device memory: never written, so a rerun computes it.
OUT_OF_MEMORY = "out-of-memory"

# What a mechanism raises for a cell it cannot run (a parameter it refuses for this data size, a plan beyond
# its budget, memory): the cell's row records it and the sweep goes on. Anything else is a bug and propagates.
_INFEASIBLE = (ValueError, TypeError, ArithmeticError, MemoryError, RuntimeError)


def _study_rows(block: list, chunk, bar) -> list[dict]:
    """The cells of a block (same datasets), run by the study engine (gpuprivacy/sweeps/_trials.py).

    All at once first; if that fails, cell by cell, so that an infeasible cell gets a row saying why
    (``"status": "infeasible"``, null metrics) and its block-mates their results.
    """
    data = _data_spec(block[0])
    key = data_key(block[0].seed, block[0])
    requests = [CellRequest(_registry.get_mechanism(cell.mechanism).payload, dict(cell.mechanism_params),
                            cell_key(cell.seed, cell.cell_id)) for cell in block]
    try:
        exact = bool(block[0].options.get("exact", False))
        trials = run_cells(requests, data, block[0].num_trials, data_key=key, chunk=chunk, progress=bar, exact=exact)
        return [_study_row(cell, request.mechanism, data, t) for cell, request, t in zip(block, requests, trials)]
    except _INFEASIBLE as err:
        if len(block) == 1:
            return [_infeasible_row(block[0], data, requests[0].mechanism, err)]
    rows = []
    for cell, request in zip(block, requests):
        try:
            (t,) = run_cells([request], data, cell.num_trials, data_key=key, chunk=chunk,
                             exact=bool(cell.options.get("exact", False)))
            rows.append(_study_row(cell, request.mechanism, data, t))
        except _INFEASIBLE as err:
            rows.append(_infeasible_row(cell, data, request.mechanism, err))
    return rows


def _out_of_memory(err: Exception) -> bool:
    """Whether ``err`` says the device ran out of memory (a condition of this run, not of the cell)."""
    text = str(err)
    return isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in text or "Out of memory" in text \
        or "out of memory" in text


def _infeasible_row(cell: SweepCell, data: DataSpec, mechanism, err: Exception | str) -> dict:
    if not isinstance(err, str) and _out_of_memory(err):
        # Not stored: a later run (another --chunk, a larger device) computes it; "infeasible" would be for good.
        return {"status": OUT_OF_MEMORY, "error": f"{type(err).__name__}: {err}"[:2000]}
    message = err if isinstance(err, str) else f"{type(err).__name__}: {err}".strip()
    return {"n": data.n, "status": "infeasible", "error": message[:2000], "guarantee": None,
            "target": mechanism.target, "population_value": None, "chunk": None, "devices": None,
            "metrics": {}}


def _study_row(cell: SweepCell, mechanism, data: DataSpec, trials) -> dict:
    outside = trials.info.get(ROWS_OUTSIDE_DOMAIN)
    if outside is not None and np.any(np.asarray(outside) > 0):
        return _outside_domain_row(cell, data, mechanism, np.asarray(outside))
    no_mean = mechanism.error_has_no_mean is not None and bool(mechanism.error_has_no_mean(cell.mechanism_params))
    metrics = cell_metrics(trials, cell.mechanism_params, target_kind=TARGETS[mechanism.target].kind,
                           coverage_radius=cell.options.get("coverage_radius"),
                           extra=tuple(cell.options.get("metrics", ())), error_has_no_mean=no_mean)
    metrics = {k: (float(v) if math.isfinite(v) else None) for k, v in metrics.items()}
    notes = {"undefined_metrics": f"{', '.join(m for m in MEAN_METRICS if not m.endswith('_se'))} undefined: "
                                  "this release's error has no mean (Cauchy noise, unclamped), so a sample mean "
                                  "estimates nothing; compare abs_error_q50, abs_error_q90, abs_error_q99"} \
        if no_mean else {}
    guarantee = _guarantee_json(trials.guarantee)
    if guarantee is not None:
        guarantee["neighbours"] = mechanism.neighbours  # the relation under which it holds (a reader compares)
    return {"n": data.n, "status": "ok", **notes, "guarantee": guarantee, "target": mechanism.target,
            "population_value": trials.population, "chunk": trials.chunk, "devices": trials.devices,
            "metrics": metrics}


def _outside_domain_row(cell: SweepCell, data: DataSpec, mechanism, outside: np.ndarray) -> dict:
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
    return _infeasible_row(cell, data, mechanism, message)


def _guarantee_json(guarantee) -> dict | None:
    if guarantee is None:
        return None
    fields = {k: float(v) for k, v in vars(guarantee).items()} if hasattr(guarantee, "__dict__") else {}
    return {"type": type(guarantee).__name__, **fields}


def _check_release_parameters(plan, cells) -> None:
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
        lower, upper = params.get("lower", -math.inf), params.get("upper", math.inf)
        # A small dataset inside the mechanism's public bounds, so only the parameters can be refused.
        example = (jnp.full((n,), (lower + upper) / 2, jnp.float64) if math.isfinite(lower) and math.isfinite(upper)
                   else jnp.linspace(0.0, 1.0, n, dtype=jnp.float64))
        try:
            guarantee_of(entry.payload.release, jax.random.key(0), example, **cell.mechanism_params)
            outcomes.setdefault(ident, []).append(None)
        except (ValueError, TypeError) as err:
            outcomes.setdefault(ident, []).append((cell, err))
    for results in outcomes.values():
        if all(result is not None for result in results):
            cell, err = results[0]
            raise SweepConfigError(f"{plan.source}: the cell {canonical_json(cell.canonical())} is refused by "
                                   f"{cell.mechanism}: {err}")


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

