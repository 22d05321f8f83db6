"""Power sets and removal levels: exact query counts, a planner, and level sweeps.

Linder, Raskhodnikova, Smith & Steinke, *Privately Evaluating Untrusted
Black-Box Functions* (2025), Secs. 3-4. The wrappers of that paper evaluate
an untrusted f on every subset of x with at least l elements and then run
level-by-level sweeps on the cached values. Two layouts:

* **Regime A (full power set, n <= POWERSET_MAX_N):** subsets are bitmask
  integers ``0 .. 2**n - 1`` (bit i set = row i KEPT); the subset-closure max
  is ``n`` sum-over-subsets (SOS) passes, per-level reductions are segment
  reductions by popcount.
* **Regime B (n large, depth small):** level d holds the subsets with d rows
  removed, ranked by the colex rank of the removed set (the order of
  :func:`gpuprivacy.subsets.removals`); a sweep from the deepest level toward
  depth 0 links each subset to its children (one more row removed) through
  :func:`child_ranks`, so only two adjacent levels are worked on at a time.

Counts are exact Python integers (C(1000, 24) ~ 1e48 overflows
int64).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_int
from gpuprivacy.subsets import _combinatorics as comb

POWERSET_MAX_N = 26
"""Largest n for which the full power set (2**n float64 values) is held on the device."""


def query_count(n: int, depth: int) -> int:
    """Exact ``Q(n, D)``: subsets of an n-set with at most ``depth`` elements removed.

    .. math:: Q(n, D) = \\sum_{i=0}^{\\min(D, n)} \\binom{n}{i}, \\qquad Q(n, D) = 2^n \\text{ for } D \\ge n.

    Args:
      n: number of atoms, >= 0.
      depth: largest number of removed atoms, >= 0 (may exceed n).

    Returns:
      A Python int (Linder et al. 2025, Sec. 6).

    Examples:
      >>> query_count(20, 4), query_count(5, 99)
      (6196, 32)
    """
    n = check_int("n", n, minimum=0)
    depth = check_int("depth", depth, minimum=0)
    return comb.count_removals(n, min(depth, n))


def largest_depth_within(n: int, max_queries: int) -> int:
    """The largest depth D with ``Q(n, D) <= max_queries`` (-1 if even D = 0 does not fit)."""
    total, depth = 0, -1
    for i in range(n + 1):
        total += math.comb(n, i)
        if total > max_queries:
            break
        depth = i
    return depth


def largest_n_within(depth: int, max_queries: int, *, limit: int = 1 << 20) -> int:
    """The largest n with ``Q(n, depth) <= max_queries`` (Q grows with n; 0 if none)."""
    lo, hi = 0, 1
    while hi < limit and query_count(hi, depth) <= max_queries:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if query_count(mid, depth) <= max_queries:
            lo = mid
        else:
            hi = mid
    return lo


def plan_queries(n: int, depth: int, *, max_queries: int, seconds_per_query: float | None = None,
                 what: str = "this release") -> int:
    """Checks, before any oracle call, that ``Q(n, depth)`` fits in ``max_queries``.

    The count is exact (Python ints). The refusal depends only on n and public
    parameters and is raised before any noise is drawn, so it is a
    curator-side configuration error, never a release (see docs/errata.md: the
    depth cap of a noisy depth is handled by the mechanisms, not here).

    Args:
      n: number of atoms.
      depth: largest number of removed atoms the release may need (may exceed n).
      max_queries: the public budget of oracle calls.
      seconds_per_query: a measured rate, used to say how long it would take.
      what: what is being planned, for the message.

    Returns:
      ``Q(n, depth)``.

    Raises:
      ValueError: if ``Q(n, depth) > max_queries``; the message gives the
        count, the estimated time and the parameters that would fit.

    Examples:
      >>> plan_queries(20, 3, max_queries=10**6)
      1351
    """
    n = check_int("n", n, minimum=0)
    depth = check_int("depth", depth, minimum=0)
    max_queries = check_int("max_queries", max_queries, minimum=1)
    count = query_count(n, depth)
    if count > max_queries:
        rate = (f" At the measured {seconds_per_query:.3g} s per query that is about "
                f"{_human_seconds(count * seconds_per_query)}." if seconds_per_query else "")
        fits_depth = largest_depth_within(n, max_queries)
        fits_n = largest_n_within(min(depth, n), max_queries)
        raise ValueError(
            f"{what} needs Q(n={n}, D={min(depth, n)}) = {count} ({count:.3e}) oracle queries, more than "
            f"max_queries={max_queries}.{rate} What would fit: depth <= {fits_depth} at n={n}, or n <= {fits_n} "
            f"at depth {min(depth, n)}; otherwise raise max_queries (or pass a public max_depth, which turns "
            "the guarantee into (epsilon, delta), see docs/errata.md). Nothing was evaluated and no noise was drawn.")
    return count


def _human_seconds(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


@functools.lru_cache(maxsize=8)
def popcounts(n: int) -> np.ndarray:
    """``popcount(s)`` for every bitmask ``s < 2**n`` (int64, read-only)."""
    n = check_int("n", n, minimum=0, maximum=POWERSET_MAX_N)
    out = np.zeros(1 << n, dtype=np.int64)
    for bit in range(n):
        out[1 << bit:1 << (bit + 1)] = out[:1 << bit] + 1
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=4)
def bitmask_to_removal_index(n: int, depth: int) -> np.ndarray:
    """For each KEEP bitmask ``s < 2**n``: its index in ``removals(n, depth)`` order, or -1 if deeper.

    The removed set is the complement ``R = ~s``; its index is the level
    offset plus the colex rank ``sum_k C(r_k, k)``. Computed
    with n vectorised passes over the bitmasks.
    """
    n = check_int("n", n, minimum=1, maximum=POWERSET_MAX_N)
    depth = min(check_int("depth", depth, minimum=0), n)
    masks = np.arange(1 << n, dtype=np.int64)
    removed_count = np.zeros(1 << n, dtype=np.int64)
    rank = np.zeros(1 << n, dtype=np.int64)
    binom = np.asarray([[math.comb(c, k) for k in range(n + 2)] for c in range(n + 1)], dtype=np.int64)
    for bit in range(n):
        is_removed = ((masks >> bit) & 1) == 0
        removed_count += is_removed
        rank += np.where(is_removed, binom[bit][removed_count], 0)
    offsets = np.asarray(comb.level_offsets(n, n), dtype=np.int64)
    index = offsets[removed_count] + rank
    index = np.where(removed_count <= depth, index, -1)
    index.setflags(write=False)
    return index


def level_removed_sets(n: int, level: int) -> np.ndarray:
    """The removed sets of level ``level`` in colex order, ``int64[C(n, level), level]`` ascending."""
    n = check_int("n", n, minimum=1)
    level = check_int("level", level, minimum=0, maximum=n)
    count = math.comb(n, level)
    table = comb.binomial_table(n, max(level, 1))
    rank = np.arange(count, dtype=np.int64)
    out = np.zeros((count, level), dtype=np.int64)
    for k in range(level, 0, -1):
        c = np.searchsorted(table[:, k], rank, side="right") - 1
        out[:, k - 1] = c
        rank = rank - table[c, k]
    return out


def child_ranks(n: int, level: int) -> np.ndarray:
    """Children of level ``level``: the colex rank in level ``level + 1`` of ``R + {j}``.

    Regime B of our layout: for ``R = {r_1 < ... < r_i}`` and ``j`` not in
    R with ``p = #{r_k < j}``,
    ``rank(R + {j}) = sum_{r_k < j} C(r_k, k) + C(j, p + 1) + sum_{r_k > j} C(r_k, k + 1)``.

    Returns:
      ``int64[C(n, level), n]``; entry ``[a, j]`` is the child rank, or -1
      where ``j`` is already removed (no child).
    """
    removed = level_removed_sets(n, level)
    count = removed.shape[0]
    binom = np.asarray([[math.comb(c, k) for k in range(level + 2)] for c in range(n + 1)], dtype=np.int64)
    k_index = np.arange(1, level + 1, dtype=np.int64)[None, :]
    own = binom[removed, k_index]          # C(r_k, k)
    shifted = binom[removed, k_index + 1]  # C(r_k, k + 1)
    out = np.empty((count, n), dtype=np.int64)
    for j in range(n):
        below = removed < j
        p = below.sum(axis=1)
        rank = np.where(below, own, 0).sum(axis=1) + binom[j, p + 1] + np.where(removed > j, shifted, 0).sum(axis=1)
        out[:, j] = np.where((removed == j).any(axis=1), -1, rank)
    return out


def lowest(dtype) -> jax.Array:
    """The identity of ``max`` for ``dtype`` (-inf, or the smallest integer)."""
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.array(-jnp.inf, dtype)
    return jnp.array(jnp.iinfo(dtype).min, dtype)


# ----------------------------------------------------------------------------------------------
# Regime A sweeps (jittable; n static, everything else may be traced)

def subset_max(values: jax.Array, n: int) -> jax.Array:
    """Sum-over-subsets maximum: ``out[s] = max_{z subset-of s} values[z]`` over bitmasks.

    Pass i reshapes to ``[2**(n-i-1), 2, 2**i]`` and sets
    ``A[:, 1, :] = max(A[:, 1, :], A[:, 0, :])`` (regime A).
    """
    a = values
    for bit in range(n):
        shaped = a.reshape((1 << (n - bit - 1), 2, 1 << bit))
        shaped = shaped.at[:, 1, :].set(jnp.maximum(shaped[:, 1, :], shaped[:, 0, :]))
        a = shaped.reshape(-1)
    return a


def level_reduce(values: jax.Array, n: int, op: str, fill) -> jax.Array:
    """Per-size reduction ``out[s] = op{values[z] : popcount(z) = s}`` for s = 0..n (``fill`` where masked)."""
    sizes = jnp.asarray(popcounts(n))
    if op == "min":
        return jax.ops.segment_min(values, sizes, num_segments=n + 1)
    if op == "max":
        return jax.ops.segment_max(values, sizes, num_segments=n + 1)
    raise ValueError(f"op must be 'min' or 'max', got {op!r}.")  # pragma: no cover


def bit_neighbours_differ(values: jax.Array, n: int, threshold: float) -> jax.Array:
    """``out[w]`` = some bit i in w has ``|values[w] - values[w ^ (1 << i)]| > threshold``."""
    masks = jnp.arange(1 << n, dtype=jnp.int64)
    bad = jnp.zeros(1 << n, dtype=bool)
    for bit in range(n):
        has = ((masks >> bit) & 1) == 1
        child = values[masks ^ (1 << bit)]
        bad = bad | (has & (jnp.abs(values - child) > threshold))
    return bad


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
