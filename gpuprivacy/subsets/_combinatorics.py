"""Exact counts and colex (un)ranking of removal sets.

Subsets obtained by removing ``i`` elements of ``[n]`` are indexed by their
removed set ``R = {r_1 < ... < r_i}``, ranked in colexicographic order

.. math:: \\operatorname{rank}(R) = \\sum_{k=1}^{i} \\binom{r_k}{k}

(Knuth, TAOCP 7.2.1.3, Thm L; our regime B). Counts are exact
Python integers; the device tables are int64 and refuse sizes past 2**62.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_int
from gpuprivacy._search import count_at_most

_INT64_SAFE = 2**62


def count_removals(n: int, depth: int) -> int:
    """Exact number of subsets of ``[n]`` with at most ``depth`` elements removed.

    .. math:: Q(n, D) = \\sum_{i=0}^{\\min(D, n)} \\binom{n}{i}

    Args:
      n: number of rows, >= 0.
      depth: largest number of removed rows, 0 <= depth <= n.

    Returns:
      Q(n, depth) as a Python int (Linder et al. 2025, Sec. 6).

    Examples:
      >>> count_removals(20, 2)
      211
    """
    n = check_int("n", n, minimum=0)
    depth = check_int("depth", depth, minimum=0)
    if depth > n:
        raise ValueError(f"depth must be <= n = {n}, got depth={depth}. Removing more rows than exist is "
                         f"meaningless; use depth <= {n}.")
    return sum(math.comb(n, i) for i in range(depth + 1))


def level_offsets(n: int, depth: int) -> list[int]:
    """Start index of each level (0 removed first): ``[0, 1, 1 + n, ...]`` of length depth + 2."""
    offsets = [0]
    for i in range(depth + 1):
        offsets.append(offsets[-1] + math.comb(n, i))
    return offsets


def binomial_table(n: int, depth: int) -> np.ndarray:
    """int64 table ``T[c, k] = C(c, k)`` for ``0 <= c <= n``, ``0 <= k <= depth``."""
    if math.comb(n, min(depth, n // 2)) >= _INT64_SAFE:
        raise ValueError(f"C({n}, {depth}) exceeds 2**62; a family that large cannot be indexed on the device. "
                         "Use a smaller depth.")
    table = np.zeros((n + 1, depth + 1), dtype=np.int64)
    for c in range(n + 1):
        for k in range(min(c, depth) + 1):
            table[c, k] = math.comb(c, k)
    return table


def colex_rank(removed) -> int:
    """Colex rank of a removed set within its level (Python ints, exact)."""
    r = sorted(int(x) for x in removed)
    if len(set(r)) != len(r) or (r and r[0] < 0):
        raise ValueError(f"removed must hold distinct non-negative indices, got {list(removed)!r}.")
    return sum(math.comb(x, k + 1) for k, x in enumerate(r))


def colex_unrank(rank: int, size: int) -> list[int]:
    """The removed set of the given colex rank and size (Python ints, exact)."""
    rank = check_int("rank", rank, minimum=0)
    out = []
    for k in range(size, 0, -1):
        c = k - 1
        while math.comb(c + 1, k) <= rank:
            c += 1
        out.append(c)
        rank -= math.comb(c, k)
    return sorted(out)


def removal_index(n: int, removed) -> int:
    """Global index of a removal subset in ``removals(n, depth)`` order (level first, then colex)."""
    r = list(removed)
    if any(int(x) >= n for x in r):
        raise ValueError(f"removed indices must be < n = {n}, got {r!r}.")
    return sum(math.comb(n, i) for i in range(len(r))) + colex_rank(r)


def removal_set(n: int, index: int) -> list[int]:
    """Inverse of :func:`removal_index` (Python ints, exact)."""
    index = check_int("index", index, minimum=0)
    level = 0
    while index >= math.comb(n, level):
        index -= math.comb(n, level)
        level += 1
        if level > n:
            raise ValueError(f"index exceeds the number of subsets of [{n}] (2**{n}).")
    return colex_unrank(index, level)


def unrank_removed_device(global_index: jax.Array, table: jax.Array, offsets: jax.Array, n: int,
                          depth: int) -> jax.Array:
    """Removed sets of global indices, on the device.

    Every search is branchless and unrolled (:func:`gpuprivacy._search.count_at_most`):
    the level is a count of level offsets at most the index, and each removed
    element the largest ``c`` with ``C(c, k) <= rank`` (Knuth's greedy colex
    decoding), ``log2(n + 1)`` compare-and-select steps each. No while loop, so
    XLA fuses the decoding into the gather that follows.

    Args:
      global_index: int64 ``[B]`` indices into ``removals(n, depth)``.
      table: the int64 :func:`binomial_table` ``[n + 1, depth + 1]``.
      offsets: int64 :func:`level_offsets` ``[depth + 2]``.

    Returns:
      int32 ``[B, max(depth, 1)]`` removed indices in ascending order, padded
      with the sentinel ``n`` where the level is below ``depth``.
    """
    width = max(depth, 1)
    if depth == 0:
        return jnp.full(global_index.shape + (width,), n, dtype=jnp.int32)
    # offsets[0] = 0 <= every index, so the level is the number of later offsets at most the index.
    level = count_at_most(offsets[1:depth + 1], global_index)
    rank = global_index - offsets[level]
    columns = []
    for k in range(depth, 0, -1):
        active = k <= level
        # Largest c with C(c, k) <= rank: C(., k) is nondecreasing in c.
        c = count_at_most(table[:, k], rank) - 1
        rank = jnp.where(active, rank - table[jnp.clip(c, 0, n), k], rank)
        columns.append(jnp.where(active, c, n))
    # Produced largest first (r_level > ... > r_1, sentinels n for inactive columns): sort, sentinels last.
    removed = jnp.stack(columns[::-1], axis=-1).astype(jnp.int32)
    return sort_small(removed)


def sort_small(values: jax.Array) -> jax.Array:
    """Sorts the last axis ascending; a min/max network for widths up to 4, else ``jnp.sort``.

    Removed sets are a few indices wide; XLA's general sort costs far more
    than a handful of compare-exchanges on such widths.
    """
    width = values.shape[-1]
    if width > 4:
        return jnp.sort(values, axis=-1)
    cols = [values[..., i] for i in range(width)]
    network = {1: [], 2: [(0, 1)], 3: [(0, 1), (1, 2), (0, 1)], 4: [(0, 1), (2, 3), (0, 2), (1, 3), (1, 2)]}[width]
    for i, j in network:
        cols[i], cols[j] = jnp.minimum(cols[i], cols[j]), jnp.maximum(cols[i], cols[j])
    return jnp.stack(cols, axis=-1)
