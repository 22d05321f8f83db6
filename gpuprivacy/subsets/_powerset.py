"""Power sets and removal levels: exact query counts, a planner, and level sweeps.

Linder, Raskhodnikova, Smith & Steinke, *Privately Evaluating Untrusted
Black-Box Functions* (2025), Secs. 3-4. The wrappers of that paper evaluate
an untrusted f on every subset of x with at least l elements and then run
level-by-level sweeps on the cached values. Two layouts:

* **Regime A (full power set, n <= powerset_max_n()):** subsets are bitmask
  integers ``0 .. 2**n - 1`` (bit i set = row i KEPT); the subset-closure max
  is ``n`` sum-over-subsets (SOS) passes, per-level reductions are segment
  reductions by popcount, block by block. Every array of this regime has 2**n entries (8 GiB
  of float64 at n = 30), so its limit is the device's memory, not a constant:
  :func:`powerset_max_n` derives it, :func:`check_powerset_fits` refuses
  before any work, and no jitted program holds a 2**n constant (masks,
  popcounts and removal indices are computed on the device from an iota).
* **Regime B (n large, depth small):** level d holds the subsets with d rows
  removed, ranked by the colex rank of the removed set (the order of
  :func:`gpuprivacy.subsets.removals`); a sweep from the deepest level toward
  depth 0 links each subset to its children (one more row removed) through
  :func:`child_ranks`, so only two adjacent levels are worked on at a time.

Counts are exact Python integers (C(1000, 24) ~ 1e48 overflows
int64).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import _memory
from gpuprivacy._checks import check_int
from gpuprivacy._memory import DEVICE_MEMORY_FRACTION as DEVICE_MEMORY_FRACTION
from gpuprivacy._memory import HOST_MEMORY_FRACTION as HOST_MEMORY_FRACTION
from gpuprivacy.subsets import _combinatorics as comb

POWERSET_MAX_N = 32
"""Hard ceiling on n for the full power set (regime A), whatever the memory.

Bitmasks are ``uint32`` on the device (``int64`` on the host), so n <= 32 keeps
every mask, XOR and shift exact; beyond it a power set (4.3e9 subsets at
n = 32) is far past any device memory anyway. The limit that actually applies
is :func:`powerset_max_n`, derived from the device's memory: each array of
2**n float64 values takes ``8 * 2**n`` bytes (8 GiB at n = 30).
"""

EVALUATE_BYTES_PER_SUBSET = 8
"""Bytes per subset that :func:`gpuprivacy.oracle.evaluate_powerset` holds: its float64 output.

The chunks it works on have a fixed size (a byte budget), counted separately.
"""

TO_POWERSET_BYTES_PER_SUBSET = 8
"""Bytes per subset of :func:`gpuprivacy.oracle.to_powerset`: its float64 output (the index is computed per block)."""

WRAPPER_BYTES_PER_SUBSET = 32
"""Bytes per subset a regime-A privacy wrapper holds at its peak (Linder et al. 2025, Secs. 3-4), with a margin.

Counted array by array (2**n entries each) and checked against XLA's own
buffer accounting (``memory_analysis`` of every compiled sweep at n = 20, in
``tests/subsets/test_powerset_scale.py``; the same numbers on an H100 at
n = 30):

* building the cache: the raw float64 oracle values (8) and their sanitised
  copy (8) are alive together: 16;
* the sweeps: the cached values (8) plus at most two more arrays of 2**n
  entries, because every sweep runs block by block (:func:`powerset_blocks`)
  and the SOS passes in a loop (:func:`subset_max`): the closure's start
  array and its next value (Double-Monotonization 24, Cummings-Durfee 24),
  the int32 stability floor and its SOS pass (Subset-Extension, TAHOE,
  Small-Diameter 16), int32 grid indices (Sens-o-Matic 12);

so 24 measured, 32 with one float64 array of margin for buffer assignment
on other backends: 32 GiB at n = 30, which an 80 GB GPU holds (its default
allocator limit is ~59 GiB, of which :data:`DEVICE_MEMORY_FRACTION` is used;
an H100 measured a peak of 16 GiB for Small-Diameter at n = 30).
"""



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


def memory_limit(device=None) -> tuple[int, str]:
    """The memory limit of ``device`` (default: JAX's default device) in bytes, and where it comes from.

    An accelerator reports its allocator limit in ``memory_stats()["bytes_limit"]``
    (GPUs and TPUs); a CPU device reports nothing, and then the limit is the
    host's physical memory (``SC_PAGE_SIZE * SC_PHYS_PAGES``). Apply
    :func:`powerset_budget` for the share the power set may use.

    Returns:
      ``(bytes, description)``, e.g. ``(64_000_000_000, "gpu:0 (NVIDIA H100 80GB HBM3), allocator bytes_limit")``.
    """
    total, where, _ = _memory.device_memory_bytes(device)
    return total, where


def powerset_budget(device=None) -> tuple[int, str]:
    """Bytes the power set may use on ``device``: a safety share of :func:`memory_limit`.

    :data:`DEVICE_MEMORY_FRACTION` of an accelerator's allocator limit, or
    :data:`HOST_MEMORY_FRACTION` of the host's physical memory (the one probe
    every engine uses).

    Returns:
      ``(bytes, description)``; the description names the device, the source and the share.
    """
    limit, source = memory_limit(device)
    return _memory.planning_share(limit, source, source.endswith("host physical memory"))


def powerset_bytes(n: int, bytes_per_subset: int = WRAPPER_BYTES_PER_SUBSET, extra_bytes: int = 0) -> int:
    """The working set of a power-set computation: ``bytes_per_subset * 2**n + extra_bytes`` (exact int)."""
    return bytes_per_subset * (1 << n) + extra_bytes


def powerset_max_n(bytes_per_subset: int = WRAPPER_BYTES_PER_SUBSET, device=None, *, extra_bytes: int = 0) -> int:
    """The largest n whose full power set fits the memory of ``device`` (regime A), at most :data:`POWERSET_MAX_N`.

    Regime A (Linder, Raskhodnikova, Smith & Steinke 2025, Secs. 3-4: every
    subset of x is queried and swept) holds arrays of 2**n values: each
    float64 array takes ``8 * 2**n`` bytes, 8 GiB at n = 30. The limit is
    therefore the largest n with ``bytes_per_subset * 2**n + extra_bytes``
    within :func:`powerset_budget`, so a 80 GB GPU takes n = 30 where a
    CPU with 24 GB of memory stops lower for the wrappers.

    Args:
      bytes_per_subset: bytes held per subset at the peak (default
        :data:`WRAPPER_BYTES_PER_SUBSET`, a wrapper; :data:`EVALUATE_BYTES_PER_SUBSET`
        for the evaluation alone).
      device: the device (default: JAX's default device).
      extra_bytes: bytes that do not scale with 2**n (chunk buffers).

    Returns:
      The largest such n (-1 if not even n = 0 fits).
    """
    bytes_per_subset = check_int("bytes_per_subset", bytes_per_subset, minimum=1)
    budget, _ = powerset_budget(device)
    fits = -1
    for n in range(POWERSET_MAX_N + 1):
        if powerset_bytes(n, bytes_per_subset, extra_bytes) > budget:
            break
        fits = n
    return fits


def check_powerset_fits(n: int, *, bytes_per_subset: int = WRAPPER_BYTES_PER_SUBSET, what: str = "the power set",
                        device=None, extra_bytes: int = 0) -> int:
    """Refuses, before any work, a power set of n rows that does not fit the device's memory.

    The check depends only on n and the device (public), so like
    :func:`plan_queries` it is a configuration error, never a release.

    Args:
      n: number of rows (atoms).
      bytes_per_subset: bytes held per subset (see :func:`powerset_max_n`).
      what: what needs the power set, for the message.
      device: the device (default: JAX's default device).
      extra_bytes: bytes that do not scale with 2**n.

    Returns:
      The bytes needed.

    Raises:
      ValueError: n above :data:`POWERSET_MAX_N`, or a working set above
        :func:`powerset_budget`; the message gives n, the bytes needed and
        available on which device, and the largest n that fits.

    Examples:
      >>> check_powerset_fits(10, bytes_per_subset=8)
      8192
    """
    n = check_int("n", n, minimum=0)
    need = powerset_bytes(n, bytes_per_subset, extra_bytes)
    if n > POWERSET_MAX_N:
        raise ValueError(f"{what} needs the full power set of n={n} rows (2**{n} subsets), above the hard ceiling "
                         f"POWERSET_MAX_N={POWERSET_MAX_N} of regime A (bitmasks are 32-bit). Use n <= "
                         f"{min(POWERSET_MAX_N, powerset_max_n(bytes_per_subset, device, extra_bytes=extra_bytes))} "
                         "or the removal-level layout (a public max_depth). Nothing was evaluated.")
    budget, where = powerset_budget(device)
    if need > budget:
        fits = powerset_max_n(bytes_per_subset, device, extra_bytes=extra_bytes)
        raise ValueError(
            f"{what} needs the full power set of n={n} rows in memory: {bytes_per_subset} bytes for each of the "
            f"2**{n} subsets{f' plus {extra_bytes} bytes' if extra_bytes else ''} = {need} bytes "
            f"({need / 2**30:.3g} GiB), more than the {budget} bytes ({budget / 2**30:.3g} GiB) available on "
            f"{where}. The largest n that fits is {fits}. Use n <= {fits}, a device with more memory, or the "
            "removal-level layout (a public max_depth). Nothing was evaluated and no noise was drawn.")
    return need


def device_masks(n: int) -> jax.Array:
    """Every bitmask ``0 .. 2**n - 1`` as ``uint32``, built on the device (an iota, never a 2**n constant).

    Jittable with n static; uint32 holds every mask up to n = :data:`POWERSET_MAX_N`.
    """
    return jax.lax.iota(jnp.uint32, 1 << n)


def device_popcounts(n: int, dtype=jnp.int32) -> jax.Array:
    """``popcount(s)`` for every bitmask ``s < 2**n``, computed on the device (``lax.population_count``).

    What the sweeps use instead of the host table :func:`popcounts`: a jitted
    program gets an iota and a popcount, not a baked-in 2**n constant (512 MB
    of int64 at n = 26, 8 GiB at n = 30). ``dtype`` int32 takes half the
    memory where XLA materialises it; the values (0..n) are the same.
    """
    return jax.lax.population_count(device_masks(n)).astype(dtype)


def popcounts(n: int) -> np.ndarray:
    """``popcount(s)`` for every bitmask ``s < 2**n`` (int64 NumPy, read-only), on the host.

    Kept for callers and tests; the engine uses :func:`device_popcounts`
    (nothing of size 2**n goes through the host). Not cached: at n = 30 the
    table is 8 GiB.
    """
    n = check_int("n", n, minimum=0, maximum=POWERSET_MAX_N)
    check_powerset_fits(n, bytes_per_subset=8, what="popcounts(n) (a host table)", device=_host_device())
    out = np.zeros(1 << n, dtype=np.int64)
    for bit in range(n):
        out[1 << bit:1 << (bit + 1)] = out[:1 << bit] + 1
    out.setflags(write=False)
    return out


def _host_device():
    return jax.devices("cpu")[0]


def removal_index_of_masks(masks: jax.Array, n: int, depth: int) -> jax.Array:
    """For KEEP bitmasks: their index in ``removals(n, depth)`` order, or -1 where deeper (jittable; n, depth static).

    The removed set is the complement ``R = ~s``; its index is the level
    offset plus the colex rank ``sum_k C(r_k, k)``, accumulated in n passes
    over the bits. The only constants are the binomial table ``[n+1, n+2]``
    and the level offsets ``[n+2]`` (no 2**n table). Run it on blocks of
    masks (:func:`powerset_map`, as :func:`gpuprivacy.oracle.to_powerset`
    does): over all 2**n masks at once XLA holds every pass's int arrays.

    Returns:
      int64 indices, shape of ``masks``.
    """
    binom = jnp.asarray(np.asarray([[math.comb(c, k) for k in range(n + 2)] for c in range(n + 1)], np.int64))
    offsets = jnp.asarray(np.asarray(comb.level_offsets(n, n), dtype=np.int64))
    removed_count = jnp.zeros(masks.shape, jnp.int32)
    rank = jnp.zeros(masks.shape, jnp.int64)
    for bit in range(n):
        is_removed = ((masks >> bit) & 1) == 0
        removed_count = removed_count + is_removed.astype(jnp.int32)
        rank = rank + jnp.where(is_removed, binom[bit, removed_count], 0)
    index = offsets[removed_count] + rank
    return jnp.where(removed_count <= depth, index, -1)


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
