"""The sharded path of :func:`gpuprivacy.oracle.evaluate`: each device runs its own share of every chunk.

:class:`_ChunkRunner` feeds the devices (removal families unranked on the device, materialised ones
prepared on the host by the process that owns each device, or uploaded once where families are
device-resident), and :func:`_compiled_kernel` is the jitted ``shard_map`` step each device runs over its own
contiguous run of subsets, writing its outputs in place.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from gpuprivacy.oracle._isolation import (COMPARE_ALL_WIDTH, apply_oracle, apply_order_statistic, blocks_from_removed,
                                          gather_rows, kept_slot_reader, order_statistic_form, removed_slot_reader)
from gpuprivacy.oracle._mesh import SUBSETS_AXIS
from gpuprivacy.subsets import binomial_table, level_offsets, sort_small, unrank_removed_device

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
