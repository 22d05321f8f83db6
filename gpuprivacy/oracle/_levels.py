"""Level-by-level evaluation of an untrusted oracle over down-neighbourhoods.

:func:`evaluate_levels` evaluates ``oracle_fn`` once on every subset of the
data with at most ``depth`` rows removed (``Q(n, depth)`` subsets, planned
exactly before anything runs) through :func:`gpuprivacy.oracle.evaluate`, so
the oracle sees only gathered, canonically ordered rows.

Public capacity (the oracle "must not see n either"): the evaluator's
blocks have the family's capacity, which is n for a down-neighbourhood. The
untrusted oracle is therefore wrapped so that it is traced with blocks of a
*public* capacity (default :data:`DEFAULT_CAPACITY`) padded with zero rows and
``valid = False``; it never sees an array shape that depends on n.

Oracle contract (values that differ between two calls on the same subset):
a release queries each subset **exactly once** and every later use (tests,
sweeps, averages, the output) reads that cached value, so within one release
the oracle defines one function of the subset by construction. A pure JAX
oracle has no randomness (it receives no key), so differences can only come
from the runtime (e.g. non-deterministic reductions on some accelerators).
``verify_determinism=True`` evaluates everything a second time with a
different chunking and raises, before any noise is drawn, if any value
differs bit for bit (a curator-side rejection of the oracle; doubles the
queries).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from gpuprivacy._checks import check_data, check_int
from gpuprivacy.oracle._evaluate import DEFAULT_MAX_QUERIES, evaluate
from gpuprivacy.oracle._mesh import SUBSETS_AXIS, default_mesh
from gpuprivacy.oracle._isolation import apply_oracle, blocks_from_bitmasks, pad_resolved
from gpuprivacy.oracle._trust import resolve_oracle
from gpuprivacy.subsets import (
    EVALUATE_BYTES_PER_SUBSET,
    TO_POWERSET_BYTES_PER_SUBSET,
    check_powerset_fits,
    level_offsets,
    plan_queries,
    powerset_map,
    removal_index_of_masks,
    removals,
)

DEFAULT_CAPACITY = 32
"""Public block capacity the untrusted oracle is traced with (rows beyond |z| are zero, ``valid`` False)."""




def _resolve(oracle_fn, data, capacity):
    """The oracle as the engine will run it on blocks of the public capacity (the one gate, see _trust)."""
    return resolve_oracle(oracle_fn, rows_shape=(capacity,) + data.shape[1:], rows_dtype=data.dtype,
                          capacity=capacity)


def _check_depth(depth, n: int) -> int:
    """``0 <= depth <= n``, as :func:`gpuprivacy.subsets.removals`: removing more rows than exist is not a level."""
    depth = check_int("depth", depth, minimum=0)
    if depth > n:
        raise ValueError(f"depth must be <= n = {n} (the rows of data), got depth={depth}. Pass depth=min(depth, "
                         f"n) = {n} for the whole power set.")
    return depth


def check_capacity(capacity, n: int) -> int:
    """The public capacity (default :data:`DEFAULT_CAPACITY`); refuses data with more rows."""
    capacity = DEFAULT_CAPACITY if capacity is None else check_int("capacity", capacity, minimum=1)
    if n > capacity:
        raise ValueError(f"data has {n} rows, more than capacity={capacity}, the public block size the oracle "
                         "is traced with. Pass a public capacity >= the largest dataset you will run on.")
    return capacity


def evaluate_levels(oracle_fn, data, *, depth: int, capacity: int | None = None,
                    max_queries: int = DEFAULT_MAX_QUERIES, chunk_size: int | None = None,
                    verify_determinism: bool = False, progress: bool = False) -> jax.Array:
    """The oracle's value on every subset with at most ``depth`` rows removed, in removal order.

    Args:
      oracle_fn: the untrusted ``f(rows, valid) -> scalar`` (a pure JAX function).
      data: ``[n, ...]`` real rows.
      depth: deepest level (number of removed rows), ``0 <= depth <= n``; ``depth = n`` is the power set.
      capacity: public block size (default :data:`DEFAULT_CAPACITY`).
      max_queries: public budget; ``Q(n, depth)`` above it is refused before any call.
      chunk_size: passed to :func:`gpuprivacy.oracle.evaluate`.
      verify_determinism: evaluate twice and raise if any value differs.
      progress: progress bar.

    Returns:
      float64 ``[Q(n, depth)]`` values, level 0 first, colex order within a
      level (the order of :func:`gpuprivacy.subsets.removals`).

    Raises:
      ValueError: bad data, depth > n, capacity < n, too many queries, a non-scalar
        oracle, or (with ``verify_determinism``) a non-deterministic oracle.
    """
    data = check_data(data)
    n = data.shape[0]
    capacity = check_capacity(capacity, n)
    depth = _check_depth(depth, n)
    plan_queries(n, depth, max_queries=max_queries, what=f"evaluating n={n} rows to depth {depth}")
    family = removals(n, depth)
    oracle = pad_resolved(_resolve(oracle_fn, data, capacity), capacity)
    values = evaluate(oracle, data, family, chunk_size=chunk_size, progress=progress,
                      max_queries=None)  # planned above against this call's max_queries
    if verify_determinism:
        _check_same(values, evaluate(oracle, data, family, chunk_size=1 if chunk_size != 1 else 4096,
                                     max_queries=None))
    return values


# Subsets per vmapped oracle call in evaluate_powerset, by backend. It depends on the backend only, never
# on chunk_size, n or the device count: the compiled oracle body is then the same for every chunking and
# for a dataset and its neighbours, so a subset gets bit-for-bit the same value in all of them (P1). A GPU
# needs large batches to be busy (each lax.map step is a few kernel launches); a CPU gains nothing past a
# few hundred and 256 is what it always used.
_POWERSET_MICRO_BATCH = {"cpu": 256}
_POWERSET_MICRO_BATCH_ACCELERATOR = 1 << 15
# Bytes of chunk-sized temporaries per subset in the evaluation kernel: the int64 masks (8) and the oracle's
# float64 outputs before they are written into the result (8), with room for one more such array (8).
_CHUNK_BYTES_PER_SUBSET = 24
# Byte budget of one chunk (default chunk_size): 2**16 subsets on a CPU, whose caches favour small chunks
# (2**16 ran 25% faster than 2**19 at n = 20), 2**23 on an accelerator (few, large dispatches).
_CHUNK_BUDGET = {"cpu": 1 << 21}
_CHUNK_BUDGET_ACCELERATOR = 1 << 28


def powerset_micro_batch(platform: str | None = None) -> int:
    """Subsets per vmapped oracle call in :func:`evaluate_powerset` (256 on CPU, 32768 on an accelerator)."""
    platform = jax.default_backend() if platform is None else platform
    return _POWERSET_MICRO_BATCH.get(platform, _POWERSET_MICRO_BATCH_ACCELERATOR)


def powerset_chunk_size(n: int, platform: str | None = None) -> int:
    """Default subsets per call of :func:`evaluate_powerset`: a power of two within a byte budget.

    About 2 MiB of chunk temporaries on a CPU (2**16 subsets), 256 MiB on an
    accelerator (2**23), at least two micro-batches, at most 2**n. A power of
    two divides 2**n, so every chunk has the same shape (one compilation).
    """
    platform = jax.default_backend() if platform is None else platform
    budget = _CHUNK_BUDGET.get(platform, _CHUNK_BUDGET_ACCELERATOR)
    step = 1 << max(0, (budget // _CHUNK_BYTES_PER_SUBSET).bit_length() - 1)
    step = max(step, 2 * powerset_micro_batch(platform))
    return min(step, 1 << n)


def evaluate_powerset(oracle_fn, data, *, capacity: int | None = None,
                      max_queries: int | None = DEFAULT_MAX_QUERIES, chunk_size: int | None = None,
                      verify_determinism: bool = False, progress: bool = False) -> jax.Array:
    """The oracle's value on all ``2**n`` subsets, indexed by bitmask over *canonical* positions (regime A).

    Bit i of a mask keeps the row of rank i in the canonical (sorted) order of
    :func:`gpuprivacy.oracle.canonical_order`, so the gathered block is simply
    the set bits in increasing order: slot j holds the j-th lowest set bit,
    found with ``ctz(m)`` and ``m &= m - 1`` (a few integer operations per
    slot, no sort, no search). The untrusted oracle sees exactly what
    :func:`gpuprivacy.oracle.evaluate` shows it: the subset's rows in
    canonical order, zero padding, ``valid``, a public capacity. The subset relation is the same under any relabelling of the
    atoms, so the sweeps work on these masks directly (Linder, Raskhodnikova,
    Smith & Steinke 2025, Secs. 3-4: the wrappers query every subset).

    Scale: the result (``8 * 2**n`` bytes, 8 GiB at n = 30) is allocated once
    on the device and each chunk is written into it in place (a donated
    buffer and ``dynamic_update_slice``), so the peak is the result plus one
    chunk. n is limited by the device's memory
    (:func:`gpuprivacy.subsets.check_powerset_fits`, refused before any
    oracle call), not by a constant.

    Args:
      oracle_fn: the untrusted ``f(rows, valid) -> scalar``.
      data: ``[n, ...]`` real rows.
      capacity: public block size (default :data:`DEFAULT_CAPACITY`).
      max_queries: public budget of oracle calls (``2**n`` above it is refused
        before any call); None for no budget (the memory check still applies).
      chunk_size: subsets per call (default :func:`powerset_chunk_size`: a byte
        budget, 2**16 on a CPU and 2**23 on a GPU). The values do not
        depend on it, bit for bit: every subset goes through the same compiled
        micro-batch of :func:`powerset_micro_batch` subsets.
      verify_determinism: evaluate everything a second time with another
        chunking and raise if any value differs (compared chunk by chunk on
        the device, so no second 2**n array).
      progress: progress bar.

    Returns:
      float64 ``[2**n]`` values by canonical bitmask, on the device.

    Raises:
      ValueError: bad data or capacity, more than ``max_queries`` subsets,
        a power set that does not fit the device's memory, or (with
        ``verify_determinism``) a non-deterministic oracle.
    """
    from gpuprivacy._progress import Progress
    from gpuprivacy.oracle._evaluate import canonical_order

    data = check_data(data)
    n = data.shape[0]
    capacity = check_capacity(capacity, n)
    if max_queries is not None:
        plan_queries(n, n, max_queries=max_queries, what=f"evaluating the power set of n={n} rows")
    total = 1 << n
    micro = powerset_micro_batch()
    step = powerset_chunk_size(n) if chunk_size is None else check_int("chunk_size", chunk_size, minimum=1)
    step = min(step, total)
    row_elements = int(np.prod(data.shape[1:], dtype=np.int64))
    # Fixed-size buffers besides the result: a chunk's temporaries and a few micro-batches of gathered rows.
    chunk_bytes = _CHUNK_BYTES_PER_SUBSET * max(step, 2 * micro) + 4 * micro * capacity * max(row_elements, 1) * 8
    check_powerset_fits(n, bytes_per_subset=EVALUATE_BYTES_PER_SUBSET, extra_bytes=chunk_bytes,
                        what=f"evaluate_powerset (n={n}, capacity={capacity})")
    oracle_fn = _resolve(oracle_fn, data, capacity)  # before any data is touched
    oracle = pad_resolved(oracle_fn, capacity)
    sorted_data = jnp.asarray(data[canonical_order(data)])
    mesh = default_mesh()
    if mesh.shape[SUBSETS_AXIS] > 1:
        values = _evaluate_powerset_split(oracle, sorted_data, n, capacity, step, micro, mesh, progress)
    else:
        values = jnp.zeros(total, jnp.float64)
        with Progress(total, "evaluate", enabled=progress) as bar:
            for start, size in _chunks(total, step):
                write, _ = _powerset_kernels(oracle, n, capacity, size, micro)
                values = write(values, sorted_data, jnp.asarray(start, jnp.int64))
                bar.update(size)
    if verify_determinism:
        other = max(1, step // 2) if step > 1 else min(2, total)
        mismatches = jnp.zeros((), jnp.int64)
        for start, size in _chunks(total, other):
            _, compare = _powerset_kernels(oracle, n, capacity, size, micro)
            mismatches = mismatches + compare(values, sorted_data, jnp.asarray(start, jnp.int64))
        if int(mismatches):
            _raise_not_deterministic()
    return values


def _evaluate_powerset_split(oracle, sorted_data, n, capacity, step, micro, mesh, progress):
    """The power set over several devices: device d evaluates the masks of its own run (docs/engine.md).

    Every device runs the same compiled micro-batch body as the one-device
    path (:func:`_powerset_kernels`), so the values agree bit for bit; each
    keeps its run of the result, and the first ``2**n`` values are returned.
    """
    from gpuprivacy._progress import Progress

    total, devices = 1 << n, mesh.shape[SUBSETS_AXIS]
    step = min(step, -(-total // devices))
    run = -(-total // (devices * step)) * step  # each device's run: whole chunks
    sharded = NamedSharding(mesh, PartitionSpec(SUBSETS_AXIS))
    values = jax.jit(lambda: jnp.zeros(run * devices, jnp.float64), out_shardings=sharded)()
    write = _powerset_split_kernel(oracle, n, capacity, step, micro, run, mesh)
    with Progress(total, "evaluate", enabled=progress) as bar:
        for chunk in range(run // step):
            values = write(values, sorted_data, jnp.asarray(chunk, jnp.int64))
            bar.update(min(step * devices, total - chunk * step * devices) if chunk * step * devices < total else 0)
    return jax.jit(lambda v: v[:total])(values)


@functools.lru_cache(maxsize=32)
def _powerset_split_kernel(oracle, n, capacity, step, micro, run, mesh):
    batches = max(2, -(-step // micro))

    def per_device(values, sorted_data, chunk):
        device = jax.lax.axis_index(SUBSETS_AXIS).astype(jnp.int64)
        start = device * run + chunk * step
        out = _powerset_chunk(oracle, sorted_data, start, n, capacity, batches, micro)
        return jax.lax.dynamic_update_slice(values, out[:step], (chunk * step,))

    step_fn = jax.shard_map(per_device, mesh=mesh, in_specs=(PartitionSpec(SUBSETS_AXIS), PartitionSpec(),
                                                             PartitionSpec()),
                            out_specs=PartitionSpec(SUBSETS_AXIS), check_vma=False)
    return jax.jit(step_fn, donate_argnums=0)


def _powerset_chunk(oracle, sorted_data, start, n, capacity, batches, micro):
    """The oracle on masks ``start .. start + batches * micro`` (past 2**n they wrap; callers cut them off).

    The one compiled body of both power-set paths (one device, split), so they agree bit for bit.
    """
    masks = (start + jnp.arange(batches * micro, dtype=jnp.int64)) & ((1 << n) - 1)
    return apply_oracle(oracle, lambda m: blocks_from_bitmasks(sorted_data, m, n, capacity), masks,
                        micro_batch=micro)


def _chunks(total, step):
    """``(start, size)`` of each chunk: whole chunks of ``step``, then the remainder (its own shape)."""
    whole = total - total % step
    out = [(start, step) for start in range(0, whole, step)]
    if whole < total:
        out.append((whole, total - whole))
    return out


def _check_same(values, again):
    if not bool(jnp.all((values == again) | (jnp.isnan(values) & jnp.isnan(again)))):
        _raise_not_deterministic()


def _raise_not_deterministic():
    raise ValueError("the oracle returned different values on the same subset in two evaluations; the "
                     "wrappers require a deterministic function of the subset. Make the "
                     "oracle a pure, deterministic JAX function.")


@functools.lru_cache(maxsize=32)
def _powerset_kernels(oracle, n, capacity, size, micro):
    """Jitted ``write(values, sorted_data, start)`` (in place, donated) and ``compare`` for chunks of ``size``.

    Each chunk runs whole micro-batches of ``micro`` subsets, at least two
    (a one-step ``lax.map`` is inlined and compiled differently), so the
    compiled oracle body is the same for every chunk size; masks past 2**n
    wrap around and their values are dropped.
    """
    batches = max(2, -(-size // micro))

    def chunk_values(sorted_data, start):
        return _powerset_chunk(oracle, sorted_data, start, n, capacity, batches, micro)[:size]

    def write(values, sorted_data, start):
        return jax.lax.dynamic_update_slice(values, chunk_values(sorted_data, start), (start,))

    def compare(values, sorted_data, start):
        again = chunk_values(sorted_data, start)
        seen = jax.lax.dynamic_slice(values, (start,), (size,))
        same = (seen == again) | (jnp.isnan(seen) & jnp.isnan(again))
        return jnp.sum(~same, dtype=jnp.int64)

    return jax.jit(write, donate_argnums=0), jax.jit(compare)


def split_levels(values: jax.Array, n: int, depth: int) -> list:
    """Removal-order values as a list of per-level arrays (level d has C(n, d) entries); ``0 <= depth <= n``."""
    depth = _check_depth(depth, n)
    offsets = level_offsets(n, depth)
    return [values[offsets[d]:offsets[d + 1]] for d in range(depth + 1)]


def to_powerset(values: jax.Array, n: int, depth: int, fill) -> jax.Array:
    """Removal-order values as a ``[2**n]`` bitmask-indexed array (KEEP bits); ``fill`` where deeper than depth.

    ``0 <= depth <= n``, as for :func:`evaluate_levels` (a deeper depth is refused, not taken as n).

    The removal index of each mask is computed on the device inside the
    gather (:func:`gpuprivacy.subsets.removal_index_of_masks`), so no 2**n
    index table is built on the host or baked into the program; the output
    (2**n values) must fit the device's memory, checked before any work.
    """
    n = check_int("n", n, minimum=1)
    depth = _check_depth(depth, n)
    values = jnp.asarray(values)
    check_powerset_fits(n, bytes_per_subset=max(TO_POWERSET_BYTES_PER_SUBSET, values.dtype.itemsize),
                        extra_bytes=int(values.nbytes), what=f"to_powerset (n={n}, depth={depth})")
    return _to_powerset(values, jnp.asarray(fill, values.dtype), n, depth)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _to_powerset(values, fill, n, depth):
    def block(masks):
        # The n passes of the index run on one block of masks at a time (powerset_map): unrolled over the
        # whole power set they would hold ~20 int arrays of 2**n entries (160 bytes per subset on a CPU).
        index = removal_index_of_masks(masks, n, depth)
        return jnp.where(index >= 0, values[jnp.maximum(index, 0)], fill)

    return powerset_map(block, n)


def expected_count(n: int, depth: int) -> int:
    """Number of values :func:`evaluate_levels` returns."""
    return sum(math.comb(n, i) for i in range(min(depth, n) + 1))
