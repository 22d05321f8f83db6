"""Exact robust order statistics F(v) of a covering design's oracle values (Steinke & Steinke 2025, Algorithm 4.1).

For oracle values ``v_i`` on kept sets ``K_i`` (on a finite grid, as integer
indices with 0 = min Y),

.. math:: F(v) = \\min_{A \\subseteq [n],\\ |A| = v}\\ \\max\\{v_i : K_i \\cap A = \\emptyset\\},
          \\qquad \\max\\emptyset = \\min Y,

the smallest maximum surviving value after an adversary deletes v rows. Then
``l(x, y) = #{v : F(v) > y}`` is the paper's minimum hitting set (A.1), (6.3),
which has sensitivity 1 (Prop. A.1) ONLY when computed exactly: a greedy
hitting set breaks it (Steinke & Steinke 2025, Sec. 4). Every method here is exact:

* ``"sort"``: pairwise disjoint kept sets (sample-and-aggregate, c = 1):
  F(v) is the (v+1)-th largest value;
* ``"subset_transform"``: up to :data:`MAX_TRANSFORM_CHUNKS` chunks: the
  subset-max ("zeta") transform ``w(R) = max{v_i : K_i ⊆ R}`` over all
  ``2^{n0}`` chunk sets, then ``F(v) = min_{|R| = n0 - v} w(R)``; jitted JAX,
  runs on the device, a fixed sequence of operations;
* ``"branching"``: any design: an exact search tree. The largest surviving
  value belongs to some set ``K*``; either ``K*`` survives (the answer is
  its value) or one of its chunks is removed, so
  ``G(A, r) = min(M(A), min_{j in K*} G(A + j, r - 1))`` and ``F(v) = G(∅, v)``.

**Failure is data-independent.** Each method's worst-case work is a function
of the public design and the public cap C alone (``n0 2^{n0}`` for the
transform; ``k * min(sum_{d<C} s^d, sum_{d<C} binom(n0, d))`` tree nodes
for branching, s the largest kept set in chunks). :func:`aggregation_plan`
computes it and refuses the design *before any data or oracle value is
seen* if it exceeds the public ``max_work``; once accepted, the computation
always runs to its exact end (no timeout, no fallback value). So the released
value is always the exact F and sensitivity 1 holds on every input.
Remaining side channel: the branching method's wall time varies with the
values (the other two methods do not); if timing is observable, use designs
aggregated by ``"sort"`` or ``"subset_transform"``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_int
from gpuprivacy.designs._structure import ChunkStructure, chunk_structure
from gpuprivacy.subsets import SubsetFamily

# The subset-max transform needs 2^n0 int32 cells (2^24 = 64 MiB, 2^28 = 1 GiB: a device). Within this hard
# limit, the public ``max_work`` decides: the default 1e9 admits n0 <= 25; raise it on an accelerator.
MAX_TRANSFORM_CHUNKS = 28
# Default public limit on aggregation work (elementary set operations).
DEFAULT_MAX_WORK = 10**9
METHODS = ("auto", "sort", "subset_transform", "branching")


class AggregationPlan(NamedTuple):
    """How F(0..cap-1) will be computed, fixed before any data is seen.

    Attributes:
      method: "sort", "subset_transform" or "branching".
      cap: C, the number of order statistics computed (public).
      num_chunks: n0, chunks of the design.
      work_bound: data-independent worst-case work (elementary operations).
    """

    method: str
    cap: int
    num_chunks: int
    work_bound: int


def _branching_nodes(structure: ChunkStructure, cap: int) -> int:
    s, n0 = structure.max_set_chunks, structure.num_chunks
    tree = sum(s**d for d in range(cap))
    distinct = sum(math.comb(n0, d) for d in range(min(cap, n0 + 1)))
    return min(tree, distinct)


def aggregation_plan(family: SubsetFamily, cap: int, *, method: str = "auto",
                     max_work: int = DEFAULT_MAX_WORK) -> AggregationPlan:
    """Chooses an exact method for F(0..cap-1) from the public design alone, or refuses.

    Args:
      family: the design (keep masks).
      cap: C >= 1, the number of order statistics needed (pure DP: 2 tau).
      method: "auto" (cheapest exact method) or one of :data:`METHODS`.
      max_work: public limit on the worst-case work; designs above it are refused.

    Raises:
      ValueError: when no exact method fits in ``max_work`` (before any data is seen).
    """
    cap = check_int("cap", cap, minimum=1)
    max_work = check_int("max_work", max_work, minimum=1)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    structure = chunk_structure(family)
    k, n0 = structure.num_subsets, structure.num_chunks
    options = []
    if structure.disjoint:
        options.append(AggregationPlan("sort", cap, n0, k * max(1, math.ceil(math.log2(k + 1)))))
    if n0 <= MAX_TRANSFORM_CHUNKS:
        options.append(AggregationPlan("subset_transform", cap, n0, n0 * 2**n0 + k))
    options.append(AggregationPlan("branching", cap, n0, k * _branching_nodes(structure, cap)))
    if method != "auto":
        options = [o for o in options if o.method == method]
        if not options:
            raise ValueError(f"method {method!r} does not apply to this design (n0 = {n0} chunks, disjoint = "
                             f"{structure.disjoint}); use method='auto'.")
    best = min(options, key=lambda o: o.work_bound)
    if best.work_bound > max_work:
        raise ValueError(
            f"exact aggregation of this design needs up to {best.work_bound:.3e} operations (method "
            f"{best.method!r}, n0 = {n0} chunks, k = {k}, cap = {cap}), more than max_work = {max_work:.3e}. "
            "An approximate hitting set would break privacy (Steinke & Steinke 2025, Sec. 4), so the design is refused before any "
            "data is seen. Use a block design, fewer chunks (the subset transform needs n0 <= 28), or raise max_work.")
    return best


def robust_order_statistics(values, family: SubsetFamily, *, cap: int, method: str = "auto",
                            max_work: int = DEFAULT_MAX_WORK, plan: AggregationPlan | None = None) -> np.ndarray:
    """Exact F(0..cap-1) of Steinke & Steinke 2025, Algorithm 4.1 for integer grid values (0 = min Y = nonresponse).

    Args:
      values: int ``[k]`` grid indices ``>= 0``, one per kept set of ``family``.
      family: the design.
      cap: C, how many order statistics to return.
      method, max_work: see :func:`aggregation_plan`.
      plan: a plan from :func:`aggregation_plan` (skips re-planning).

    Returns:
      int64 ``[cap]``, non-increasing, ``F[0] = max(values)``.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy import designs
      >>> family = designs.sample_and_aggregate(6, t=2)
      >>> designs.robust_order_statistics(np.array([3, 1, 2]), family, cap=3).tolist()
      [3, 2, 1]
    """
    plan = aggregation_plan(family, cap, method=method, max_work=max_work) if plan is None else plan
    structure = chunk_structure(family)
    u = np.asarray(values)
    if u.shape != (structure.num_subsets,) or not np.issubdtype(u.dtype, np.integer):
        raise ValueError(f"values must be integer grid indices of shape ({structure.num_subsets},), got dtype "
                         f"{u.dtype} and shape {u.shape}.")
    if u.size and u.min() < 0:
        raise ValueError(f"values must be >= 0 (0 = min Y), got {int(u.min())}.")
    u = u.astype(np.int64)
    if plan.method == "sort":
        return _sorted_statistics(u, plan.cap)
    if plan.method == "subset_transform":
        return _transform_statistics(structure, u, plan.cap)
    return _branching_statistics(structure.incidence, u, plan.cap)


def _sorted_statistics(u: np.ndarray, cap: int) -> np.ndarray:
    ordered = np.sort(u)[::-1]
    out = np.zeros(cap, dtype=np.int64)
    out[:min(cap, ordered.size)] = ordered[:cap]
    return out


def _transform_statistics(structure: ChunkStructure, u: np.ndarray, cap: int) -> np.ndarray:
    n0 = structure.num_chunks
    bits = (structure.incidence.astype(np.int64) << np.arange(n0, dtype=np.int64)[None, :]).sum(1)
    per_level = np.asarray(_subset_max_levels(jnp.asarray(bits, jnp.int32), jnp.asarray(u, jnp.int32), n0))
    out = np.zeros(cap, dtype=np.int64)
    upto = min(cap, n0 + 1)
    out[:upto] = per_level[n0 - np.arange(upto)]
    return out


@functools.partial(jax.jit, static_argnums=2)
def _subset_max_levels(bits, values, n0):
    """min over |R| = level of w(R), w(R) = max{v_i : K_i ⊆ R} (subset-max transform, Steinke & Steinke 2025, Algorithm 4.1)."""
    w = jnp.zeros(1 << n0, jnp.int32).at[bits].max(values)
    for j in range(n0):
        w = w.reshape(-1, 2, 1 << j)
        w = jnp.stack([w[:, 0, :], jnp.maximum(w[:, 1, :], w[:, 0, :])], axis=1)
    w = w.reshape(-1)
    levels = jax.lax.population_count(jnp.arange(1 << n0, dtype=jnp.uint32)).astype(jnp.int32)
    return jax.ops.segment_min(w, levels, num_segments=n0 + 1)


def _branching_statistics(incidence: np.ndarray, u: np.ndarray, cap: int) -> np.ndarray:
    """Exact search tree (module docstring); memoised on the removed chunk set."""
    order = np.argsort(-u, kind="stable")
    sets = incidence[order]
    vals = u[order]
    hits = np.zeros(sets.shape[0], dtype=np.int64)
    best = [int(vals[0]) if vals.size else 0] * cap
    seen = set()
    columns = [sets[:, j].astype(np.int64) for j in range(sets.shape[1])]

    def visit(removed: int, depth: int) -> None:
        alive = np.flatnonzero(hits == 0)
        value = int(vals[alive[0]]) if alive.size else 0
        best[depth] = min(best[depth], value)
        if depth + 1 >= cap or value == 0:
            return
        for j in np.flatnonzero(sets[alive[0]]).tolist():
            child = removed | (1 << j)
            if child in seen:
                continue
            seen.add(child)
            np.add(hits, columns[j], out=hits)
            visit(child, depth + 1)
            np.subtract(hits, columns[j], out=hits)

    visit(0, 0)
    return np.minimum.accumulate(np.asarray(best, dtype=np.int64))


def hitting_counts(order_statistics: np.ndarray, num_outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """``l_C(y) = #{v < C : F(v) > y}`` and ``lbar_C(y) = #{v < C : F(v) >= y}`` for y = 0..N-1."""
    # NumPy in, NumPy out (host tests and experiments); JAX arrays stay on the device (release kernels).
    xp = jnp if isinstance(order_statistics, jax.Array) else np
    grid = xp.arange(num_outputs)[:, None]
    f = xp.asarray(order_statistics)[None, :]
    return (f > grid).sum(1), (f >= grid).sum(1)
