"""The chunk-level structure of a subset family: the canonical, data-independent reduction.

Two rows that lie in exactly the same kept sets are interchangeable for every
hitting-set question of Steinke & Steinke 2025, Algorithm 4.1 (removing either hits the same
evaluations), and a row kept by no evaluation can never matter. So the
family ``{K_1..K_k}`` over ``n`` rows is reduced to an incidence matrix
``bool[k, n0]`` over ``n0`` *chunks* (classes of identical columns). This is
the blow-up (3.30) read backwards; it depends only on the public design.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np

from gpuprivacy.subsets import SubsetFamily

# Largest k * n for which dense keep masks are built (bytes of a bool matrix).
MAX_DENSE_CELLS = 1 << 31


class ChunkStructure(NamedTuple):
    """Chunk-level incidence of a family (public, data-independent).

    Attributes:
      incidence: ``bool[k, n0]``; ``incidence[i, j]`` iff kept set i contains chunk j.
      chunk_sizes: ``int[n0]`` rows per chunk.
      unkept_rows: rows kept by no evaluation (never matter).
      disjoint: whether the kept sets are pairwise disjoint (sample-and-aggregate).
    """

    incidence: np.ndarray
    chunk_sizes: np.ndarray
    unkept_rows: int
    disjoint: bool

    @property
    def num_chunks(self) -> int:
        return int(self.incidence.shape[1])

    @property
    def num_subsets(self) -> int:
        return int(self.incidence.shape[0])

    @property
    def max_set_chunks(self) -> int:
        return int(self.incidence.sum(1).max())


_CACHE: weakref.WeakKeyDictionary[SubsetFamily, ChunkStructure] = weakref.WeakKeyDictionary()


def keep_matrix(family: SubsetFamily) -> np.ndarray:
    """Dense ``bool[k, n]`` keep masks of a family, vectorised (True = keep)."""
    if not isinstance(family, SubsetFamily):
        raise TypeError(f"family must be a gpuprivacy.subsets.SubsetFamily, got {type(family).__name__}.")
    k, n = family.num_subsets, family.n
    if k * n > MAX_DENSE_CELLS:
        raise ValueError(f"the family has k * n = {k} * {n} cells, more than {MAX_DENSE_CELLS}; covering "
                         "designs are handled through dense keep masks. Use fewer subsets or rows.")
    if family.kind == "kept":
        masks = np.zeros((k, n), dtype=bool)
        rows = np.broadcast_to(np.arange(k)[:, None], family.kept.shape)
        masks[rows[family.kept_valid], family.kept[family.kept_valid]] = True
        return masks
    if family.kind == "removed":
        masks = np.ones((k, n + 1), dtype=bool)
        rows = np.broadcast_to(np.arange(k)[:, None], family.removed.shape)
        masks[rows, family.removed] = False
        return masks[:, :n]
    return family.keep_masks()


def chunk_structure(family: SubsetFamily) -> ChunkStructure:
    """The chunk-level reduction of ``family`` (cached per family object)."""
    cached = _CACHE.get(family)
    if cached is not None:
        return cached
    masks = keep_matrix(family)
    sizes = masks.sum(1)
    if (sizes == 0).any():
        bad = int(np.flatnonzero(sizes == 0)[0])
        raise ValueError(f"kept set {bad} of the family is empty (m = n); the oracle would see no data and no "
                         "hitting set could remove it. Use m < n.")
    kept_somewhere = masks.any(0)
    columns = np.packbits(masks[:, kept_somewhere].T, axis=1)
    _, inverse, counts = np.unique(columns, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    num_chunks = counts.shape[0]
    # First column of each class gives the class's incidence.
    first = np.full(num_chunks, -1, dtype=np.int64)
    first[inverse[::-1]] = np.arange(inverse.shape[0])[::-1]
    incidence = masks[:, kept_somewhere][:, first]
    disjoint = bool((incidence.sum(0) == 1).all())
    structure = ChunkStructure(incidence=np.ascontiguousarray(incidence), chunk_sizes=counts.astype(np.int64),
                               unkept_rows=int((~kept_somewhere).sum()), disjoint=disjoint)
    _CACHE[family] = structure
    return structure


def chunk_bitmasks(incidence: np.ndarray) -> list[int]:
    """Kept sets as Python-int bitmasks over chunks."""
    weights = [1 << j for j in range(incidence.shape[1])]
    return [sum(w for w, b in zip(weights, row) if b) for row in incidence.tolist()]


def log2_comb(n: int, k: int) -> float:
    return math.log2(math.comb(n, k)) if 0 <= k <= n else float("-inf")
