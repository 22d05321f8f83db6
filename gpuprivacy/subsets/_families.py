"""Subset families: which subsets of the n rows an oracle is evaluated on.

A family describes ``num_subsets`` subsets of ``[n]`` in one of two forms the
batched evaluator consumes chunk by chunk:

* **kept form**: the kept row indices ``int32[k, capacity]`` with a validity
  mask (``partition``, ``random_subsets`` of small size, explicit index
  families, keep masks);
* **removed form**: the removed row indices ``int32[k, width]`` padded with
  the sentinel ``n`` (``removals``, generated lazily on the device by colex
  unranking, and explicit families whose subsets keep more than half the
  rows, where the complement is smaller).

Families are data-independent and can be published. A keep mask means KEEP
(STYLE rule 13).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_int, check_key
from gpuprivacy.subsets import _combinatorics as comb


@dataclasses.dataclass(frozen=True, eq=False)
class SubsetFamily:
    """A family of ``num_subsets`` subsets of ``[n]``, each of at most ``capacity`` rows.

    Do not construct directly; use :func:`removals`, :func:`partition`,
    :func:`random_subsets`, :func:`from_indices` or :func:`from_keep_masks`.
    Later constructions (covering designs) plug in through the same two forms.

    Attributes:
      n: number of rows of the dataset the family refers to.
      num_subsets: k, the number of subsets (a Python int, possibly huge).
      capacity: public block size handed to the oracle (the largest subset).
      kind: "removals", "kept" or "removed".
    """

    n: int
    num_subsets: int
    capacity: int
    kind: str
    depth: int = 0
    # Materialised forms (host NumPy), one of them set for kind "kept"/"removed".
    kept: np.ndarray | None = dataclasses.field(default=None, repr=False)
    kept_valid: np.ndarray | None = dataclasses.field(default=None, repr=False)
    removed: np.ndarray | None = dataclasses.field(default=None, repr=False)
    name: str = ""

    def __len__(self) -> int:
        return self.num_subsets

    @property
    def removed_width(self) -> int:
        if self.kind == "removals":
            return max(self.depth, 1)
        if self.kind == "removed":
            return self.removed.shape[1]
        raise AttributeError("only removal-form families have a removed width")

    def subset(self, index: int) -> np.ndarray:
        """The kept row indices (ascending, original order) of subset ``index``."""
        index = check_int("index", index, minimum=0, maximum=self.num_subsets - 1)
        if self.kind == "removals":
            removed = comb.removal_set(self.n, index)
        elif self.kind == "removed":
            removed = [int(r) for r in self.removed[index] if r < self.n]
        else:
            return np.sort(self.kept[index][self.kept_valid[index]]).astype(np.int64)
        return np.setdiff1d(np.arange(self.n), np.asarray(removed, dtype=np.int64))

    def keep_masks(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Dense ``bool[stop - start, n]`` keep masks (for tests and small families)."""
        stop = self.num_subsets if stop is None else stop
        out = np.zeros((stop - start, self.n), dtype=bool)
        for row, index in enumerate(range(start, stop)):
            out[row, self.subset(index)] = True
        return out


# Above this many removed rows per subset the kept form is used (host sort + gather).
_REMOVED_FORM_MAX_WIDTH = 1 << 12


def removals(n: int, depth: int, *, max_queries: int | None = None) -> SubsetFamily:
    """Every subset of ``[n]`` obtained by removing at most ``depth`` rows.

    Subsets are ordered by level (the full set first, then every single
    removal, ...) and within a level in colex order of the removed set. They
    are generated lazily on the device, chunk by chunk, by combinatorial
    unranking, so 10^9 subsets never exist in memory at once.

    Args:
      n: number of rows (>= 1).
      depth: largest number of removed rows (0 <= depth <= n).
      max_queries: optional refusal limit on the family size.

    Returns:
      A family of ``count_removals(n, depth)`` subsets with capacity n.

    Raises:
      ValueError: on depth > n, or when the family exceeds ``max_queries``.
    """
    n = check_int("n", n, minimum=1)
    depth = check_int("depth", depth, minimum=0)
    count = comb.count_removals(n, depth)
    _check_max_queries(count, max_queries, f"removals(n={n}, depth={depth})")
    if count >= comb._INT64_SAFE:
        raise ValueError(f"removals(n={n}, depth={depth}) has {count} subsets, more than 2**62 can index.")
    return SubsetFamily(n=n, num_subsets=count, capacity=n, kind="removals", depth=depth,
                        name=f"removals(n={n}, depth={depth})")


def partition(n: int, parts: int) -> SubsetFamily:
    """Disjoint contiguous blocks for sample-and-aggregate (Nissim et al. 2007).

    Rows ``0..n-1`` are split into ``parts`` blocks whose sizes differ by at
    most one (the first ``n mod parts`` blocks get the extra row). Shuffle
    the data first if its order is not exchangeable.
    """
    n = check_int("n", n, minimum=1)
    parts = check_int("parts", parts, minimum=1)
    if parts > n:
        raise ValueError(f"parts must be <= n = {n}, got parts={parts}; a block cannot be empty.")
    sizes = np.full(parts, n // parts, dtype=np.int64)
    sizes[: n % parts] += 1
    capacity = int(sizes.max())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    kept = starts[:, None] + np.arange(capacity)[None, :]
    valid = np.arange(capacity)[None, :] < sizes[:, None]
    kept = np.where(valid, kept, 0).astype(np.int32)
    return SubsetFamily(n=n, num_subsets=parts, capacity=capacity, kind="kept", kept=kept, kept_valid=valid,
                        name=f"partition(n={n}, parts={parts})")


def random_subsets(key, n: int, size: int, num_subsets: int) -> SubsetFamily:
    """``num_subsets`` independent uniformly random subsets of ``size`` rows each.

    Subset ``i`` depends only on ``fold_in(key, i)``, so the family does not
    depend on how it is generated in chunks. The subsets are drawn on the
    device and stored in their smaller form (kept rows, or the removed
    complement when ``size > n / 2``): never as dense ``[k, n]`` masks.
    """
    key = check_key(key)
    n = check_int("n", n, minimum=1)
    size = check_int("size", size, minimum=1, maximum=n)
    num_subsets = check_int("num_subsets", num_subsets, minimum=1)
    name = f"random_subsets(n={n}, size={size}, k={num_subsets})"
    width = n - size
    if width <= _REMOVED_FORM_MAX_WIDTH and width < size:
        removed = np.asarray(_random_subsets_kernel(key, n, size, num_subsets, True))
        if width == 0:
            removed = np.full((num_subsets, 1), n, dtype=np.int32)
        return SubsetFamily(n=n, num_subsets=num_subsets, capacity=size, kind="removed", removed=removed, name=name)
    kept = np.asarray(_random_subsets_kernel(key, n, size, num_subsets, False))
    return SubsetFamily(n=n, num_subsets=num_subsets, capacity=size, kind="kept", kept=kept,
                        kept_valid=np.ones(kept.shape, dtype=bool), name=name)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _random_subsets_kernel(key, n, size, num_subsets, complement):
    def one(i):
        # The `size` smallest of n iid uniforms form a uniform random subset.
        u = jax.random.uniform(jax.random.fold_in(key, i), (n,))
        kept = jax.lax.top_k(-u, size)[1].astype(jnp.int32)
        if not complement:
            return kept
        # The exact complement (ascending), from the kept set itself, so ties cannot make the two disagree.
        removed_mask = jnp.ones(n, bool).at[kept].set(False)
        return jnp.nonzero(removed_mask, size=max(n - size, 1), fill_value=n)[0].astype(jnp.int32)
    return jax.lax.map(one, jnp.arange(num_subsets), batch_size=min(num_subsets, 4096))


def from_indices(n: int, indices, valid=None, *, name: str = "") -> SubsetFamily:
    """A family from kept row indices ``int[k, s]`` (any order) and an optional validity mask."""
    n = check_int("n", n, minimum=1)
    idx = np.asarray(indices)
    if idx.ndim != 2 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"indices must be an integer array [k, s], got dtype {idx.dtype} and shape {idx.shape}.")
    if idx.shape[0] < 1 or idx.shape[1] < 1:
        raise ValueError(f"indices must have k >= 1 subsets of s >= 1 slots, got shape {idx.shape}.")
    valid = np.ones(idx.shape, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
    if valid.shape != idx.shape:
        raise ValueError(f"valid must have the shape of indices {idx.shape}, got {valid.shape}.")
    used = idx[valid]
    if used.size and (used.min() < 0 or used.max() >= n):
        raise ValueError(f"indices must lie in [0, n) = [0, {n}), got values in [{used.min()}, {used.max()}].")
    masks = np.zeros((idx.shape[0], n), dtype=bool)
    rows = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
    masks[rows[valid], idx[valid]] = True
    if (masks.sum(1) != valid.sum(1)).any():
        bad = int(np.flatnonzero(masks.sum(1) != valid.sum(1))[0])
        raise ValueError(f"subset {bad} lists a row more than once: {idx[bad][valid[bad]].tolist()}. "
                         "A subset is a set; remove the duplicates.")
    return from_keep_masks(masks, name=name)


def from_keep_masks(keep, *, name: str = "") -> SubsetFamily:
    """A family from dense keep masks ``bool[k, n]`` (True = keep)."""
    keep = np.asarray(keep)
    if keep.dtype != np.bool_ or keep.ndim != 2:
        raise ValueError(f"keep must be a boolean array [k, n], got dtype {keep.dtype} and shape {keep.shape}.")
    k, n = keep.shape
    if k < 1 or n < 1:
        raise ValueError(f"keep must have k >= 1 subsets of n >= 1 rows, got shape {keep.shape}.")
    sizes = keep.sum(1)
    capacity = int(sizes.max())
    if capacity == 0:
        raise ValueError("every subset in keep is empty; an oracle needs at least one row somewhere.")
    removed_sizes = n - sizes
    width = int(removed_sizes.max())
    name = name or f"keep_masks(k={k}, n={n})"
    if width <= _REMOVED_FORM_MAX_WIDTH and width < capacity:
        # Few rows removed: ship removed sets (sentinel n pads); the evaluator
        # turns them into slot positions with a handful of comparisons.
        order = np.argsort(keep, axis=1, kind="stable")[:, :max(width, 1)]
        removed = np.where(np.arange(max(width, 1))[None, :] < removed_sizes[:, None], order, n).astype(np.int32)
        return SubsetFamily(n=n, num_subsets=k, capacity=capacity, kind="removed", removed=removed, name=name)
    order = np.argsort(~keep, axis=1, kind="stable")[:, :capacity]
    valid = np.arange(capacity)[None, :] < sizes[:, None]
    kept = np.where(valid, order, 0).astype(np.int32)
    return SubsetFamily(n=n, num_subsets=k, capacity=capacity, kind="kept", kept=kept, kept_valid=valid, name=name)


def _check_max_queries(count: int, max_queries: int | None, what: str) -> None:
    if max_queries is None:
        return
    max_queries = check_int("max_queries", max_queries, minimum=1)
    if count > max_queries:
        raise ValueError(f"{what} has {count} subsets, more than max_queries={max_queries}. Lower the depth or "
                         f"the number of subsets, or raise max_queries (the count is exact: {count} = "
                         f"{count:.3e}).")


def check_family_size(family: SubsetFamily, max_queries: int | None) -> None:
    """Refuses a family larger than ``max_queries`` (a public limit)."""
    _check_max_queries(family.num_subsets, max_queries, family.name or "the family")
