"""Covering designs as families of KEEP masks (Steinke & Steinke 2025, Sec. 3.4).

An (n, m, t)-covering design (Def 3.6) is a list of *removed* sets ``S_i``
of size m such that every t-set lies in some ``S_i``. The oracle runs on the
complement ``K_i = [n] \\ S_i``, so every construction
here returns a :class:`gpuprivacy.subsets.SubsetFamily` of kept sets, and the
covering property reads: every (n - t)-set contains some kept set
(the Turan form), i.e. the kept sets have transversal number >= t + 1.

Constructions are built on ``n0`` chunk-vertices and blown up (3.30): chunk j
is the rows ``perm[j s : (j + 1) s]`` with ``s = n // n0`` and a public,
data-independent permutation (identity by default); the ``n mod n0``
leftover rows are never kept, which keeps every kept set the same size
(static shapes) and does not change the covering (our construction for Steinke & Steinke 2025, Sec. 3.4).
"""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np

from gpuprivacy._checks import check_int, check_key
from gpuprivacy._sort import argsort
from gpuprivacy.designs._aggregate import (
    DEFAULT_MAX_WORK,
    aggregation_plan,
    robust_order_statistics,
)
from gpuprivacy.designs._structure import chunk_structure
from gpuprivacy.subsets import SubsetFamily, from_indices, from_keep_masks

DEFAULT_MAX_SUBSETS = 10**6
# Largest number of chunk t-subsets enumerated for patching / verification.
MAX_ENUMERATED = 10**7


def _check_max_subsets(count: int, max_subsets: int, what: str) -> None:
    max_subsets = check_int("max_subsets", max_subsets, minimum=1)
    if count > max_subsets:
        raise ValueError(f"{what} has k = {count} subsets, more than max_subsets = {max_subsets}. Use a smaller t "
                         "or c, or raise max_subsets.")


def blow_up(n: int, chunk_keep, *, key=None, name: str = "") -> SubsetFamily:
    """The blow-up (3.30): a chunk-level design ``bool[k, n0]`` applied to n rows.

    Args:
      n: rows (>= n0).
      chunk_keep: ``bool[k, n0]``, True = the chunk is kept.
      key: optional PRNG key for a public, data-independent row permutation
        (identity when None).
      name: family name.
    """
    n = check_int("n", n, minimum=1)
    chunk_keep = np.asarray(chunk_keep, dtype=bool)
    if chunk_keep.ndim != 2:
        raise ValueError(f"chunk_keep must be bool [k, n0], got shape {chunk_keep.shape}.")
    k, n0 = chunk_keep.shape
    if n0 > n:
        raise ValueError(f"n = {n} rows cannot form n0 = {n0} non-empty chunks; use n >= n0.")
    size = n // n0
    perm = np.arange(n) if key is None else np.asarray(jax.random.permutation(check_key(key), n))
    chunks = perm[: n0 * size].reshape(n0, size)
    counts = chunk_keep.sum(1)
    if (counts == 0).any():
        raise ValueError("every kept set needs at least one chunk (m < n).")
    width = int(counts.max()) * size
    kept = np.zeros((k, width), dtype=np.int64)
    valid = np.zeros((k, width), dtype=bool)
    for i in range(k):
        rows = chunks[chunk_keep[i]].reshape(-1)
        kept[i, : rows.size] = rows
        valid[i, : rows.size] = True
    return from_indices(n, kept, valid, name=name or f"blow_up(n={n}, n0={n0}, k={k})")


def block_chunk_masks(t: int, c: int) -> np.ndarray:
    """``bool[binom(t+c, c), t+c]``: every c-subset of t + c blocks, lexicographic (Steinke & Steinke 2025, Sec. 3.4)."""
    b = t + c
    combos = list(itertools.combinations(range(b), c))
    masks = np.zeros((len(combos), b), dtype=bool)
    for i, combo in enumerate(combos):
        masks[i, list(combo)] = True
    return masks


def block_design(n: int, t: int, c: int = 1, *, key=None, max_subsets: int = DEFAULT_MAX_SUBSETS) -> SubsetFamily:
    """The block design of Table 6.1 rows 1-3: keep every union of c of the t + c blocks.

    .. math:: k = \\binom{t+c}{c}, \\qquad n - m = c \\lfloor n/(t+c) \\rfloor,

    an (n, m, t)-covering: a t-set touches at most t blocks, so c blocks
    survive (transversal number t + 1). c = 1 is sample-and-aggregate.

    Examples:
      >>> from gpuprivacy import designs
      >>> family = designs.block_design(12, t=2, c=2)
      >>> family.num_subsets, family.capacity
      (6, 6)
    """
    n = check_int("n", n, minimum=1)
    t = check_int("t", t, minimum=0)
    c = check_int("c", c, minimum=1)
    if n < t + c:
        raise ValueError(f"n = {n} rows cannot form t + c = {t + c} non-empty blocks; lower t or c.")
    _check_max_subsets(math.comb(t + c, c), max_subsets, f"block_design(t={t}, c={c})")
    return blow_up(n, block_chunk_masks(t, c), key=key, name=f"block_design(n={n}, t={t}, c={c})")


def sample_and_aggregate(n: int, t: int, *, key=None) -> SubsetFamily:
    """t + 1 disjoint blocks (3.31), [NRS07]: the (n, t n/(t+1), t)-covering with k = t + 1."""
    return block_design(n, t, 1, key=key)


def all_subsets_design(n: int, t: int, *, max_subsets: int = DEFAULT_MAX_SUBSETS) -> SubsetFamily:
    """Every (n - t)-subset kept (3.29), [FDY22, LRSS25]: m = t, k = binom(n, t)."""
    n = check_int("n", n, minimum=1)
    t = check_int("t", t, minimum=0)
    if t >= n:
        raise ValueError(f"t must be < n = {n}, got t={t}; removing n rows leaves nothing to evaluate.")
    _check_max_subsets(math.comb(n, t), max_subsets, f"all_subsets_design(n={n}, t={t})")
    masks = np.ones((math.comb(n, t), n), dtype=bool)
    for i, removed in enumerate(itertools.combinations(range(n), t)):
        masks[i, list(removed)] = False
    return from_keep_masks(masks, name=f"all_subsets_design(n={n}, t={t})")


def _bits(masks: np.ndarray) -> np.ndarray:
    if masks.shape[1] > 63:
        raise ValueError(f"t-subset enumeration supports up to 63 chunks, got {masks.shape[1]}.")
    return (masks.astype(np.uint64) << np.arange(masks.shape[1], dtype=np.uint64)[None, :]).sum(1, dtype=np.uint64)


def _t_subset_bits(n0: int, t: int):
    combos = itertools.combinations(range(n0), t)
    while batch := list(itertools.islice(combos, 4096)):
        yield np.array([sum(1 << j for j in combo) for combo in batch], dtype=np.uint64)


def uncovered_t_subsets(chunk_keep, t: int, *, limit: int | None = None) -> list[tuple[int, ...]]:
    """Chunk t-sets T hit by every kept set (no removed set contains T), by exact enumeration."""
    chunk_keep = np.asarray(chunk_keep, dtype=bool)
    n0 = chunk_keep.shape[1]
    if math.comb(n0, t) > MAX_ENUMERATED:
        raise ValueError(f"binom({n0}, {t}) = {math.comb(n0, t)} t-subsets exceed {MAX_ENUMERATED}; "
                         "enumeration is infeasible.")
    kept_bits = _bits(chunk_keep)
    out = []
    for batch in _t_subset_bits(n0, t):
        covered = ((batch[:, None] & kept_bits[None, :]) == 0).any(1)
        for value in batch[~covered].tolist():
            out.append(tuple(j for j in range(n0) if value >> j & 1))
            if limit is not None and len(out) >= limit:
                return out
    return out


def random_chunk_masks(key, num_chunks: int, kept_chunks: int, num_subsets: int) -> np.ndarray:
    """``num_subsets`` i.i.d. uniform kept chunk sets of size ``kept_chunks`` (Steinke & Steinke 2025, Sec. 3.4)."""
    key = check_key(key)
    # Set i depends only on fold_in(key, i): the chunks with the smallest uniforms.
    ranks = np.asarray(jax.vmap(lambda i: argsort(argsort(
        jax.random.uniform(jax.random.fold_in(key, i), (num_chunks,)))))(jax.numpy.arange(num_subsets)))
    return ranks < kept_chunks


def random_design(key, n: int, *, num_chunks: int, removed_chunks: int, t: int, num_random: int | None = None,
                  max_subsets: int = DEFAULT_MAX_SUBSETS) -> SubsetFamily:
    """A random chunk-level design patched to a verified cover (Prop. 3.7's proof, (3.13)-(3.16)).

    ``k1 = ceil(r ln binom(m0, t))`` random kept sets of ``n0 - m0`` chunks
    (``r = binom(n0,t)/binom(m0,t)``), then, for every chunk t-set that no
    removed set contains, one more kept set avoiding it. The result covers t
    by construction (every t-set was enumerated), so its size is at most
    (3.16). The randomness is a public key, independent of the data.
    """
    key = check_key(key)
    n = check_int("n", n, minimum=1)
    n0 = check_int("num_chunks", num_chunks, minimum=1, maximum=n)
    m0 = check_int("removed_chunks", removed_chunks, minimum=0, maximum=n0 - 1)
    t = check_int("t", t, minimum=0, maximum=m0)
    if num_random is None:
        r = math.comb(n0, t) / math.comb(m0, t)
        num_random = max(1, math.ceil(r * math.log(max(math.comb(m0, t), 1))))
    num_random = check_int("num_random", num_random, minimum=1)
    _check_max_subsets(num_random, max_subsets, "random_design")
    random_key, patch_key = jax.random.split(key)
    masks = random_chunk_masks(random_key, n0, n0 - m0, num_random)
    patches = []
    order = np.asarray(jax.random.permutation(patch_key, n0))
    for missing in uncovered_t_subsets(masks, t):
        # Keep n0 - m0 chunks outside T (public order), so the removed set contains T.
        outside = [j for j in order.tolist() if j not in missing][: n0 - m0]
        row = np.zeros(n0, dtype=bool)
        row[outside] = True
        patches.append(row)
    if patches:
        masks = np.concatenate([masks, np.stack(patches)])
    _check_max_subsets(masks.shape[0], max_subsets, "random_design after patching")
    return blow_up(n, masks, name=f"random_design(n={n}, n0={n0}, m0={m0}, t={t}, k={masks.shape[0]})")


def greedy_design(n: int, *, num_chunks: int, removed_chunks: int, t: int) -> SubsetFamily:
    """Greedy set cover of the chunk t-sets by removed m0-sets (Lovasz/Stein; Steinke & Steinke 2025, Sec. 3.4).

    Only for small n0 (all ``binom(n0, m0)`` candidates are scored). Ties go
    to the first candidate in lexicographic order.
    """
    n = check_int("n", n, minimum=1)
    n0 = check_int("num_chunks", num_chunks, minimum=1, maximum=min(n, 63))
    m0 = check_int("removed_chunks", removed_chunks, minimum=0, maximum=n0 - 1)
    t = check_int("t", t, minimum=0, maximum=m0)
    if math.comb(n0, m0) * math.comb(n0, t) > 10**8:
        raise ValueError(f"greedy_design scores binom({n0},{m0}) x binom({n0},{t}) pairs, too many; use "
                         "block_design or random_design.")
    candidates = np.concatenate(list(_t_subset_bits(n0, m0)))
    targets = np.concatenate(list(_t_subset_bits(n0, t)))
    contains = (candidates[:, None] & targets[None, :]) == targets[None, :]
    uncovered = np.ones(targets.shape[0], dtype=bool)
    chosen = []
    while uncovered.any():
        gains = contains[:, uncovered].sum(1)
        best = int(np.argmax(gains))
        chosen.append(int(candidates[best]))
        uncovered &= ~contains[best]
    removed = np.array([[bool(bits >> j & 1) for j in range(n0)] for bits in chosen])
    return blow_up(n, ~removed, name=f"greedy_design(n={n}, n0={n0}, m0={m0}, t={t}, k={len(chosen)})")


def covering_strength(family: SubsetFamily, *, max_t: int | None = None, max_work: int = DEFAULT_MAX_WORK) -> int:
    """The largest t the family covers: (transversal number of the kept sets) - 1, computed exactly.

    Steinke & Steinke 2025, Sec. 3.4: an (n, m, t)-covering iff no t rows hit every kept
    set. With all values 1, F(v) = 1 iff no v rows hit every kept set, so the
    strength is ``#{v : F(v) = 1} - 1``. Searches up to ``max_t`` (default:
    the largest removed set); returns ``max_t`` if the family covers that much.

    Raises:
      ValueError: when the exact check exceeds ``max_work`` (co-NP-hard in general).
    """
    structure = chunk_structure(family)
    smallest_kept = int((structure.incidence * structure.chunk_sizes[None, :]).sum(1).min())
    max_t = family.n - smallest_kept if max_t is None else check_int("max_t", max_t, minimum=0)
    ones = np.ones(structure.num_subsets, dtype=np.int64)
    plan = aggregation_plan(family, max_t + 1, max_work=max_work)
    f = robust_order_statistics(ones, family, cap=max_t + 1, plan=plan)
    return int((f == 1).sum()) - 1


def verify_covering(family: SubsetFamily, t: int, *, max_work: int = DEFAULT_MAX_WORK) -> bool:
    """Exact check that ``family`` (kept sets) is an (n, m, t)-covering: no t rows hit every kept set.

    Uses the cheapest exact method: the hitting-set machinery of
    :func:`robust_order_statistics` with all values 1, or enumeration of the
    chunk t-sets (an operational test for the definition in Steinke & Steinke 2025, Sec. 3.4).

    Examples:
      >>> from gpuprivacy import designs
      >>> family = designs.block_design(30, t=3, c=2)
      >>> designs.verify_covering(family, 3), designs.verify_covering(family, 4)
      (True, False)
    """
    t = check_int("t", t, minimum=0)
    structure = chunk_structure(family)
    if t == 0:
        return True
    if t > structure.num_chunks:
        # Removing every chunk (n0 <= t rows) hits every kept set.
        return False
    enumeration_work = math.comb(structure.num_chunks, t) * structure.num_subsets
    try:
        plan = aggregation_plan(family, t + 1, max_work=max_work)
    except ValueError:
        plan = None
    if plan is not None and (plan.work_bound <= enumeration_work or structure.num_chunks > 63):
        f = robust_order_statistics(np.ones(structure.num_subsets, dtype=np.int64), family, cap=t + 1, plan=plan)
        return bool(f[t] == 1)
    if enumeration_work > max_work or structure.num_chunks > 63:
        raise ValueError(f"exact covering verification needs ~{enumeration_work:.3e} operations, more than "
                         f"max_work = {max_work:.3e} (co-NP-hard in general; Steinke & Steinke 2025, Sec. 3.4). Use a structured design.")
    return not uncovered_t_subsets(structure.incidence, t, limit=1)


def check_covering(family: SubsetFamily, t: int, *, max_work: int = DEFAULT_MAX_WORK) -> None:
    """Raises ValueError unless ``family`` is an exact (n, m, t)-covering."""
    if not verify_covering(family, t, max_work=max_work):
        raise ValueError(f"the design {family.name or ''!s} is not a t = {t} covering: some {t} rows hit every "
                         "kept set, so the accuracy guarantee (4.3) fails. Use a design built for this t "
                         "(designs.plan_design) or lower t.")
