"""The pairs' matrix of the median's smooth sensitivity (Nissim, Raskhodnikova & Smith 2007, §3.1).

Writing a window of NRS07's :math:`A^{(k)}` by its ends
:math:`i = m+t-k-1 \\le m \\le j = m+t`, the max over k is a max over pairs,

.. math::
    \\max_{k \\le K} e^{-k\\beta} A^{(k)}(x) = \\max_{0 \\le i \\le m \\le j \\le n+1,\\ 1 \\le j-i \\le K+1}
    M_{ij}, \\qquad M_{ij} = e^{-(j-i-1)\\beta}\\big(x_{(j)} - x_{(i)}\\big)

(ends past 0 or n + 1 read the bound and are dominated by the clipped pair,
which has the same gap and a smaller k). For :math:`i < i'` and
:math:`j < j'` the weights cancel and, with :math:`a \\le a' \\le b \\le b'`
the four order statistics,
:math:`M_{ij'}M_{i'j} - M_{ij}M_{i'j'} \\propto (b'-a)(b-a') - (b-a)(b'-a')
= -(a'-a)(b'-b) \\le 0`, so the leftmost maximizing column of row i is
nondecreasing in i (a zero gap only ties columns of equal data, where the
leftmost, smaller k, wins), also with the cap :math:`j - i \\le K+1`, which
keeps a prefix of each row: a row's maximizer bounds the columns the rows
below it (to its right) and above it (to its left) need. The searches
(:mod:`._smooth_searches`, :mod:`._smooth_blocked`) use this, after the
monotone-matrix search of Aggarwal, Klawe, Moran, Shor & Wilber (1987).

Floating point: the searches maximize the very float64 products the definition
takes (``exp(-k beta)`` times the gap, one multiply each), and only the
choice of where to look is argued in exact arithmetic. Rounding can reorder
two products of a row that agree to a few ulps (data on a grid with
:math:`e^{\\beta}` rational, say), and the column a split picks may then not
bound the next rows exactly. So a row passes on, as the ends of its
neighbours' columns, the span of its columns within ``_NEAR_TIE`` (relative)
of its maximum rather than its argmax: by the inequality above, a column
outside the span loses by more than rounding in every row it is cut from. The
search then returns the definition's maximum bitwise, given the weights.
Past a budget of spans per level (half the rows; many near ties at once, or
:math:`\\beta` below about ``_NEAR_TIE`` with tied data) a level falls back
to the plain split, and the result may then be a few ulps below the maximum.
Products in the subnormal range (:math:`k\\beta > 708`) are exact only up to
their own (large) rounding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Columns whose product is within this relative distance of their row's maximum count as tied with it
# (module docstring, "Floating point"): above (2 levels + 4) times the products' relative error,
# (4 + k beta) 2^-53 with k beta <= 745 past which exp(-k beta) is 0, for up to 2^60 rows.
_NEAR_TIE = 2.0**-36


def _row_summaries(vals, owner, col, inside, count):
    """Per row of a level: its max, its leftmost argmax and its near-tied columns' span (module docstring)."""
    row_max = jax.ops.segment_max(vals, owner, count, indices_are_sorted=True)
    top = row_max[owner]
    argmax = jax.ops.segment_min(jnp.where(inside & (vals == top), col, jnp.iinfo(col.dtype).max), owner, count,
                                 indices_are_sorted=True)
    near = inside & (vals >= top * (1.0 - _NEAR_TIE))
    first = jax.ops.segment_min(jnp.where(near, col, jnp.iinfo(col.dtype).max), owner, count, indices_are_sorted=True)
    last = jax.ops.segment_max(jnp.where(near, col, -1), owner, count, indices_are_sorted=True)
    # A row of zeros (equal data) needs no span: the rows above gain nothing to the right of its argmax.
    # A NaN row has no argmax; keep its indices in range (the result is NaN then anyway).
    zero = ~(row_max > 0.0)
    return row_max, argmax, jnp.where(zero, argmax, first), jnp.where(zero, argmax, last)


def _pair_matrix(n, rank, max_distance):
    """The pairs' matrix: ``(first_row, num_rows, num_cols)``, rows ``i = first_row + r``, columns ``j = rank + c``.

    Rows ``i < rank - max_distance - 1`` have no allowed pair, and ends past 0 or n + 1 read the bound
    and are dominated by the clipped pair (module docstring).
    """
    first_row = max(0, rank - max_distance - 1)
    last_col = min(n + 1, rank + max_distance + 1)
    return first_row, rank - first_row + 1, last_col - rank + 1


def _products(padded, weights, rank, max_distance, r, c):
    """The products ``weights[j - i - 1] * (padded[j] - padded[i])`` at rows ``r`` and columns ``c`` of the pairs'
    matrix, ``-inf`` where ``j - i - 1 > max_distance`` (the allowed columns are a prefix of each row)."""
    first_row, _, num_cols = _pair_matrix(padded.shape[0] - 2, rank, max_distance)
    # The pair i = j = rank (k = -1, not in the definition) has gap 0 and value 0: it never raises the max.
    i, j = first_row + r, rank + jnp.minimum(c, num_cols - 1)
    k = j - i - 1
    value = weights[jnp.clip(k, 0, weights.shape[0] - 1)] * (padded[j] - padded[i])
    return jnp.where(k <= max_distance, value, -jnp.inf)

