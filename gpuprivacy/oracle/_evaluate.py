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

Only this module knows about chunks and meshes (STYLE rule 8): subsets are
processed in chunks of ``chunk_size`` per device so peak memory is bounded by
the chunk, not by k; the subset axis of each chunk is sharded over a
``jax.sharding.Mesh`` with a named ``"subsets"`` axis (all local devices by
default, all processes after :func:`initialize_distributed`). The value of
each subset depends only on that subset, so results do not depend on chunk
size or device count.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gpuprivacy._checks import check_chunk_size, check_data, check_int
from gpuprivacy._progress import Progress
from gpuprivacy.oracle._trust import resolve_oracle
from gpuprivacy.oracle._isolation import COMPARE_ALL_WIDTH, apply_oracle, blocks_from_removed, gather_rows
from gpuprivacy.subsets import SubsetFamily, binomial_table, check_family_size, level_offsets, unrank_removed_device

SUBSETS_AXIS = "subsets"
# Elements of gathered rows per device per chunk when chunk_size is None (~32 MiB of float64).
_DEFAULT_CHUNK_ELEMENTS = 1 << 22
# Subsets per vmapped oracle call; chunks are whole numbers of micro-batches.
MICRO_BATCH = 128
DEFAULT_MAX_QUERIES = 1 << 27
"""Default public budget of oracle calls per evaluation (about 1.3e8); pass ``max_queries`` to change it."""
# An order of magnitude for the time a refused family would take (a CPU evaluates ~1e6 subsets/s).
_SUBSETS_PER_SECOND = 1e6


def default_mesh() -> Mesh:
    """A one-axis mesh named ``"subsets"`` over every device of every process."""
    return Mesh(np.asarray(jax.devices()), (SUBSETS_AXIS,))


def initialize_distributed(coordinator_address: str, num_processes: int, process_id: int, **kwargs) -> None:
    """Joins a multi-host run (a thin wrapper over :func:`jax.distributed.initialize`).

    Call it in every process before any other JAX work; afterwards
    :func:`evaluate` shards subsets over the devices of all processes and
    every process receives all values. On CPU, JAX uses gloo collectives.
    """
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, **kwargs)


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
      chunk_size: subsets per device per step (default: about 2**22 gathered
        elements per device), rounded up to a multiple of ``MICRO_BATCH``
        (128), at least two. Results do not depend on it, bit for bit.
      mesh: a mesh with a ``"subsets"`` axis; default: all devices when there
        are several, else the default device.
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
      ``values[k, ...]``: the oracle's value on each subset, in family order.

    Raises:
      ValueError / TypeError: bad data, a family of another n, chunk_size < 1,
        a family larger than ``max_queries``, an oracle factory instead of an oracle.
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

    if mesh is None and jax.device_count() > 1:
        mesh = default_mesh()
    num_devices = 1 if mesh is None else mesh.shape[SUBSETS_AXIS]
    row_elements = max(1, int(np.prod(data.shape[1:], dtype=np.int64)))
    if chunk_size is None:
        chunk_size = max(1, _DEFAULT_CHUNK_ELEMENTS // (capacity * row_elements))
    per_device = min(chunk_size, math.ceil(family.num_subsets / num_devices))
    step = max(2, math.ceil(per_device / MICRO_BATCH)) * MICRO_BATCH * num_devices

    runner = _ChunkRunner(oracle_fn, family, sorted_data, rank, step, mesh, capacity)
    pending, outputs = [], []
    with Progress(family.num_subsets, "evaluate", enabled=progress) as bar:
        for start in range(0, family.num_subsets, step):
            stop = min(start + step, family.num_subsets)
            pending.append((runner(start), stop - start))
            if len(pending) > 2:  # keep two chunks in flight, bound host memory
                result, count = pending.pop(0)
                outputs.append(jax.tree.map(lambda x: np.asarray(x)[:count], result))
                bar.update(count)
        for result, count in pending:
            outputs.append(jax.tree.map(lambda x: np.asarray(x)[:count], result))
            bar.update(count)
    return jax.tree.map(lambda *xs: jnp.asarray(np.concatenate(xs, axis=0)), *outputs)


@functools.lru_cache(maxsize=256)
def _check_traces(oracle_fn, rows_shape, dtype_name) -> None:
    """Traces the oracle once on an abstract block, so a broken one fails here with its name, not deep in XLA."""
    rows = jax.ShapeDtypeStruct(rows_shape, np.dtype(dtype_name))
    valid = jax.ShapeDtypeStruct(rows_shape[:1], np.dtype(bool))
    try:
        jax.eval_shape(oracle_fn, rows, valid)
    except Exception as error:  # noqa: BLE001  (any failure to trace is the oracle's, reported with its name)
        name = getattr(oracle_fn, "__qualname__", None) or repr(oracle_fn)
        raise TypeError(f"the oracle {name} cannot be evaluated on a block rows[{', '.join(map(str, rows_shape))}] "
                        f"{dtype_name}, valid[{rows_shape[0]}] bool: {type(error).__name__}: {error}. An oracle "
                        "f(rows, valid) returns a number (or an array of numbers) computed with jax.numpy.") from None


class _ChunkRunner:
    """Prepares one chunk's inputs on the host and runs the jitted kernel."""

    def __init__(self, oracle_fn, family, sorted_data, rank, step, mesh, capacity):
        self.family, self.rank, self.step, self.mesh, self.capacity = family, rank, step, mesh, capacity
        self.n = family.n
        if mesh is None:
            self.put_replicated = jnp.asarray
            self.put_sharded = jnp.asarray
        else:
            replicated = NamedSharding(mesh, PartitionSpec())
            sharded = NamedSharding(mesh, PartitionSpec(SUBSETS_AXIS))
            self.put_replicated = functools.partial(_global_array, sharding=replicated)
            self.put_sharded = functools.partial(_global_array, sharding=sharded)
        self.sorted_data = self.put_replicated(sorted_data)
        kind = family.kind
        if kind == "removals":
            self.table = self.put_replicated(binomial_table(family.n, family.depth))
            self.offsets = self.put_replicated(np.asarray(level_offsets(family.n, family.depth), np.int64))
            self.rank_device = self.put_replicated(rank)
        # Many removed rows: slot positions are cheaper to find on the host (a mask
        # and a boolean compaction in NumPy) than on the device, so such families
        # reach the kernel in kept form.
        self.compact_on_host = kind == "removed" and family.removed_width > COMPARE_ALL_WIDTH
        kernel_kind = "kept" if self.compact_on_host else kind
        self.kernel = _compiled_kernel(oracle_fn, kernel_kind, family.n, capacity, family.depth, step, mesh)

    def __call__(self, start: int):
        family, step = self.family, self.step
        stop = min(start + step, family.num_subsets)
        if family.kind == "removals":
            bounds = np.asarray([start, family.num_subsets - 1], dtype=np.int64)
            return self.kernel(self.sorted_data, self.rank_device, self.table, self.offsets,
                               self.put_replicated(bounds))
        # Materialised forms: map to canonical positions and sort on the host
        # (NumPy's sort is several times faster than XLA's on CPU).
        rows = np.arange(start, start + step).clip(max=stop - 1)  # pad the last chunk by repetition
        if self.compact_on_host:
            return self.kernel(self.sorted_data, self.put_sharded(_kept_positions(
                self.rank[family.removed[rows]], self.n, self.capacity)))
        if family.kind == "removed":
            positions = self.rank[family.removed[rows]]
        else:
            positions = np.where(family.kept_valid[rows], self.rank[family.kept[rows]], self.n).astype(np.int32)
        positions.sort(axis=1)
        if family.kind != "removed" and positions.shape[1] < self.capacity:  # pad to the public capacity
            padding = np.full((positions.shape[0], self.capacity - positions.shape[1]), self.n, np.int32)
            positions = np.concatenate([positions, padding], axis=1)
        return self.kernel(self.sorted_data, self.put_sharded(positions))


def _kept_positions(removed_positions, n, capacity):
    """Ascending kept canonical positions ``int32[B, capacity]`` (sentinel n pads) from removed ones."""
    batch = removed_positions.shape[0]
    keep = np.ones((batch, n + 1), dtype=bool)
    keep[np.arange(batch)[:, None], removed_positions] = False  # the sentinel column n absorbs padding
    keep = keep[:, :n]
    sizes = keep.sum(axis=1)
    if (sizes == capacity).all():
        return np.broadcast_to(np.arange(n, dtype=np.int32), keep.shape)[keep].reshape(batch, capacity)
    out = np.full((batch, capacity), n, dtype=np.int32)
    rows, cols = np.nonzero(keep)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out[rows, np.arange(rows.size) - np.repeat(starts, sizes)] = cols
    return out


def _global_array(value, sharding):
    value = np.asarray(value)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def _constrain(x, mesh):
    if mesh is None:
        return x
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec(SUBSETS_AXIS)))


@functools.lru_cache(maxsize=64)
def _compiled_kernel(oracle_fn, kind, n, capacity, depth, step, mesh):
    # Cached so that repeated calls with the same oracle and shapes do not recompile.
    out_sharding = None if mesh is None else NamedSharding(mesh, PartitionSpec())

    if kind == "removals":
        def kernel(sorted_data, rank, table, offsets, bounds):
            # bounds = [first global index, last valid global index]; the tail repeats the last subset.
            index = jnp.minimum(bounds[0] + jnp.arange(step, dtype=jnp.int64), bounds[1])

            def make_block(index):
                removed = unrank_removed_device(index, table, offsets, n, depth)
                removed = jnp.sort(rank[removed], axis=-1)  # canonical positions; sentinel n stays last
                return blocks_from_removed(sorted_data, removed, n, capacity)

            return apply_oracle(oracle_fn, make_block, _constrain(index, mesh), micro_batch=MICRO_BATCH)
    elif kind == "removed":
        def kernel(sorted_data, positions):
            return apply_oracle(oracle_fn, lambda p: blocks_from_removed(sorted_data, p, n, capacity),
                                _constrain(positions, mesh), micro_batch=MICRO_BATCH)
    else:
        def kernel(sorted_data, positions):
            return apply_oracle(oracle_fn, lambda p: gather_rows(sorted_data, p, p < n, n), _constrain(positions, mesh),
                                micro_batch=MICRO_BATCH)

    return jax.jit(kernel, out_shardings=out_sharding)
