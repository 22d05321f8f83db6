"""Sweeps over the power set of n rows: blockwise maps and reductions (regime A, ``2**n`` masks) and closures
over level arrays (regime B, ``levels[d]`` holds the ``C(n, d)`` subsets with ``d`` rows removed)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_int
from gpuprivacy.subsets._powerset import (POWERSET_MAX_N, _host_device, check_powerset_fits, device_masks, lowest,
                                         removal_index_of_masks)


# ----------------------------------------------------------------------------------------------
# Regime A sweeps (jittable; n static, everything else may be traced)

# Masks per step of powerset_map: the temporaries of one step are a few arrays of this many entries, so the
# 2**n-sized arrays of a blockwise pass are only its input(s) and its output. Small on a CPU (cache-sized);
# large on an accelerator, where each lax.map step costs a few kernel launches (1024 steps at n = 30).
_MAP_BLOCK = {"cpu": 1 << 12}
_MAP_BLOCK_ACCELERATOR = 1 << 20


def powerset_blocks(fn, n: int, *, block: int | None = None):
    """``fn(masks)`` on each block of consecutive bitmasks ``< 2**n``, stacked: leading axis ``2**n // block``.

    The building block of the regime-A sweeps: ``lax.map`` runs one block at
    a time, so whatever ``fn`` computes stays block-sized. Written as one
    expression over all 2**n masks, XLA materialises and schedules the
    intermediates as it likes: on a GPU the sweeps then held 60 to 130
    bytes per subset (up to 130 GiB at n = 30) instead of the 8 of each
    array they need.

    Args:
      fn: ``uint32[block] -> pytree of arrays``; it may read (gather) any
        2**n array it closes over.
      n: number of bits (static).
      block: masks per step (default: 4096 on a CPU, 2**20 on an accelerator,
        where each step costs a few kernel launches: 1024 steps at n = 30).

    Returns:
      The pytree of ``[2**n // block, ...]`` arrays.
    """
    total = 1 << n
    if block is None:
        block = _MAP_BLOCK.get(jax.default_backend(), _MAP_BLOCK_ACCELERATOR)
    block = min(block, total)
    starts = jax.lax.iota(jnp.uint32, total // block) * np.uint32(block)
    return jax.lax.map(lambda start: fn(start + jax.lax.iota(jnp.uint32, block)), starts)


def powerset_map(fn, n: int, *, block: int | None = None):
    """``fn(masks)`` for every bitmask ``< 2**n``, block by block; the results concatenated in mask order.

    ``fn`` maps a ``uint32[block]`` of consecutive masks to arrays with that
    leading axis (see :func:`powerset_blocks`). It must be elementwise in the
    masks (exact integer or IEEE elementwise operations), so the result does
    not depend on the block size. The only 2**n arrays are what ``fn``
    reads and the output.

    Returns:
      The pytree of ``[2**n, ...]`` arrays.
    """
    out = powerset_blocks(fn, n, block=block)
    return jax.tree.map(lambda x: x.reshape((1 << n,) + x.shape[2:]), out)


def powerset_level_reduce(fn, n: int, op: str, *, block: int | None = None, method: str | None = None) -> jax.Array:
    """``out[s] = op{fn(masks)[m] : popcount(m) = s}`` for s = 0..n, blockwise (op ``"min"`` or ``"max"``).

    Each block reduces its own masks by popcount, then the blocks are
    reduced: min and max are exact, so the result is the one of a single
    segment reduction over all 2**n values, with no 2**n temporary.

    Args:
      fn: ``uint32[block] -> [block]`` values (see :func:`powerset_blocks`).
      n: number of bits (static).
      op: ``"min"`` or ``"max"``.
      block: masks per step (default as :func:`powerset_blocks`).
      method: ``"scatter"`` (a segment reduction; the default on a CPU) or
        ``"dense"`` (a masked ``[block, n + 1]`` reduction; the default on an
        accelerator, where a scatter of 2**n values into n + 1 bins serialises
        on atomic compare-and-swap loops: ~3 s per pass at n = 30 on an
        H100). Both give the same values.
    """
    if op not in ("min", "max"):
        raise ValueError(f"op must be 'min' or 'max', got {op!r}.")  # pragma: no cover
    if method is None:
        method = "scatter" if jax.default_backend() == "cpu" else "dense"
    if method not in ("scatter", "dense"):
        raise ValueError(f"method must be 'scatter' or 'dense', got {method!r}.")
    segment = jax.ops.segment_min if op == "min" else jax.ops.segment_max
    reduce = jnp.min if op == "min" else jnp.max

    def per_block(masks):
        sizes = jax.lax.population_count(masks).astype(jnp.int32)
        values = fn(masks)
        if method == "scatter":
            return segment(values, sizes, num_segments=n + 1)
        identity = -lowest(values.dtype) if op == "min" and jnp.issubdtype(values.dtype, jnp.floating) else (
            jnp.array(jnp.iinfo(values.dtype).max, values.dtype) if op == "min" else lowest(values.dtype))
        hit = sizes[:, None] == jnp.arange(n + 1, dtype=jnp.int32)[None, :]
        return reduce(jnp.where(hit, values[:, None], identity), axis=0)

    return reduce(powerset_blocks(per_block, n, block=block), axis=0)


def subset_max(values: jax.Array, n: int) -> jax.Array:
    """Sum-over-subsets maximum: ``out[s] = max_{z subset-of s} values[z]`` over bitmasks.

    Pass i sets ``A[s] = max(A[s], A[s & ~(1 << i)])`` (a no-op where bit i
    is clear; regime A). The passes run in a ``fori_loop``, so the loop
    carry is the only 2**n array besides its next value: unrolled, XLA on a
    GPU kept 14 arrays of 2**n values alive (116 bytes per subset at n = 30).
    Max is exact, so the order of the passes does not change the values.
    """
    if n == 0:
        return values

    def one_pass(bit, a):
        cleared = device_masks(n) & ~jnp.left_shift(jnp.uint32(1), bit.astype(jnp.uint32))
        return jnp.maximum(a, a.at[cleared].get(mode="promise_in_bounds"))

    return jax.lax.fori_loop(0, n, one_pass, values)


def level_reduce(values: jax.Array, n: int, op: str, fill) -> jax.Array:
    """Per-size reduction ``out[s] = op{values[z] : popcount(z) = s}`` for s = 0..n (``fill`` where masked).

    Popcounts come from the device (no 2**n constant) and the reduction runs
    block by block (:func:`powerset_level_reduce`).
    """
    if op not in ("min", "max"):
        raise ValueError(f"op must be 'min' or 'max', got {op!r}.")  # pragma: no cover
    return powerset_level_reduce(lambda masks: values.at[masks].get(mode="promise_in_bounds"), n, op)


def bit_neighbours_differ_at(values: jax.Array, masks: jax.Array, n: int, threshold: float) -> jax.Array:
    """For the given masks: some bit i in w has ``|values[w] - values[w ^ (1 << i)]| > threshold`` (jittable)."""
    own = values[masks]
    bad = jnp.zeros(masks.shape, dtype=bool)
    for bit in range(n):
        has = ((masks >> bit) & 1) == 1
        child = values[masks ^ np.uint32(1 << bit)]
        bad = bad | (has & (jnp.abs(own - child) > threshold))
    return bad


def bit_neighbours_differ(values: jax.Array, n: int, threshold: float) -> jax.Array:
    """``out[w]`` = some bit i in w has ``|values[w] - values[w ^ (1 << i)]| > threshold``.

    Blockwise (:func:`powerset_map`): the only 2**n arrays are ``values`` and
    the boolean output.
    """
    return powerset_map(lambda masks: bit_neighbours_differ_at(values, masks, n, threshold), n)


# ----------------------------------------------------------------------------------------------
# Regime B sweeps (level arrays: levels[d] holds the C(n, d) subsets with d rows removed)

def levels_closure_max(levels: list, children: list) -> list:
    """Closure max over levels: ``M(s) = max(v(s), max_j M(s - {j}))``, from the deepest level up.

    Args:
      levels: ``levels[d]``: values of level d (d = 0..D), already floored where unused.
      children: ``children[d]``: :func:`child_ranks` ``(n, d)`` for d = 0..D-1.

    Returns:
      The closure max per level (same layout). Only the level being computed
      and the one below it are touched at each step.
    """
    depth = len(levels) - 1
    out = [None] * (depth + 1)
    out[depth] = levels[depth]
    for d in range(depth - 1, -1, -1):
        child = jnp.asarray(children[d])
        below = out[d + 1]
        gathered = jnp.where(child >= 0, below[jnp.maximum(child, 0)], lowest(below.dtype))
        out[d] = jnp.maximum(levels[d], gathered.max(axis=1))
    return out


@functools.partial(jax.jit, static_argnums=(0, 1))
def _removal_index_table(n, depth):
    return powerset_map(lambda masks: removal_index_of_masks(masks, n, depth), n)


def bitmask_to_removal_index(n: int, depth: int) -> np.ndarray:
    """For each KEEP bitmask ``s < 2**n``: its index in ``removals(n, depth)`` order, or -1 if deeper.

    Computed on the device by :func:`removal_index_of_masks` (n passes, a
    binomial table as the only constant) and returned as a read-only int64
    NumPy array, the same values as before. The engine itself never builds
    this table: :func:`gpuprivacy.oracle.to_powerset` fuses the index into
    its gather. Not cached (8 GiB at n = 30).
    """
    n = check_int("n", n, minimum=1, maximum=POWERSET_MAX_N)
    depth = min(check_int("depth", depth, minimum=0), n)
    check_powerset_fits(n, bytes_per_subset=8, what="bitmask_to_removal_index(n, depth)")
    if jax.devices()[0].platform != "cpu":
        check_powerset_fits(n, bytes_per_subset=8, what="bitmask_to_removal_index(n, depth) (host copy)",
                            device=_host_device())
    index = np.asarray(_removal_index_table(n, depth))
    if index.flags.writeable:
        index.setflags(write=False)
    return index
