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

import jax
import jax.numpy as jnp

from gpuprivacy.oracle._trust import library_oracle

# Up to this many removed rows, slot positions are found by comparing against all of them.
COMPARE_ALL_WIDTH = 16


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
    length = jax.tree.leaves(inputs)[0].shape[0]
    if length % micro_batch:
        raise ValueError(f"apply_oracle needs a whole number of micro-batches: {length} subsets, "
                         f"micro_batch={micro_batch}.")
    shape = (length // micro_batch, micro_batch)
    blocks = jax.tree.map(lambda x: x.reshape(shape + x.shape[1:]), inputs)
    out = jax.lax.map(lambda block: jax.vmap(oracle_fn)(*make_block(block)), blocks)
    return jax.tree.map(lambda x: x.reshape((length,) + x.shape[2:]), out)


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
    if width <= COMPARE_ALL_WIDTH:
        skips = (shifted[:, None, :] <= slots[None, :, None]).sum(-1, dtype=jnp.int32)
    else:
        skips = jax.vmap(lambda s: _count_at_most(s, slots))(shifted)
    positions = slots[None, :] + skips
    count = n - real.sum(-1, dtype=jnp.int32)
    return gather_rows(sorted_data, positions, slots[None, :] < count[:, None], n)


def _count_at_most(sorted_values, queries):
    """``#{i : sorted_values[i] <= q}`` for each query: a branchless binary search.

    Unrolled over the static bit length of the width, so it fuses into the
    gather (``jnp.searchsorted`` lowers to a while loop that does not).
    """
    width = sorted_values.shape[0]
    count = jnp.zeros(queries.shape, jnp.int32)
    step = 1 << (width.bit_length() - 1)
    while step:
        probe = count + step
        ok = (probe <= width) & (sorted_values[jnp.minimum(probe, width) - 1] <= queries)
        count = jnp.where(ok, probe, count)
        step >>= 1
    return count



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


@functools.lru_cache(maxsize=64)
def padded_oracle(oracle_fn, capacity: int):
    """``oracle_fn`` behind a fixed public block size ``capacity`` (cached: same object, no recompiles)."""
    def padded(rows, valid):
        extra = capacity - rows.shape[0]
        pad_rows = jnp.zeros((extra,) + rows.shape[1:], rows.dtype)
        value = oracle_fn(jnp.concatenate([rows, pad_rows]), jnp.concatenate([valid, jnp.zeros(extra, bool)]))
        value = jnp.asarray(value)
        if value.shape != ():
            raise ValueError(f"the oracle must return a scalar, got shape {value.shape}. Reduce it to one number.")
        return value.astype(jnp.float64)
    return library_oracle(padded)  # engine code around an oracle already resolved at this capacity


