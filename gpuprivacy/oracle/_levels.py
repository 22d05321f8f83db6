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

from gpuprivacy._checks import check_data, check_int
from gpuprivacy.oracle._evaluate import DEFAULT_MAX_QUERIES, evaluate
from gpuprivacy.oracle._isolation import apply_oracle, blocks_from_bitmasks, padded_oracle
from gpuprivacy.oracle._trust import resolve_oracle
from gpuprivacy.subsets import POWERSET_MAX_N, bitmask_to_removal_index, level_offsets, plan_queries, removals

DEFAULT_CAPACITY = 32
"""Public block capacity the untrusted oracle is traced with (rows beyond |z| are zero, ``valid`` False)."""




def _resolve(oracle_fn, data, capacity):
    """The oracle as the engine will run it on blocks of the public capacity (the one gate, see _trust)."""
    return resolve_oracle(oracle_fn, rows_shape=(capacity,) + data.shape[1:], rows_dtype=data.dtype,
                          capacity=capacity)


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
      depth: deepest level (number of removed rows); depths >= n mean the power set.
      capacity: public block size (default :data:`DEFAULT_CAPACITY`).
      max_queries: public budget; ``Q(n, depth)`` above it is refused before any call.
      chunk_size: passed to :func:`gpuprivacy.oracle.evaluate`.
      verify_determinism: evaluate twice and raise if any value differs.
      progress: progress bar.

    Returns:
      float64 ``[Q(n, depth)]`` values, level 0 first, colex order within a
      level (the order of :func:`gpuprivacy.subsets.removals`).

    Raises:
      ValueError: bad data, capacity < n, too many queries, a non-scalar
        oracle, or (with ``verify_determinism``) a non-deterministic oracle.
    """
    data = check_data(data)
    n = data.shape[0]
    capacity = check_capacity(capacity, n)
    depth = min(check_int("depth", depth, minimum=0), n)
    plan_queries(n, depth, max_queries=max_queries, what=f"evaluating n={n} rows to depth {depth}")
    family = removals(n, depth)
    oracle = padded_oracle(_resolve(oracle_fn, data, capacity), capacity)
    values = evaluate(oracle, data, family, chunk_size=chunk_size, progress=progress,
                      max_queries=None)  # planned above against this call's max_queries
    if verify_determinism:
        _check_same(values, evaluate(oracle, data, family, chunk_size=1 if chunk_size != 1 else 4096,
                                     max_queries=None))
    return values


def evaluate_powerset(oracle_fn, data, *, capacity: int | None = None, max_queries: int = DEFAULT_MAX_QUERIES,
                      chunk_size: int = 1 << 16, verify_determinism: bool = False,
                      progress: bool = False) -> jax.Array:
    """The oracle's value on all ``2**n`` subsets, indexed by bitmask over *canonical* positions (regime A).

    Bit i of a mask keeps the row of rank i in the canonical (sorted) order of
    :func:`gpuprivacy.oracle.canonical_order`, so the gathered block is simply
    the set bits in increasing order: slot j holds the j-th lowest set bit,
    found with ``ctz(m)`` and ``m &= m - 1`` (a few integer operations per
    slot, no sort, no search). The untrusted oracle sees exactly what
    :func:`gpuprivacy.oracle.evaluate` shows it: the subset's rows in
    canonical order, zero padding, ``valid``, a public capacity. The subset relation is the same under any relabelling of the
    atoms, so the sweeps work on these masks directly.

    Returns:
      float64 ``[2**n]`` values by canonical bitmask.
    """
    from gpuprivacy._progress import Progress
    from gpuprivacy.oracle._evaluate import canonical_order

    data = check_data(data)
    n = data.shape[0]
    check_int("n", n, maximum=POWERSET_MAX_N)
    capacity = check_capacity(capacity, n)
    plan_queries(n, n, max_queries=max_queries, what=f"evaluating the power set of n={n} rows")
    oracle_fn = _resolve(oracle_fn, data, capacity)  # before any data is touched
    sorted_data = jnp.asarray(data[canonical_order(data)])
    total = 1 << n
    step = min(check_int("chunk_size", chunk_size, minimum=1), total)
    kernel = _powerset_kernel(padded_oracle(oracle_fn, capacity), n, capacity, step)
    outputs = []
    with Progress(total, "evaluate", enabled=progress) as bar:
        for start in range(0, total, step):
            outputs.append(kernel(sorted_data, jnp.asarray(start, jnp.int64)))
            bar.update(min(step, total - start))
    values = jnp.concatenate(outputs)[:total]
    if verify_determinism:
        other = _powerset_kernel(padded_oracle(oracle_fn, capacity), n, capacity, total)
        _check_same(values, other(sorted_data, jnp.asarray(0, jnp.int64))[:total])
    return values


def _check_same(values, again):
    if not bool(jnp.all((values == again) | (jnp.isnan(values) & jnp.isnan(again)))):
        raise ValueError("the oracle returned different values on the same subset in two evaluations; the "
                         "wrappers require a deterministic function of the subset. Make the "
                         "oracle a pure, deterministic JAX function.")


@functools.lru_cache(maxsize=32)
def _powerset_kernel(oracle, n, capacity, step):
    micro = min(step, 256)
    batches = -(-step // micro)

    def kernel(sorted_data, start):
        masks = (start + jnp.arange(batches * micro, dtype=jnp.int64)) & ((1 << n) - 1)
        out = apply_oracle(oracle, lambda m: blocks_from_bitmasks(sorted_data, m, n, capacity), masks,
                           micro_batch=micro)
        return out[:step]

    return jax.jit(kernel)


def split_levels(values: jax.Array, n: int, depth: int) -> list:
    """Removal-order values as a list of per-level arrays (level d has C(n, d) entries)."""
    depth = min(depth, n)
    offsets = level_offsets(n, depth)
    return [values[offsets[d]:offsets[d + 1]] for d in range(depth + 1)]


def to_powerset(values: jax.Array, n: int, depth: int, fill) -> jax.Array:
    """Removal-order values as a ``[2**n]`` bitmask-indexed array (KEEP bits); ``fill`` where deeper than depth."""
    check_int("n", n, minimum=1, maximum=POWERSET_MAX_N)
    index = bitmask_to_removal_index(n, min(depth, n))
    return _scatter(values, jnp.asarray(index), jnp.asarray(fill, values.dtype))


@jax.jit
def _scatter(values, index, fill):
    return jnp.where(index >= 0, values[jnp.maximum(index, 0)], fill)


def expected_count(n: int, depth: int) -> int:
    """Number of values :func:`evaluate_levels` returns."""
    return sum(math.comb(n, i) for i in range(min(depth, n) + 1))
