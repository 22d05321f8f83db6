"""The one path by which an oracle meets data.

Every evaluation engine of :mod:`gpuprivacy.oracle` (subset families in
:func:`~gpuprivacy.oracle.evaluate`, removal levels, power sets) and through
them every wrapper and estimator that queries an oracle, runs the oracle only
through :func:`apply_oracle` on blocks built by the gathers in this module.
So what an oracle can see is decided here, in one place:

* each subset is *gathered* into a block of its rows in canonical (sorted)
  order, zero padded after the real rows, with ``valid`` marking them;
* the block has a public capacity (:func:`padded_oracle` pads it to a public
  size when n is private), never a shape that depends on excluded rows;
* the oracle is vmapped over fixed micro-batches inside ``lax.map``, so the
  compiled body is the same whatever the chunk size or device count and
  results agree bit for bit.

This module controls the *data* an oracle receives. Which *code* runs here is
decided before, by the one gate :func:`gpuprivacy.oracle._trust.resolve_oracle`:
an analyst's oracle arrives as a program rebuilt from allowed primitives (traced
in the sandbox process), so it has no Python, custom batching rule or callback
with which to reach past its block (docs/isolation.md).
"""

from __future__ import annotations

import functools
import weakref
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from gpuprivacy._search import count_at_most
from gpuprivacy.oracle._trust import PaddedOracle, is_trusted, library_oracle, pad_block

# Up to this many removed rows, slot positions are found by comparing against all of them.
COMPARE_ALL_WIDTH = 16
# Up to this many, the block is selected from shifted copies of the sorted rows instead of gathered.
SHIFTED_SLICES_WIDTH = 4


def apply_oracle(oracle_fn, make_block, inputs, *, micro_batch: int):
    """Runs ``oracle_fn`` over fixed micro-batches of subsets; the only place an oracle is called.

    ``make_block`` turns one micro-batch of per-subset inputs (indices,
    positions or bitmasks) into gathered ``(rows, valid)``; it runs inside
    the loop body so XLA fuses the gather into the oracle and never
    materialises a whole chunk of rows. XLA compiles the same body whatever
    the chunk size or device count, so floating-point reductions inside the
    oracle happen in the same order and results agree bit for bit. Callers
    pass whole numbers of micro-batches, at least two per chunk: a one-step
    map is inlined by XLA and compiled differently.

    Args:
      oracle_fn: ``f(rows, valid) -> scalar`` on one block.
      make_block: per-subset inputs ``[micro_batch, ...]`` -> ``(rows, valid)``.
      inputs: a pytree of arrays with a leading axis divisible by ``micro_batch``.
      micro_batch: subsets per vmapped oracle call.

    Returns:
      The oracle values, leading axis as ``inputs``.
    """
    return _over_micro_batches(lambda block: jax.vmap(oracle_fn)(*make_block(block)), inputs, micro_batch)


def _over_micro_batches(batch_fn, inputs, micro_batch: int):
    """``batch_fn`` over consecutive micro-batches of ``inputs`` in a ``lax.map`` (one compiled body)."""
    length = jax.tree.leaves(inputs)[0].shape[0]
    if length % micro_batch:
        raise ValueError(f"the engine needs a whole number of micro-batches: {length} subsets, "
                         f"micro_batch={micro_batch}.")
    shape = (length // micro_batch, micro_batch)
    blocks = jax.tree.map(lambda x: x.reshape(shape + x.shape[1:]), inputs)
    out = jax.lax.map(batch_fn, blocks)
    return jax.tree.map(lambda x: x.reshape((length,) + x.shape[2:]), out)


class OrderStatisticForm(NamedTuple):
    """How an order-statistic oracle reads its block: ``value = combine(count, take)``.

    ``take(i)`` returns the block's slots at float indices ``i`` clipped to
    ``[0, size - 1]`` (zero past the subset's rows, as in a gathered block);
    ``size`` is the block capacity the oracle is traced with (None: the
    engine's). The oracle itself computes ``combine(count, take_from(rows))``,
    so the engine can evaluate ``combine`` with a ``take`` that reads the few
    slots it needs straight from the sorted data, and get the same bits.
    """

    combine: Callable
    size: int | None = None


_ORDER_STATISTICS: "weakref.WeakKeyDictionary[Callable, OrderStatisticForm]" = weakref.WeakKeyDictionary()


def order_statistic_oracle(fn: Callable, combine: Callable, size: int | None = None) -> Callable:
    """Declares one of the package's oracles an order statistic (see :class:`OrderStatisticForm`)."""
    _ORDER_STATISTICS[fn] = OrderStatisticForm(combine, size)
    return fn


def order_statistic_form(fn: Callable) -> OrderStatisticForm | None:
    """The declared form of a library order-statistic oracle, or None (any other oracle)."""
    try:
        return _ORDER_STATISTICS.get(fn)
    except TypeError:  # unhashable
        return None


def apply_order_statistic(form: OrderStatisticForm, slot_reader, inputs, *, micro_batch: int, capacity: int):
    """Evaluates a library order statistic over micro-batches without gathering whole blocks.

    ``slot_reader(one_subset_inputs) -> (count, read)`` gives a subset's row
    count and ``read(slots)``, its rows at int32 block slots (zero at slots
    past the count). The arithmetic is the oracle's own ``combine``, fed the
    same values its block would hold, so results equal :func:`apply_oracle`'s
    bit for bit (tested). Used only for the package's oracles: an analyst's
    oracle always goes through :func:`apply_oracle`.
    """
    size = capacity if form.size is None else form.size

    def one(subset_inputs):
        count, read = slot_reader(subset_inputs)
        take = lambda i: read(jnp.clip(i, 0, size - 1).astype(jnp.int32))  # noqa: E731  (as the block's take)
        return jnp.asarray(form.combine(count.astype(jnp.float64), take), jnp.float64)

    return _over_micro_batches(jax.vmap(one), inputs, micro_batch)


def removed_slot_reader(sorted_data, n, capacity):
    """``slot_reader`` for subsets given by removed canonical positions (ascending, sentinel n)."""
    def reader(removed):
        width = removed.shape[0]
        real = removed < n
        shifted = jnp.where(real, removed - jnp.arange(width, dtype=jnp.int32), n + width)
        count = n - real.sum(dtype=jnp.int32)

        def read(slots):
            skips = count_at_most(shifted, slots) if width > COMPARE_ALL_WIDTH else \
                (shifted[None, :] <= slots.reshape(-1, 1)).sum(-1, dtype=jnp.int32).reshape(slots.shape)
            rows = sorted_data[jnp.clip(slots + skips, 0, n - 1)].astype(jnp.float64)
            return jnp.where((slots < count) & (slots < capacity), rows, 0.0)

        return count, read
    return reader


def kept_slot_reader(sorted_data, n):
    """``slot_reader`` for subsets given by kept canonical positions (ascending, sentinel n pads)."""
    def reader(positions):
        count = (positions < n).sum(dtype=jnp.int32)

        def read(slots):
            inside = slots < positions.shape[0]  # a padded block is wider than the kept positions
            position = jnp.where(inside, positions[jnp.minimum(slots, positions.shape[0] - 1)], n)
            return jnp.where(position < n, sorted_data[jnp.clip(position, 0, n - 1)].astype(jnp.float64), 0.0)

        return count, read
    return reader


def gather_rows(sorted_data, positions, valid, n):
    """Rows at canonical ``positions`` with the invalid slots zeroed: ``(rows, valid)``."""
    rows = sorted_data.at[jnp.clip(positions, 0, n - 1)].get(mode="promise_in_bounds")
    mask = valid.reshape(valid.shape + (1,) * (sorted_data.ndim - 1))
    return jnp.where(mask, rows, jnp.zeros((), sorted_data.dtype)), valid


def blocks_from_removed(sorted_data, removed_positions, n, capacity):
    """Gathered rows for subsets given by their removed canonical positions (ascending, sentinel n)."""
    width = removed_positions.shape[-1]
    real = removed_positions < n
    # Slot j holds canonical position j + #{i : r_i - i <= j}; sentinels never count.
    shifted = jnp.where(real, removed_positions - jnp.arange(width, dtype=jnp.int32)[None, :], n + width)
    slots = jnp.arange(capacity, dtype=jnp.int32)
    count = n - real.sum(-1, dtype=jnp.int32)
    valid = slots[None, :] < count[:, None]
    if width <= SHIFTED_SLICES_WIDTH:
        # Few holes: slot j holds sorted row j + s with s = #holes before it, so the block is a choice among
        # width + 1 shifted copies of the sorted rows: contiguous loads and selects, no gather.
        skips = jnp.zeros((shifted.shape[0], capacity), jnp.int32)
        for i in range(width):
            skips = skips + (shifted[:, i:i + 1] <= slots[None, :]).astype(jnp.int32)
        tail = jnp.zeros((capacity + width - min(n, capacity + width),) + sorted_data.shape[1:], sorted_data.dtype)
        padded = jnp.concatenate([sorted_data[:capacity + width], tail])
        mask_shape = skips.shape + (1,) * (sorted_data.ndim - 1)
        rows = jnp.broadcast_to(padded[None, :capacity], skips.shape + sorted_data.shape[1:])
        for s in range(1, width + 1):
            rows = jnp.where((skips == s).reshape(mask_shape), padded[None, s:s + capacity], rows)
        return jnp.where(valid.reshape(mask_shape), rows, jnp.zeros((), sorted_data.dtype)), valid
    if width <= COMPARE_ALL_WIDTH:
        skips = (shifted[:, None, :] <= slots[None, :, None]).sum(-1, dtype=jnp.int32)
    else:
        skips = jax.vmap(lambda s: count_at_most(s, slots))(shifted)
    return gather_rows(sorted_data, slots[None, :] + skips, valid, n)


def blocks_from_bitmasks(sorted_data, masks, n, capacity):
    """Gathered rows for subsets given as bitmasks over canonical positions (bit i keeps rank i).

    Slot j holds the j-th lowest set bit, found with ``ctz(m)`` and
    ``m &= m - 1``: a few integer operations per slot, no sort, no search.
    """
    remaining = masks
    count = jax.lax.population_count(masks)
    slots = []
    for _ in range(min(capacity, n)):
        lowest = remaining & -remaining
        slots.append(jax.lax.population_count(lowest - 1))  # ctz; 64 when nothing is left
        remaining = remaining & (remaining - 1)
    positions = jnp.minimum(jnp.stack(slots, axis=1), n - 1)
    valid = jnp.arange(min(capacity, n), dtype=jnp.int64)[None, :] < count[:, None]
    return gather_rows(sorted_data, positions, valid, n)


def padded_oracle(oracle_fn, capacity: int):
    """``oracle_fn`` behind a fixed public block size ``capacity``.

    Padding adds invalid, zero slots only; it never changes who is trusted. A trusted or library oracle
    comes back as a padded library oracle (cached: the same object, no recompiles). Anything else (an
    analyst's function, an :func:`~gpuprivacy.oracle.untrusted` oracle) comes back as a
    :class:`~gpuprivacy.oracle.PaddedOracle`, which the engine traces in the sandbox at ``capacity`` and pads
    after the rebuild: the analyst's code still never runs in this process.
    """
    capacity = int(capacity)
    if not is_trusted(oracle_fn):
        return PaddedOracle(oracle_fn, capacity)
    return pad_resolved(oracle_fn, capacity)


@functools.lru_cache(maxsize=64)
def pad_resolved(oracle_fn, capacity: int):
    """Pads an oracle the gate already resolved (trusted, or rebuilt from the sandbox): engine code only."""
    padded = pad_block(oracle_fn, capacity)
    form = order_statistic_form(oracle_fn)
    if form is not None:  # padding adds invalid slots only: the same statistic over a block of `capacity` slots
        order_statistic_oracle(padded, form.combine, capacity if form.size is None else form.size)
    return library_oracle(padded)  # engine code around an oracle already resolved at this capacity
