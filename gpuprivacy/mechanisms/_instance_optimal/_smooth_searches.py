"""Two exact searches of the pairs' matrix (:mod:`._smooth_pairs`) for the median's smooth sensitivity
(Nissim, Raskhodnikova & Smith 2007, §3.1).

* :func:`_divide_and_conquer` (accelerators): a divide and conquer over the rows (NRS07 §3.1; the
  monotone-matrix search of Aggarwal, Klawe, Moran, Shor & Wilber 1987) finds every row's maximum:
  the middle row over all columns, the rows above it only left of its maximizer, the rows below only
  right of it, ceil(log2(rows)) levels of O(n) products each, with static shapes.
* :func:`_by_largest_gaps` (CPU, up to ``_LARGEST_GAPS_PAIRS`` pairs, :mod:`._smooth_kernel`) takes
  the definition's own route, quadratic but cheap there: the largest gap at each distance,
  :math:`A^{(k)}` for every k, from one pass over every pair (data only, no weight), then
  :math:`\\max_k e^{-k\\beta} A^{(k)}`, O(K) per beta. The pass needs no gather: row i's gaps to the
  columns ``j = m..`` are one static slice of the data minus :math:`x_{(i)}`, and land on the
  distances ``k = m - i - 1 + c``, a contiguous run, so each step of the loop takes the elementwise
  max of a few rows' shifted slices into a running table of :math:`A^{(k)}`. It is 2-3x the divide
  and conquer's speed for one beta (0.2 ns a pair on the development VM, where the divide and
  conquer's gathers and segment reductions cost about 30 ns for each of its ~7n products), and the
  gaps do not depend on beta: a grid of epsilons under ``vmap`` computes them once per dataset (7-12x
  at n = 500-2000 for 4 epsilons).

Every path takes the max of the same products: :math:`e^{-k\\beta} \\max_t g_t = \\max_t
e^{-k\\beta} g_t` holds in float64 too, rounding being monotone. Near ties: :mod:`._smooth_pairs`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from gpuprivacy.mechanisms._instance_optimal._smooth_pairs import _pair_matrix, _products, _row_summaries

# Rows of the pairs' matrix folded into the table of largest gaps per step of its loop: each step reads and
# writes the table once for this many rows (1: 2.4x slower at n = 2000; 4: 9% slower; 16: 17% slower).
_ROWS_PER_STEP = 8

def _largest_gaps(padded, rank, max_distance):
    """:math:`A^{(k)}`, ``k = 0..min(max_distance, n)``: the largest ``padded[j] - padded[i]`` over the pairs
    ``i <= rank <= j`` with ``j - i - 1 = k``, from one pass over every pair (module docstrings).

    ``padded`` is the sorted data between the bounds (``float64[n + 2]``). O(rows x columns) work, O(n) memory.
    Row ``i``'s gaps to the columns ``j = rank + c`` are at the distances ``k = rank - i - 1 + c``, a contiguous
    run: the table holds the running max for ``k`` at index ``k + R`` (``R = _ROWS_PER_STEP``), and a step adds
    ``R`` rows, each one static slice of the columns shifted within the step's window of the table. Padding rows read ``+inf`` (gaps of ``-inf``); the pair
    ``i = j = rank`` (k = -1) and distances past ``max_distance`` fall outside the table's part returned.
    """
    rows_per_step = _ROWS_PER_STEP
    n = padded.shape[0] - 2
    first_row, num_rows, num_cols = _pair_matrix(n, rank, max_distance)
    steps = -(-num_rows // rows_per_step)
    low = jnp.concatenate([padded[first_row:rank + 1], jnp.full(steps * rows_per_step - num_rows, jnp.inf)])
    high = padded[rank:rank + num_cols]
    edge = jnp.full(rows_per_step - 1, -jnp.inf)
    shifted = jnp.concatenate([edge, high, edge])  # row q of a step: its slice starting at q
    window = num_cols + rows_per_step - 1

    def step(s, table):
        first = s * rows_per_step
        # The step's rows first + q sit at k + R = rank - first_row - first - q + c + R - 1: a window starting
        # at rank - first_row - first, row q at offset R - 1 - q.
        at = rank - first_row - first
        lows = jax.lax.dynamic_slice_in_dim(low, first, rows_per_step)
        gaps = jax.lax.dynamic_slice_in_dim(table, at, window)
        for q in range(rows_per_step):
            gaps = jnp.maximum(gaps, shifted[q:q + window] - lows[q])
        return jax.lax.dynamic_update_slice_in_dim(table, gaps, at, 0)

    size = steps * rows_per_step + num_cols + rows_per_step
    table = jax.lax.fori_loop(0, steps, step, jnp.full(size, -jnp.inf))
    return table[rows_per_step:rows_per_step + min(max_distance, n) + 1]


def _by_largest_gaps(padded, weights, rank, max_distance):
    """``max weights[j - i - 1] * (padded[j] - padded[i])`` over ``i <= rank <= j``, ``1 <= j - i <= max_distance + 1``,
    as ``max_k weights[k] * A^(k)`` (:func:`_largest_gaps`): the same maximum bitwise, rounding being monotone.

    ``weights[k] = exp(-k beta)``, ``k <= min(max_distance, n)``.
    """
    return jnp.max(weights * _largest_gaps(padded, rank, max_distance))


def _divide_and_conquer(padded, weights, rank, max_distance):
    """:func:`_by_largest_gaps`'s maximum by a divide and conquer over the rows ``i`` of the matrix of products (module
    docstring): ``ceil(log2(rows))`` levels of at most ``columns + rows`` products each, O(n log n) work and
    O(n) memory with static shapes. Each row's maximum is taken over columns that hold its maximizer.
    """
    _, num_rows, num_cols = _pair_matrix(padded.shape[0] - 2, rank, max_distance)
    values = functools.partial(_products, padded, weights, rank, max_distance)

    col0 = jnp.arange(num_cols)
    row0 = values(jnp.zeros(num_cols, int), col0)
    best, argmax0, first0, last0 = _row_summaries(row0, jnp.zeros(num_cols, int), col0, col0 >= 0, 1)
    # Per row done so far: `split`, its argmax clipped to its neighbours' (nondecreasing by construction),
    # and `first`/`last`, the span of its near-tied columns. Row `span` (>= num_rows) is a sentinel at the
    # last column.
    levels = (num_rows - 1).bit_length()
    span = 1 << levels
    split, first, last = (jnp.full(span + 1, num_cols - 1).at[0].set(v[0]) for v in (argmax0, first0, last0))
    # Level l does the rows (2q + 1) * half, half = span / 2^(l+1), q < min(2^l, num_rows // 2) (the real
    # ones are a prefix). The levels run in a few phases, each one loop body with the width of its last
    # level: the early levels, with few rows, do not pay for the last level's width, and the program does
    # not grow with the number of levels.
    every = jnp.arange(span + 1)

    def level_of_width(count):
        size = num_cols - 1 + 2 * count
        q = jnp.arange(count)
        place = jnp.arange(size)

        def level(index, carry):
            split, first, last, best = carry
            half = span >> (index + 1)
            rows = (2 * q + 1) * half
            real = rows < num_rows
            above, below = jnp.minimum(rows - half, span), jnp.minimum(rows + half, span)  # done, or the sentinel
            # Row q needs columns first[above]..last[below]; consecutive rows overlap by their shared
            # neighbour's span, so the total is num_cols - 1 + count + the spans. Past `size` (many near ties),
            # fall back to split[above]..split[below], consecutive rows sharing one column: at most
            # num_cols - 1 + count.
            lo = first[above]
            hi = jnp.maximum(last[below], lo)  # equal but for rounding (spans are clipped to rows' columns)
            fits = jnp.sum(jnp.where(real, hi - lo + 1, 0)) <= size
            lo, hi = jnp.where(fits, lo, split[above]), jnp.where(fits, hi, split[below])
            length = jnp.where(real, hi - lo + 1, 0)
            starts = jnp.cumsum(length) - length
            owner = jnp.cumsum(jnp.zeros(size, int).at[starts].add(1, mode="drop")) - 1
            offset = place - starts[owner]
            inside = offset < length[owner]
            col = lo[owner] + offset
            vals = jnp.where(inside, values(jnp.minimum(rows, num_rows - 1)[owner], col), -jnp.inf)
            row_max, row_arg, row_first, row_last = _row_summaries(vals, owner, col, inside, count)
            row_arg = jnp.clip(row_arg, lo, hi)
            # Write row q's results at (2q + 1) * half; a select, not a scatter, which vmap would make strided.
            new = (every % (2 * half) == half) & (every < num_rows)
            source = jnp.minimum(every // (2 * half), count - 1)

            def write(table, values):
                return jnp.where(new, values[source], table)

            split = write(split, jnp.clip(row_arg, split[above], split[below]))
            first = write(first, jnp.clip(jnp.minimum(row_first, row_arg), lo, hi))
            last = write(last, jnp.clip(jnp.maximum(row_last, row_arg), lo, hi))
            return split, first, last, jnp.maximum(best, jnp.max(row_max))
        return level

    carry = (split, first, last, best[0])
    for begin, end in _phases(levels):
        count = min(1 << (end - 1), num_rows // 2)
        carry = jax.lax.fori_loop(begin, end, level_of_width(count), carry)
    return carry[3]


# Up to this many levels (rows <= 2^6, n up to about 130) the levels run as one loop: each phase is a loop body
# XLA compiles on its own (about 0.6 s each on a CPU), and at these sizes the narrower early levels save nothing
# measurable. Any split of the levels gives the same maximum bitwise (each row's maximum is over columns holding
# its maximizer, whatever the width).
_ONE_PHASE_LEVELS = 6


def _phases(levels: int) -> list[tuple[int, int]]:
    """Level ranges ``[begin, end)`` run as one loop each: all but the last two levels, then each of those
    (one loop for at most :data:`_ONE_PHASE_LEVELS` levels).

    Level l has at most 2^l rows, so a phase's width is set by its last level: with L levels the
    products computed fall from L (C + R) to about (L - 2)(C + R / 4) + 2 C + 1.5 R.
    """
    if levels <= _ONE_PHASE_LEVELS:
        return [(0, levels)] if levels else []
    cuts = sorted({0, max(0, levels - 2), max(0, levels - 1), levels})
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
