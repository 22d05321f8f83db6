"""Batched evaluation of an untrusted oracle over a subset family.

The oracle ``f(rows, valid) -> value`` is evaluated on every subset of a
family. Privacy requirement (ours, needed for the wrappers of Linder et al. 2025 to be private): the
oracle must see only the rows of its subset. Each subset is therefore
*gathered* into a fixed-capacity block

* in canonical order: rows sorted lexicographically by value (the dataset is
  treated as a multiset, so neither original positions nor the original
  order reach the oracle; tied rows are identical, so tie-breaking leaks
  nothing);
* padded with zeros after the ``|subset|`` real rows, with ``valid`` marking
  the real ones;
* of a public capacity: the largest subset of the family, or the
  ``capacity`` argument. A family that contains the whole dataset has
  capacity n; when n is private (add/remove neighbours, Linder et al. 2025, Sec. 2), pass a
  public upper bound so that no block's shape reveals n.

Sorting happens once per call (NumPy, on the host), so order-statistic
oracles become gathers (the median of a block is ``rows[(c - 1) // 2]`` and
``rows[c // 2]``), never a per-subset sort.

Only the engine's modules know about chunks and meshes (STYLE rule 8): this
one (the driver), :mod:`._mesh` (the mesh), :mod:`._evaluate_plan` (the
byte-budget plan) and :mod:`._evaluate_sharded` (the per-device kernel). The subset
axis is split with ``shard_map`` over a ``jax.sharding.Mesh`` with a named
``"subsets"`` axis (all local devices by default, all processes after
:func:`~gpuprivacy.oracle.initialize_distributed`): each device evaluates its own contiguous run
of subsets, chunk by chunk, and keeps its outputs; removal families are
unranked on the device, materialised ones are prepared on the host by the
process that owns the device. Micro-batches and chunks are sized from byte
budgets of the backend. The value of each subset depends only on that subset
and the compiled per-device body does not depend on the chunk size or the
device count, so results agree bit for bit (docs/engine.md).
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np
from jax.sharding import Mesh

from gpuprivacy._checks import check_chunk_size, check_data, check_int
from gpuprivacy._progress import Progress
from gpuprivacy.oracle._evaluate_plan import _check_traces, plan_evaluation
from gpuprivacy.oracle._evaluate_sharded import _ChunkRunner
from gpuprivacy.oracle._mesh import SUBSETS_AXIS, default_mesh
from gpuprivacy.oracle._trust import resolve_oracle
from gpuprivacy.subsets import SubsetFamily, check_family_size

DEFAULT_MAX_QUERIES = 1 << 27
"""Default public budget of oracle calls per evaluation (about 1.3e8); pass ``max_queries`` to change it."""
# An order of magnitude for the time a refused family would take (a CPU evaluates ~1e6 subsets/s).
_SUBSETS_PER_SECOND = 1e6


def canonical_order(data: np.ndarray) -> np.ndarray:
    """Permutation sorting rows lexicographically (stable), as a NumPy int array."""
    if data.ndim == 1:
        return np.argsort(data, kind="stable")
    flat = data.reshape(data.shape[0], -1)
    # np.lexsort sorts by the last key first: reverse the columns.
    return np.lexsort(flat.T[::-1])


def gather_subset(data, kept_indices) -> tuple[np.ndarray, np.ndarray]:
    """What the oracle sees for one subset: ``(rows, valid)`` with capacity = |subset|.

    A slow, obviously-correct reference used by tests and by per-subset loops.
    """
    data = np.asarray(data)
    rows = data[np.asarray(kept_indices, dtype=np.int64)]
    rows = rows[canonical_order(rows)]
    return rows, np.ones(rows.shape[0], dtype=bool)


def evaluate(oracle_fn: Callable, data, family: SubsetFamily, *, chunk_size: int | None = None,
             mesh: Mesh | None = None, max_queries: int | None = DEFAULT_MAX_QUERIES, capacity: int | None = None,
             progress: bool = False) -> jax.Array:
    """Evaluates ``oracle_fn`` on every subset of ``family``.

    Args:
      oracle_fn: the statistic ``f(rows, valid) -> value`` (see
        :class:`gpuprivacy.OracleFn`), traced once with ``rows`` of shape
        ``[capacity, *data.shape[1:]]`` and vmapped over subsets. An
        analyst's oracle (:func:`~gpuprivacy.oracle.untrusted`, or any plain
        function) is traced in the sandbox process and rebuilt from allowed
        primitives; the package's oracles and :func:`~gpuprivacy.oracle.trusted`
        ones run in-process.
      data: the dataset ``[n, ...]``, real-valued, no NaN or inf.
      family: a :class:`~gpuprivacy.subsets.SubsetFamily` over n rows.
      chunk_size: subsets per device per step (default: the backend's byte
        budget, 32 MiB of gathered rows on a CPU, 2 GiB on an accelerator),
        rounded up to whole micro-batches, at least two. Results do not
        depend on it, bit for bit.
      mesh: a mesh with a ``"subsets"`` axis; default: every device of every
        process (:func:`default_mesh`). Each device evaluates its own share.
      max_queries: refuse families with more subsets than this (a public limit;
        default :data:`DEFAULT_MAX_QUERIES`, about 1.3e8; None for no limit).
      capacity: the public block size the oracle sees, at least the family's
        largest subset (the default). Under add/remove neighbours n itself
        is private, and a family that contains the whole dataset (e.g.
        ``removals``) has capacity n, so each block's shape would tell the
        oracle n even on a proper subset. Pass a public upper bound on n
        there; the oracle then sees only its rows, padded to ``capacity``.
      progress: show a progress bar on stderr.

    Returns:
      ``values[k, ...]``: the oracle's value on each subset, in family order,
      as a device array (every process receives all values).

    Raises:
      ValueError / TypeError: bad data, a family of another n, chunk_size < 1,
        a family larger than ``max_queries``, outputs that cannot fit the
        device's memory (refused before any work, with what would fit), an
        oracle factory instead of an oracle.
      OracleRefused: an untrusted oracle that fails to trace or uses anything
        off the allow-list (custom batching, callbacks, effects, randomness...).
    """
    data = check_data(data)
    if not isinstance(family, SubsetFamily):
        raise TypeError(f"family must be a gpuprivacy.subsets.SubsetFamily, got {type(family).__name__}. Build one "
                        "with gpuprivacy.subsets.removals/partition/random_subsets/from_indices.")
    if family.n != data.shape[0]:
        raise ValueError(f"family is over n = {family.n} rows but data has {data.shape[0]} rows. Build the family "
                         "for this dataset.")
    chunk_size = check_chunk_size(chunk_size)
    if max_queries is not None and family.num_subsets > check_int("max_queries", max_queries, minimum=1):
        hours = family.num_subsets / _SUBSETS_PER_SECOND / 3600
        raise ValueError(f"{family.name or 'the family'} has {family.num_subsets:,} subsets ({family.num_subsets:.2e}), "
                         f"more than max_queries={max_queries}; at about {_SUBSETS_PER_SECOND:.0e} subsets per "
                         f"second (a CPU) that is about {hours:,.1f} hours. Use a smaller family, or pass "
                         "max_queries=N to raise the budget (max_queries=None for none).")
    check_family_size(family, max_queries)
    if capacity is None:
        capacity = family.capacity
    else:
        capacity = check_int("capacity", capacity, minimum=1)
        if capacity < family.capacity:
            raise ValueError(f"capacity must be at least the family's largest subset ({family.capacity} rows), got "
                             f"{capacity}. Pass a public upper bound on the subset sizes, or leave it out.")
    # The one gate: trusted and library oracles as they are; anything else traced in the sandbox and rebuilt
    # from allowed primitives (or refused) before any data is touched.
    oracle_fn = resolve_oracle(oracle_fn, rows_shape=(capacity,) + data.shape[1:], rows_dtype=data.dtype,
                               capacity=capacity)
    _check_traces(oracle_fn, (capacity,) + data.shape[1:], data.dtype.name)

    n = data.shape[0]
    order = canonical_order(data)
    rank = np.empty(n + 1, dtype=np.int32)
    rank[order] = np.arange(n, dtype=np.int32)
    rank[n] = n  # the sentinel stays the sentinel
    sorted_data = data[order]

    mesh = default_mesh() if mesh is None else mesh
    if SUBSETS_AXIS not in mesh.shape:
        raise ValueError(f"mesh must have an axis named {SUBSETS_AXIS!r}, got axes {tuple(mesh.shape)}. Build it "
                         "with gpuprivacy.oracle.default_mesh() or Mesh(devices, ('subsets',)).")
    plan = plan_evaluation(oracle_fn, data, family, capacity=capacity, chunk_size=chunk_size, mesh=mesh)
    runner = _ChunkRunner(oracle_fn, family, sorted_data, rank, plan, mesh)
    out = runner.empty_outputs()
    with Progress(family.num_subsets, "evaluate", enabled=progress) as bar:
        done = 0
        for chunk in range(plan.num_chunks):
            out = runner(out, chunk)  # asynchronous: the host prepares the next chunk while devices work
            step = min(plan.per_device * plan.num_devices, family.num_subsets - done)
            done += step
            bar.update(step)
    return runner.finish(out)
