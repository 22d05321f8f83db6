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

Only this module knows about chunks and meshes (STYLE rule 8). The subset
axis is split with ``shard_map`` over a ``jax.sharding.Mesh`` with a named
``"subsets"`` axis (all local devices by default, all processes after
:func:`initialize_distributed`): each device evaluates its own contiguous run
of subsets, chunk by chunk, and keeps its outputs; removal families are
unranked on the device, materialised ones are prepared on the host by the
process that owns the device. Micro-batches and chunks are sized from byte
budgets of the backend. The value of each subset depends only on that subset
and the compiled per-device body does not depend on the chunk size or the
device count, so results agree bit for bit (docs/engine.md).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gpuprivacy._checks import check_chunk_size, check_data, check_int
from gpuprivacy._memory import gib, usable_bytes, work_budgets
from gpuprivacy._progress import Progress
from gpuprivacy.oracle._trust import resolve_oracle
from gpuprivacy.oracle._isolation import (COMPARE_ALL_WIDTH, apply_oracle, apply_order_statistic, blocks_from_removed,
                                          gather_rows, kept_slot_reader, order_statistic_form, removed_slot_reader)
from gpuprivacy.subsets import (SubsetFamily, binomial_table, check_family_size, level_offsets, sort_small,
                                unrank_removed_device)

SUBSETS_AXIS = "subsets"
_MIN_MICRO_BATCH = 128
_ORDER_STATISTIC_READ_BYTES = 256  # four slots, their positions and the removed set of one subset


def _family_resident(platform: str) -> bool:
    """Whether explicit families are uploaded once and prepared on the devices (accelerators), or prepared
    chunk by chunk on the host, where NumPy's sorts and compactions beat XLA's (a CPU backend)."""
    return platform != "cpu" if _RESIDENT_FAMILIES is None else _RESIDENT_FAMILIES


_RESIDENT_FAMILIES: bool | None = None  # tests set it to run the accelerator path on a CPU
_MAX_MICRO_BATCH = 1 << 16
MICRO_BATCH = _MIN_MICRO_BATCH
"""The smallest micro-batch (subsets per vmapped oracle call); the engine's is sized per backend."""
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


class EvaluationPlan(NamedTuple):
    """How :func:`evaluate` splits a family over devices, chunks and micro-batches (all public quantities).

    Device ``d`` owns the contiguous run of subsets ``[d * per_device_total, (d + 1) * per_device_total)``
    and evaluates it in ``num_chunks`` steps of ``per_device`` subsets, as ``per_device // micro_batch``
    vmapped oracle calls; its outputs stay on it. The tail past the family repeats its last subset
    and is cut off.
    """

    num_subsets: int
    num_devices: int
    micro_batch: int
    per_device: int
    num_chunks: int
    per_device_total: int
    output_bytes: int
    block_bytes: int
    capacity: int
    family_resident: bool


def plan_evaluation(oracle_fn, data, family: SubsetFamily, *, capacity: int, chunk_size: int | None,
                    mesh: Mesh) -> EvaluationPlan:
    """Sizes an evaluation from byte budgets of the backend, and refuses what cannot fit before any work.

    The micro-batch (subsets per vmapped oracle call) depends only on the
    backend and the block's bytes, never on the chunk size or device count,
    so the compiled per-device body, and with it every floating-point
    reduction, is the same however the work is split: results agree bit for
    bit. The chunk (subsets per device per step) comes from ``chunk_size`` or
    from the backend's budget.
    """
    platform = mesh.devices.flat[0].platform
    row_bytes = max(1, int(np.prod(data.shape[1:], dtype=np.int64))) * data.dtype.itemsize
    block_bytes = capacity * row_bytes
    # The package's order statistics read a few slots per subset, not the block: size their calls by that.
    read_bytes = _ORDER_STATISTIC_READ_BYTES if (data.ndim == 1 and order_statistic_form(oracle_fn)) else block_bytes
    micro_budget, chunk_budget = work_budgets("oracle", platform)
    micro = _MIN_MICRO_BATCH
    while micro * 2 * read_bytes <= micro_budget and micro * 2 <= _MAX_MICRO_BATCH:
        micro *= 2
    num_devices = mesh.shape[SUBSETS_AXIS]
    k = family.num_subsets
    if chunk_size is None:
        chunk_size = max(1, chunk_budget // block_bytes)
    per_device_needed = math.ceil(k / num_devices)
    per_device = min(chunk_size, per_device_needed)
    per_device = max(2, math.ceil(per_device / micro)) * micro  # whole micro-batches, at least two (see apply_oracle)
    num_chunks = math.ceil(per_device_needed / per_device)
    out = _check_traces(oracle_fn, (capacity,) + data.shape[1:], data.dtype.name)  # traced once, cached
    per_subset_out = sum(int(np.prod(x.shape, dtype=np.int64)) * x.dtype.itemsize for x in jax.tree.leaves(out))
    resident = family.kind in ("kept", "removed") and _family_resident(platform)
    family_bytes = 0
    if resident:  # the family's canonical positions live on the devices, each device holding its run
        width = family.removed_width if family.kind == "removed" else max(capacity, family.kept.shape[1])
        family_bytes = 4 * width * num_chunks * per_device
    plan = EvaluationPlan(k, num_devices, micro, per_device, num_chunks, num_chunks * per_device,
                          per_subset_out * num_chunks * per_device + family_bytes, block_bytes, capacity, resident)
    _check_fits(plan, family, mesh)
    return plan


def _check_fits(plan: EvaluationPlan, family: SubsetFamily, mesh: Mesh) -> None:
    """Refuses, before any work, outputs or blocks that cannot fit one device's memory."""
    available, where = usable_bytes(mesh.devices.flat[0])
    working = 4 * plan.micro_batch * plan.block_bytes  # gathered block, positions, mask, oracle temporaries
    if plan.output_bytes + working <= available:
        return
    fits = max(0, (available - working)) // max(1, plan.output_bytes // max(1, plan.per_device_total))
    raise ValueError(
        f"{family.name or 'the family'} has {plan.num_subsets:,} subsets; their outputs need "
        f"{gib(plan.output_bytes)} on each of {plan.num_devices} device(s) plus {gib(working)} of working blocks, "
        f"more than the {gib(available)} planned for {where}. About {fits * plan.num_devices:,} subsets would fit "
        f"here: split the family (evaluate parts of it), use more devices (a mesh over several), or a smaller "
        f"capacity (now {plan.block_bytes:,} bytes per block).")


@functools.lru_cache(maxsize=256)
def _check_traces(oracle_fn, rows_shape, dtype_name):
    """Traces the oracle once on an abstract block, so a broken one fails here with its name, not deep in XLA.

    Returns the output's shape structure (cached: the plan reads it without tracing again).
    """
    rows = jax.ShapeDtypeStruct(rows_shape, np.dtype(dtype_name))
    valid = jax.ShapeDtypeStruct(rows_shape[:1], np.dtype(bool))
    try:
        return jax.eval_shape(oracle_fn, rows, valid)
    except Exception as error:  # noqa: BLE001  (any failure to trace is the oracle's, reported with its name)
        name = getattr(oracle_fn, "__qualname__", None) or repr(oracle_fn)
        raise TypeError(f"the oracle {name} cannot be evaluated on a block rows[{', '.join(map(str, rows_shape))}] "
                        f"{dtype_name}, valid[{rows_shape[0]}] bool: {type(error).__name__}: {error}. An oracle "
                        "f(rows, valid) returns a number (or an array of numbers) computed with jax.numpy.") from None


class _ChunkRunner:
    """Feeds each device its own share of a chunk and runs the jitted per-device kernel.

    Device ``d`` evaluates global subsets ``d * L + chunk * per_device + [0, per_device)``
    (``L = plan.per_device_total``) and writes them into its own slice of the
    output, which never leaves it. Removal families are unranked on the
    device from the chunk number alone; materialised families are prepared on
    the host, each process only for the rows of its own devices.
    """

    def __init__(self, oracle_fn, family, sorted_data, rank, plan, mesh):
        self.family, self.rank, self.plan, self.mesh = family, rank, plan, mesh
        self.n = family.n
        self.replicated = NamedSharding(mesh, PartitionSpec())
        self.sharded = NamedSharding(mesh, PartitionSpec(SUBSETS_AXIS))
        put = functools.partial(_global_array, sharding=self.replicated)
        self.sorted_data = put(sorted_data)
        kind = family.kind
        self.tables = ()
        if kind == "removals":
            self.tables = (put(rank), put(binomial_table(family.n, family.depth)),
                           put(np.asarray(level_offsets(family.n, family.depth), np.int64)))
        self.capacity = capacity = plan.capacity
        # Many removed rows: on a CPU host, slot positions are cheaper to find with a mask and a boolean
        # compaction in NumPy than on the device, so such families reach the kernel in kept form.
        # (An order statistic reads its few slots straight from the removed positions: no compaction.)
        self.compact_on_host = kind == "removed" and family.removed_width > COMPARE_ALL_WIDTH and \
            not plan.family_resident and not (sorted_data.ndim == 1 and order_statistic_form(oracle_fn))
        kernel_kind = "kept" if self.compact_on_host else kind
        if plan.family_resident:
            # One upload: each device receives its whole run of (unsorted) canonical positions, prepared by
            # the process that owns it; chunks are then sliced, sorted and expanded on the device.
            kernel_kind = "resident-" + kind
            run = plan.per_device_total
            width = family.removed_width if kind == "removed" else max(capacity, family.kept.shape[1])

            def local(index):
                device = (index[0].start or 0) // run
                rows = np.arange(device * run, (device + 1) * run).clip(max=family.num_subsets - 1)
                return self._unsorted_positions(rows, width)

            self.tables = (jax.make_array_from_callback((run * plan.num_devices, width), self.sharded, local),)
        self.kernel, self.out_tree = _compiled_kernel(oracle_fn, kernel_kind, family.n, capacity, family.depth,
                                                      plan.micro_batch, plan.per_device, plan.num_subsets,
                                                      plan.per_device_total, mesh,
                                                      jax.ShapeDtypeStruct(sorted_data.shape, sorted_data.dtype))

    def empty_outputs(self):
        total = self.plan.per_device_total * self.plan.num_devices
        return [_zeros((total,) + leaf.shape, leaf.dtype, self.sharded) for leaf in self.out_tree[0]]

    def __call__(self, out, chunk: int):
        chunk_arg = jnp.asarray(chunk, jnp.int64)
        if self.family.kind == "removals" or self.plan.family_resident:
            return self.kernel(out, chunk_arg, self.sorted_data, *self.tables)
        per_device, total = self.plan.per_device, self.plan.per_device_total
        width = self.capacity if (self.family.kind != "removed" or self.compact_on_host) else self.family.removed_width
        shape = (per_device * self.plan.num_devices, width)

        def local(index):  # called only for this process's devices: each process prepares only its share
            device = index[0].start // per_device if index[0].start is not None else 0
            first = device * total + chunk * per_device
            rows = np.arange(first, first + per_device).clip(max=self.family.num_subsets - 1)
            return self._positions(rows)

        positions = jax.make_array_from_callback(shape, self.sharded, local)
        return self.kernel(out, chunk_arg, self.sorted_data, positions)

    def _unsorted_positions(self, rows, width):
        """Canonical positions of the family's ``rows``, unsorted, sentinel n in unused slots (``int32[len, width]``)."""
        family = self.family
        if family.kind == "removed":
            return self.rank[family.removed[rows]]
        positions = np.where(family.kept_valid[rows], self.rank[family.kept[rows]], self.n).astype(np.int32)
        if positions.shape[1] < width:
            positions = np.concatenate([positions, np.full((len(rows), width - positions.shape[1]), self.n,
                                                           np.int32)], axis=1)
        return positions

    def _positions(self, rows):
        """Canonical positions for the family's ``rows`` (NumPy's sort beats XLA's on a CPU host)."""
        family = self.family
        if self.compact_on_host:
            return _kept_positions(self.rank[family.removed[rows]], self.n, self.capacity)
        if family.kind == "removed":
            positions = self.rank[family.removed[rows]]
        else:
            positions = np.where(family.kept_valid[rows], self.rank[family.kept[rows]], self.n).astype(np.int32)
        positions.sort(axis=1)
        if family.kind != "removed" and positions.shape[1] < self.capacity:  # pad to the public capacity
            padding = np.full((positions.shape[0], self.capacity - positions.shape[1]), self.n, np.int32)
            positions = np.concatenate([positions, padding], axis=1)
        return positions

    def finish(self, out):
        """The first ``k`` outputs in family order, as device arrays (sharded over the devices' runs)."""
        plan = self.plan
        # Device d's run holds global subsets [d * L, (d + 1) * L), so the sharded output is already in family
        # order: cut the padding at k.
        values = _first(plan.num_subsets)(tuple(out))
        if jax.process_count() > 1:  # every process receives all values (a host all-gather of the outputs)
            from jax.experimental import multihost_utils
            values = tuple(jnp.asarray(multihost_utils.process_allgather(v, tiled=True)) for v in values)
        return jax.tree.unflatten(self.out_tree[1], list(values))


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


@functools.lru_cache(maxsize=64)
def _zeros_fn(shape, dtype, sharding):
    return jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=sharding)


def _zeros(shape, dtype, sharding):
    return _zeros_fn(tuple(shape), np.dtype(dtype), sharding)()


@functools.lru_cache(maxsize=64)
def _first(k):
    return jax.jit(lambda values: tuple(v[:k] for v in values))


@functools.lru_cache(maxsize=64)
def _compiled_kernel(oracle_fn, kind, n, capacity, depth, micro, per_device, k, per_device_total, mesh, data_spec):
    """The jitted chunk step: ``(outputs, chunk, sorted_data, *inputs) -> outputs``, one shard per device.

    ``shard_map`` gives each device its own program over its own share: it
    derives its subsets from its axis index and the chunk number, evaluates
    them in ``per_device // micro`` oracle calls and writes them into its own
    output slice (donated, so updated in place). Cached so that repeated calls
    with the same oracle and shapes do not recompile.
    """
    rows_spec = jax.ShapeDtypeStruct((capacity,) + data_spec.shape[1:], data_spec.dtype)
    out_spec = jax.eval_shape(oracle_fn, rows_spec, jax.ShapeDtypeStruct((capacity,), np.dtype(bool)))
    leaves, tree = jax.tree.flatten(out_spec)

    # The package's order statistics (median, quantiles) read a few slots of each block: their values are
    # computed from those slots alone, with the oracle's own arithmetic (apply_order_statistic).
    form = order_statistic_form(oracle_fn) if len(data_spec.shape) == 1 else None

    def blocks(sorted_data, inputs, first, first_local):
        if kind == "removals":
            rank, table, offsets = inputs
            index = jnp.minimum(first + jnp.arange(per_device, dtype=jnp.int64), k - 1)

            def removed_of(index):
                removed = unrank_removed_device(index, table, offsets, n, depth)
                return sort_small(rank[removed])  # canonical positions; the sentinel n stays last

            if form is not None:
                reader = removed_slot_reader(sorted_data, n, capacity)
                return apply_order_statistic(form, lambda i: reader(removed_of(i[None])[0]), index,
                                             micro_batch=micro, capacity=capacity)
            return apply_oracle(oracle_fn, lambda i: blocks_from_removed(sorted_data, removed_of(i), n, capacity),
                                index, micro_batch=micro)
        (positions,) = inputs
        if kind.startswith("resident-"):
            return blocks_of(kind[len("resident-"):], sorted_data,
                             sort_small(jax.lax.dynamic_slice_in_dim(positions, first_local, per_device, axis=0)))
        return blocks_of(kind, sorted_data, positions)

    def blocks_of(kind, sorted_data, positions):
        if kind == "removed":
            if form is not None:
                return apply_order_statistic(form, removed_slot_reader(sorted_data, n, capacity), positions,
                                             micro_batch=micro, capacity=capacity)
            return apply_oracle(oracle_fn, lambda p: blocks_from_removed(sorted_data, p, n, capacity), positions,
                                micro_batch=micro)
        if form is not None:
            return apply_order_statistic(form, kept_slot_reader(sorted_data, n), positions, micro_batch=micro,
                                         capacity=capacity)
        return apply_oracle(oracle_fn, lambda p: gather_rows(sorted_data, p, p < n, n), positions,
                            micro_batch=micro)

    def per_device_step(out, chunk, sorted_data, *inputs):
        device = jax.lax.axis_index(SUBSETS_AXIS).astype(jnp.int64)
        first = device * per_device_total + chunk * per_device
        values = jax.tree.leaves(blocks(sorted_data, inputs, first, chunk * per_device))
        offset = (chunk * per_device).astype(jnp.int64)
        return [jax.lax.dynamic_update_slice_in_dim(o, v.astype(o.dtype), offset, axis=0)
                for o, v in zip(out, values)]

    replicated, sharded = PartitionSpec(), PartitionSpec(SUBSETS_AXIS)
    num_inputs = 3 if kind == "removals" else 1
    input_specs = (replicated,) * 3 if kind == "removals" else (sharded,)  # a chunk's or a resident run's rows
    step = jax.shard_map(per_device_step, mesh=mesh,
                         in_specs=([sharded] * len(leaves), replicated, replicated) + input_specs,
                         out_specs=[sharded] * len(leaves), check_vma=False)
    del num_inputs
    return jax.jit(step, donate_argnums=(0,)), (leaves, tree)
