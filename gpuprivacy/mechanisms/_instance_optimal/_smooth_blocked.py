"""A blocked exact search of the pairs' matrix for the median's smooth sensitivity, the CPU's path past
``_LARGEST_GAPS_PAIRS`` (Nissim, Raskhodnikova & Smith 2007, §3.1; :mod:`._smooth_pairs`).

The divide and conquer (:func:`._smooth_searches._divide_and_conquer`) halves the rows' strides level by
level: each new row scans the columns between its two known neighbours' maximizers. This search cuts the
stride by ``b = 4`` or ``8`` per level instead: the ``b - 1`` new rows between two consecutive known rows
``a < c`` all scan the same columns, ``first(a)..last(c)`` (the near-tied spans of :mod:`._smooth_pairs`),
since by the monotonicity there every row between ``a`` and ``c`` has its maximum there. That is
``b - 1`` times the divide and conquer's products per column scanned, but in ``log_b`` rather than
``log_2`` levels, and the per-column work that costs on a CPU (which block owns the column, its value,
the segment reductions: gathers and scatters, about 30 ns each) is shared by the ``b - 1`` rows, whose
products are a contiguous ``[columns, b - 1]`` block. At n = 10^4 (5001 x 5001 pairs, beta = 1/6,
normal data; 2-core development VM, 2026-11-29, load 5-6) it took 2.5-2.9 ms a trial, run one trial at a
time, against the divide and conquer's 6.0 in chunks of 3 trials; with the stride cut by 4 at every level,
2.7 ms against 2.3 (both in chunks of 3). Quiet (2026-12-01), in chunks of 8 trials (:mod:`._smooth_kernel`),
0.96 ms a trial. It compiles in about 1.3x the divide and conquer's time (n = 10^4, a vmapped batch: 23-25 s
against 18 s at load 8).

The first level is rows 0 and ``rows - 1`` over every column (a static, dense block); the known rows
after level l are those at multiples of the stride ``s_l`` (plus the last row), the strides powers of two
(:func:`_strides`). A level's blocks scan at most ``columns - 1 + 2 blocks`` columns in all, as a level
of the divide and conquer: past that budget (many near ties) it falls back to the known rows' argmaxes,
``split(a)..split(c)``, at most ``columns - 1 + blocks``, and the result may then be a few ulps below
the maximum, as the divide and conquer's. Otherwise it is the definition's maximum bitwise, given the
weights. The last level needs only the rows' maxima, not their spans.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy.mechanisms._instance_optimal._smooth_pairs import _pair_matrix, _products, _row_summaries

# log2 of the stride's cut per level: 3 (8 rows a block) but the last level, 2 (4 rows a block), which
# scans the most columns (one block per 4 rows): its [columns, 3] block of products stays under 4 n values
# (tests/mechanisms/test_smooth_sensitivity_fast.py, test_no_quadratic_intermediate) where 7 would not.
_BLOCK_BITS = 3
_LAST_BLOCK_BITS = 2


def _strides(num_rows: int) -> list[int]:
    """The known rows' strides, level by level: from one at least ``num_rows - 1`` (rows 0 and
    ``num_rows - 1`` known) down to 1 (every row), cut by 2^_LAST_BLOCK_BITS at the last level and by at
    most 2^_BLOCK_BITS at the others (the first takes the remainder). ``[1]`` for up to 2 rows."""
    top = max(0, num_rows - 2).bit_length()  # 2^top >= num_rows - 1
    exponents = [0]
    while exponents[-1] < top:
        exponents.append(min(top, exponents[-1] + (_LAST_BLOCK_BITS if len(exponents) == 1 else _BLOCK_BITS)))
    return [1 << e for e in reversed(exponents)]


def _known(num_rows: int, stride: int) -> int:
    """How many rows are known at ``stride``: the multiples of it below ``num_rows - 1``, and that last row."""
    return -(-(num_rows - 1) // stride) + 1


def _dense_rows(padded, weights, rank, max_distance, rows):
    """Max, leftmost argmax and near-tied span (:mod:`._smooth_pairs`) of the static ``rows`` over every column."""
    _, _, num_cols = _pair_matrix(padded.shape[0] - 2, rank, max_distance)
    r = np.repeat(np.asarray(rows), num_cols)
    c = np.tile(np.arange(num_cols), len(rows))
    owner = np.repeat(np.arange(len(rows)), num_cols)
    vals = _products(padded, weights, rank, max_distance, jnp.asarray(r), jnp.asarray(c))
    row_max, *ends = _row_summaries(vals, jnp.asarray(owner), jnp.asarray(c), jnp.ones(r.shape, bool), len(rows))
    return (row_max, *(jnp.clip(e, 0, num_cols - 1) for e in ends))  # a NaN row has no argmax


def _level(padded, weights, rank, max_distance, known, stride, cut, spans):
    """One level: the rows at multiples of ``stride`` between the ``known`` ones (at ``stride * cut``).

    ``known = (split, first, last)``, ``[blocks + 1]`` each. Returns the level's maximum and, with
    ``spans``, the new rows' ``(split, first, last)``, ``[blocks, cut - 1]``.
    """
    first_row, num_rows, num_cols = _pair_matrix(padded.shape[0] - 2, rank, max_distance)
    split, first, last = known
    blocks = split.shape[0] - 1
    # The new rows of block q, q * stride * cut + t * stride for t = 1..cut-1; those past the last row read
    # it (real products, dropped from the tables after).
    rows = np.minimum(np.arange(blocks)[:, None] * stride * cut + np.arange(1, cut)[None, :] * stride,
                      num_rows - 1)
    size = num_cols - 1 + 2 * blocks
    lo = first[:-1]
    hi = jnp.maximum(last[1:], lo)  # equal but for rounding (spans are clipped to rows' columns)
    fits = jnp.sum(hi - lo + 1) <= size
    lo, hi = jnp.where(fits, lo, split[:-1]), jnp.where(fits, hi, split[1:])
    length = hi - lo + 1
    starts = jnp.cumsum(length) - length
    if blocks == 1:  # (XLA would constant-fold the cumsum below for seconds)
        owner = jnp.zeros(size, int)
    else:
        owner = jnp.cumsum(jnp.zeros(size, int).at[starts].add(1, mode="drop")) - 1
    offset = jnp.arange(size) - starts[owner]
    inside = offset < length[owner]
    col = jnp.minimum(lo[owner] + offset, num_cols - 1)
    # [size, cut - 1]: column p against each new row of its block, one contiguous row of products.
    vals = jnp.where(inside[:, None], _products(padded, weights, rank, max_distance, jnp.asarray(rows)[owner],
                                                col[:, None]), -jnp.inf)
    if not spans:
        return jnp.max(jax.ops.segment_max(vals, owner, blocks, indices_are_sorted=True)), None
    row_max, arg, row_first, row_last = _row_summaries(vals, owner, col[:, None], inside[:, None], blocks)
    lo, hi = lo[:, None], hi[:, None]
    arg = jnp.clip(arg, lo, hi)
    # Nondecreasing along the block, as the fallback's budget needs (equal to the argmaxes but for rounding).
    new_split = jax.lax.cummax(jnp.clip(arg, split[:-1, None], split[1:, None]), axis=1)
    new_first = jnp.clip(jnp.minimum(row_first, arg), lo, hi)
    new_last = jnp.clip(jnp.maximum(row_last, arg), lo, hi)
    return jnp.max(row_max), (new_split, new_first, new_last)


def _interleave(known, new, count):
    """The ``count`` known rows at the finer stride: each block's known row then its new ones, then the last row."""
    rows = jnp.concatenate([known[:-1, None], new], axis=1).reshape(-1)
    return jnp.concatenate([rows[:count - 1], known[-1:]])


def _blocked_search(padded, weights, rank, max_distance):
    """:func:`._smooth_searches._by_largest_gaps`'s maximum by the blocked search (module docstring):
    O(n log n) products in ``log_8`` levels, O(n) memory, static shapes.

    ``padded`` is the sorted data between the bounds (``float64[n + 2]``), ``weights[k] = exp(-k beta)``,
    ``k <= min(max_distance, n)``.
    """
    _, num_rows, _ = _pair_matrix(padded.shape[0] - 2, rank, max_distance)
    strides = _strides(num_rows)
    best, split, first, last = _dense_rows(padded, weights, rank, max_distance,
                                           [0, num_rows - 1] if num_rows > 1 else [0])
    best = jnp.max(best)
    for coarse, fine in zip(strides, strides[1:]):
        spans = fine > 1
        level_max, new = _level(padded, weights, rank, max_distance, (split, first, last), fine, coarse // fine,
                                spans)
        best = jnp.maximum(best, level_max)
        if spans:
            count = _known(num_rows, fine)
            split, first, last = (_interleave(k, v, count) for k, v in zip((split, first, last), new))
    return best
