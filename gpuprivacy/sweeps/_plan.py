"""A sweep's dry run (``gpuprivacy sweep CONFIG --plan``): what a run would do, computing nothing.

It expands and checks the config exactly as :func:`~gpuprivacy.sweeps.run_sweep` does (every error it would
raise before the first cell, it raises), reads which cells the results file already holds, and lists the
cells still to run, in the blocks that share their datasets, with the programs the study engine would
compile for them (the same grouping and program keys as the engine, so a program shared by several blocks,
the same mechanism at the same n, is counted once). Nothing is drawn, released, compiled or written.
"""

from __future__ import annotations

import os
import pathlib
from typing import Mapping, NamedTuple

import jax

from gpuprivacy.sweeps import _registry
from gpuprivacy.sweeps._config import expand_config
from gpuprivacy.sweeps._results import read_rows
from gpuprivacy.sweeps._preflight import check_dataset_parameters, cells_to_do, resolve_results_path
from gpuprivacy.sweeps._run import INFEASIBLE, blocks_of, data_spec
from gpuprivacy.sweeps._trials import CellRequest, program_keys

# Seconds one mechanism program takes to compile, for the plan's estimate only: the median over the mechanism
# programs of experiments/bench_compile.py on a 2-core CPU (BENCHMARKS.md); a GPU backend is of the same order.
SECONDS_PER_PROGRAM = 1.0


class SweepDryRun(NamedTuple):
    """What :func:`~gpuprivacy.sweeps.run_sweep` would do now (see :func:`dry_run`).

    Attributes:
      name: the sweep's name.
      results_path: its results file.
      num_cells: cells in the grid.
      num_done: cells the results file already holds (a rerun skips them).
      num_to_run: cells a run would compute.
      num_trials: trials it would run, over those cells.
      num_programs: distinct programs it would compile (or read back from the persistent compilation cache).
      estimated_compile_s: ``num_programs`` x :data:`SECONDS_PER_PROGRAM`, a rough figure for a cold cache.
      blocks: one dict per block of cells that share their datasets: ``dataset``, ``dataset_params``,
        ``trials``, ``cells`` (``"mechanism {params}"`` each), ``programs`` (how many this block adds) and,
        for a block the engine would refuse, ``infeasible`` (the reason).
    """

    name: str
    results_path: pathlib.Path
    num_cells: int
    num_done: int
    num_to_run: int
    num_trials: int
    num_programs: int
    estimated_compile_s: float
    blocks: list


def dry_run(config: str | os.PathLike | Mapping, *, results_path: str | os.PathLike | None = None,
               max_trials: int | None = None, chunk: int | None = None) -> SweepDryRun:
    """The dry run of :func:`~gpuprivacy.sweeps.run_sweep` with the same arguments: a :class:`SweepDryRun`.

    Raises what ``run_sweep`` raises before its first cell (an invalid config, a data law's parameters, a
    results file of another config), and nothing else: a block the engine would refuse is listed as
    infeasible with the reason.
    """
    plan = expand_config(config, max_trials=max_trials)
    check_dataset_parameters(plan, plan.cells)
    results_path = resolve_results_path(config, plan, results_path)
    done = {row["cell_id"]: row for row in read_rows(results_path)} if results_path.is_file() else {}
    todo = cells_to_do(plan, done, results_path)
    seen: set = set()
    blocks = []
    for block in blocks_of(todo):
        first = block[0]
        entry = _registry.get_mechanism(first.mechanism)
        item = {"dataset": first.dataset, "dataset_params": dict(first.dataset_params),
                "trials": first.num_trials,
                "cells": [f"{cell.mechanism} {dict(cell.mechanism_params)}" for cell in block], "programs": 0}
        if entry.kind == "release":
            try:
                data = data_spec(first)
                requests = [CellRequest(_registry.get_mechanism(cell.mechanism).payload, dict(cell.mechanism_params),
                                        jax.random.key(0)) for cell in block]
                keys = program_keys(requests, data, first.num_trials, chunk=chunk,
                                    exact=bool(first.options.get("exact", False)))
            except INFEASIBLE as err:
                item["infeasible"] = f"{type(err).__name__}: {err}"[:500]
                keys = []
            new = [k for k in keys if k not in seen]
            seen.update(new)
            item["programs"] = len(new)
        blocks.append(item)
    num_programs = len(seen)
    return SweepDryRun(name=plan.name, results_path=results_path, num_cells=len(plan.cells),
                     num_done=len(plan.cells) - len(todo), num_to_run=len(todo),
                     num_trials=sum(cell.num_trials for cell in todo), num_programs=num_programs,
                     estimated_compile_s=num_programs * SECONDS_PER_PROGRAM, blocks=blocks)
