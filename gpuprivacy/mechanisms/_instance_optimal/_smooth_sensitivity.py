"""Smooth-sensitivity baselines for the median (Nissim, Raskhodnikova & Smith 2007).

.. math::
    S^*_\\beta(x) = \\max_{k \\ge 0} e^{-k\\beta} A^{(k)}(x), \\qquad
    A^{(k)}(x) = \\max_{t = 0..k+1} \\big(x_{(m+t)} - x_{(m+t-k-1)}\\big),

with :math:`x_{(0)} = \\ell`, :math:`x_{(n+1)} = u` (NRS07 §3.1, the median).
Release :math:`f(x) + (S^*_\\beta(x)/\\alpha) Z` with an
:math:`(\\alpha,\\beta)`-admissible ``Z`` (NRS07 Def 2.5, Lemma 2.6):

* ``noise="cauchy"``: :math:`h(z) \\propto 1/(1+z^2)`,
  :math:`\\alpha = \\beta = \\varepsilon/6` (pure :math:`\\varepsilon`-DP).
  Check of the constants [NRS07 Def 2.5, split :math:`\\varepsilon/2` +
  :math:`\\varepsilon/2`]: *sliding*,
  :math:`|\\tfrac{d}{dz}\\log(1+z^2)| = 2|z|/(1+z^2) \\le 1`, so a shift by
  :math:`\\alpha = \\varepsilon/6` costs at most :math:`\\varepsilon/6 \\le
  \\varepsilon/2`; *dilation*, :math:`h(z)/(e^{-\\lambda}h(e^{-\\lambda}z)) =
  e^{\\lambda}(1+e^{-2\\lambda}z^2)/(1+z^2) \\le e^{3|\\lambda|} =
  e^{\\varepsilon/2}` for :math:`|\\lambda| \\le \\beta = \\varepsilon/6`.
* ``noise="laplace"``: :math:`\\alpha = \\varepsilon/2`,
  :math:`\\beta = \\varepsilon/(2\\ln(2/\\delta))`, (epsilon, delta)-DP
  (NRS07 Lemma 2.9).

Truncation at a public ``K`` stays a valid smooth bound (an early
stop, made public): :math:`\\max(\\max_{k \\le K} e^{-k\\beta}A^{(k)},\\
e^{-(K+1)\\beta}\\,\\mathrm{GS})` is :math:`\\beta`-smooth and at least
:math:`S^*_\\beta` since :math:`A^{(k)} \\le \\mathrm{GS} = u - \\ell`.

Computation, O(n log n) (NRS07 §3.1). Writing a window by its ends
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
keeps a prefix of each row. A divide and conquer over the rows (NRS07 §3.1;
the monotone-matrix search of Aggarwal, Klawe, Moran, Shor & Wilber 1987)
then finds every row's maximum: the middle row over all columns, the rows
above it only left of its maximizer, the rows below only right of it,
ceil(log2(rows)) levels of O(n) products each, with static shapes.
On the CPU backend, up to 2^23 pairs (n up to 5789 with the default K), the
kernel instead takes the definition's own route, quadratic but cheap there:
the largest gap at each distance, :math:`A^{(k)}` for every k, from one pass
over every pair (data only, no weight), then
:math:`\\max_k e^{-k\\beta} A^{(k)}`, O(K) per beta. The pass needs no gather:
row i's gaps to the columns ``j = m..`` are one static slice of the data
minus :math:`x_{(i)}`, and land on the distances ``k = m - i - 1 + c``, a
contiguous run, so each step of the loop takes the elementwise max of a few
rows' shifted slices into a running table of :math:`A^{(k)}`. It is 2-3x the
divide and conquer's speed for one beta (0.2 ns a pair on the development
VM, where the divide and conquer's gathers and segment reductions cost about
30 ns for each of its ~7n products), and the gaps do not depend on beta:
a grid of epsilons under ``vmap`` computes them once per dataset (7-12x at
n = 500-2000 for 4 epsilons). Every path takes the max of the same products:
:math:`e^{-k\\beta} \\max_t g_t = \\max_t e^{-k\\beta} g_t` holds in float64
too, rounding being monotone.

Floating point: the kernel maximizes the very float64 products the definition
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

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import (CAUCHY_TAIL, LAPLACE_TAIL, check_delta, check_epsilon, check_int, check_key,
                                check_noise_scale, epsilon_ok)
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Key
from gpuprivacy.accounting import ApproxDP, PureDP
from gpuprivacy.mechanisms._common import check_bool, check_choice
from gpuprivacy.mechanisms._instance_optimal._dataset_checks import check_dataset, check_domain, median_rank, sort_rows
from gpuprivacy.mechanisms._release import Release, stated_guarantee, withheld_unless

SMOOTH_NOISES = ("cauchy", "laplace")


class SmoothSensitivityInfo(NamedTuple):
    """Side information of :func:`smooth_sensitivity_median`.

    Attributes:
      beta: the smoothing parameter (public).
      nonprivate_smooth_sensitivity: :math:`S^*_\\beta(x)` (NOT private).
      nonprivate_scale: the noise scale :math:`S^*/\\alpha` (NOT private).
      nonprivate_value: the exact median (NOT private).
      valid: False when a traced epsilon was invalid; the release is then NaN (fail closed).
    """

    beta: jax.Array
    nonprivate_smooth_sensitivity: jax.Array
    nonprivate_scale: jax.Array
    nonprivate_value: jax.Array
    valid: jax.Array = True


def smooth_parameters(epsilon: float, noise: str, delta: float | None) -> tuple[float, float]:
    """``(alpha, beta)`` of the admissible noise that ``smooth_sensitivity_median`` calibrates with (NRS07 Def 2.5):
    Cauchy noise ``(epsilon/6, epsilon/6)`` (pure DP), Laplace noise ``(epsilon/2, epsilon/(2 ln(2/delta)))``
    (Lemma 2.9). The release is ``median + (S*_beta / alpha) Z``."""
    if noise == "cauchy":
        return epsilon / 6.0, epsilon / 6.0
    return epsilon / 2.0, epsilon / (2.0 * math.log(2.0 / delta))


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


# On the CPU backend, a pairs' matrix of at most this many pairs (rows x columns; n <= 5789 with the default K)
# takes the largest gaps (module docstring). Measured on the 2-core development VM (2026-11-27, AVX-512), per
# trial and beta, the largest gaps against the divide and conquer:
#   one beta (a batch of trials): n = 200: 3.4 against 4.3 us (every pair, the previous CPU path); n = 1000:
#   55 against 191; n = 2000: 211 against 443; n = 4093: 791 against 964; n = 5000: 1228 against 1567;
#   n = 6000: 1744 against 1652 (the crossing, at about 9M pairs);
#   4 betas vmapped outside the trials, as the study engine runs an epsilon grid: n = 500: 5.3 against 32
#   (every pair); n = 1000: 14.5 against 181; n = 2000: 51 against 396; n = 4000: 195 against 912.
# The largest gaps compile in 0.3-0.5 s where the divide and conquer takes 1.9-2.5 s. Accelerators keep the
# divide and conquer (not measured there).
_LARGEST_GAPS_PAIRS = 2**23

# Rows of the pairs' matrix folded into the table of largest gaps per step of its loop: each step reads and
# writes the table once for this many rows (1: 2.4x slower at n = 2000; 4: 9% slower; 16: 17% slower).
_ROWS_PER_STEP = 8


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


def takes_largest_gaps(n: int, rank: int, max_distance: int) -> bool:
    """Whether the kernel takes the largest gap at each distance for ``n`` values: on the CPU backend, at most
    ``_LARGEST_GAPS_PAIRS`` pairs (read when the program is traced); else the divide and conquer."""
    _, num_rows, num_cols = _pair_matrix(n, rank, max_distance)
    return jax.default_backend() == "cpu" and num_rows * num_cols <= _LARGEST_GAPS_PAIRS


def _largest_gaps(padded, rank, max_distance):
    """:math:`A^{(k)}`, ``k = 0..min(max_distance, n)``: the largest ``padded[j] - padded[i]`` over the pairs
    ``i <= rank <= j`` with ``j - i - 1 = k``, from one pass over every pair (module docstring).

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


def _phases(levels: int) -> list[tuple[int, int]]:
    """Level ranges ``[begin, end)`` run as one loop each: all but the last two levels, then each of those.

    Level l has at most 2^l rows, so a phase's width is set by its last level: with L levels the
    products computed fall from L (C + R) to about (L - 2)(C + R / 4) + 2 C + 1.5 R.
    """
    cuts = sorted({0, max(0, levels - 2), max(0, levels - 1), levels})
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


# On CPU, vmap runs the kernel over chunks of about this many values (trials x n) at a time, in sequence.
_CPU_CHUNK_VALUES = 2**15


def _in_chunks_on_cpu(kernel, n):
    """``kernel`` whose ``vmap`` runs, on the CPU backend, chunks of trials in sequence (``lax.map``).

    Batched by ``vmap``, the kernel's gathers and selects stream ``[trials, n]`` arrays once per level;
    on a CPU, once they outgrow the cache, the batch runs slower than a loop over the trials (100 trials
    at n = 10^4: 2.4 s batched, 0.7 s in chunks of 3, on 2 cores). Chunks of ``_CPU_CHUNK_VALUES / n``
    trials stay in cache. Each trial computes the same as alone; on accelerators ``vmap`` is left as is.
    """
    if jax.default_backend() != "cpu":
        return kernel

    @jax.custom_batching.custom_vmap
    def chunked(*args):
        return kernel(*args)

    @chunked.def_vmap
    def _rule(axis_size, in_batched, *args):
        batched = [a for a, b in zip(args, in_batched) if b]

        def one_trial(xs):
            xs = iter(xs)
            return kernel(*(next(xs) if b else a for a, b in zip(args, in_batched)))  # unbatched: closed over

        # Equal steps, the batch padded up to their total (by repeating its first trials, dropped after):
        # ``lax.map``'s own ``batch_size`` runs a remainder in a second copy of the body, which doubles the
        # compile time when the chunk does not divide the batch.
        steps = -(-axis_size // max(1, min(axis_size, _CPU_CHUNK_VALUES // max(n, 1))))
        per_step = -(-axis_size // steps)
        pad = steps * per_step - axis_size

        def in_steps(a):
            a = jnp.concatenate([a, a[:pad]]) if pad else a
            return a.reshape((steps, per_step) + a.shape[1:])

        out = jax.lax.map(jax.vmap(one_trial), jax.tree.map(in_steps, batched))
        out = jax.tree.map(lambda a: a.reshape((steps * per_step,) + a.shape[2:])[:axis_size], out)
        return out, jax.tree.map(lambda _: True, out)

    return chunked


@functools.partial(jax.jit, static_argnames=("rank", "max_distance"))
def _median_smooth_sensitivity(sorted_data, beta, lower, upper, rank, max_distance):
    n = sorted_data.shape[0]
    # exp(-k beta) with the definition's operations, for the k <= min(K, n) that occur; made here, outside the
    # CPU's chunked loop over trials, so that under vmap over beta they are made once per beta. The barrier
    # keeps them a table of their own (XLA's float64 exp is not the same function in every fusion).
    weights = jax.lax.optimization_barrier(jnp.exp(-jnp.arange(min(max_distance, n) + 1).astype(jnp.float64) * beta))
    if takes_largest_gaps(n, rank, max_distance):
        # The gaps depend on the data only: under vmap over beta (an epsilon grid) they are computed once.
        kernel = functools.partial(_largest_gaps_kernel, rank=rank, max_distance=max_distance)
        gaps, median = _in_chunks_on_cpu(kernel, n)(sorted_data, lower, upper)
        best = jnp.max(weights * gaps)
    else:
        kernel = functools.partial(_divide_and_conquer_kernel, rank=rank, max_distance=max_distance)
        best, median = _in_chunks_on_cpu(kernel, n)(sorted_data, weights, lower, upper)
    tail = jnp.exp(-(max_distance + 1) * beta) * (upper - lower)
    return jnp.maximum(best, tail), median


def _with_bounds(sorted_data, lower, upper, rank, max_distance):
    """The data between the bounds, and whether a NaN (traced data skip the eager check) is among the values the
    definition reads: it poisons the definition's max over all windows, so the kernels' too."""
    n = sorted_data.shape[0]
    padded = jnp.concatenate([jnp.full(1, lower), sorted_data, jnp.full(1, upper)])
    used = padded[max(0, rank - max_distance - 1):min(n + 1, rank + max_distance + 1) + 1]
    return padded, jnp.any(jnp.isnan(used))


def _largest_gaps_kernel(sorted_data, lower, upper, rank, max_distance):
    padded, nan = _with_bounds(sorted_data, lower, upper, rank, max_distance)
    gaps = _largest_gaps(padded, rank, max_distance)
    return jnp.where(nan, jnp.nan, gaps), sorted_data[rank - 1]


def _divide_and_conquer_kernel(sorted_data, weights, lower, upper, rank, max_distance):
    padded, nan = _with_bounds(sorted_data, lower, upper, rank, max_distance)
    best = _divide_and_conquer(padded, weights, rank, max_distance)
    return jnp.where(nan, jnp.nan, best), sorted_data[rank - 1]


def median_smooth_sensitivity(data: Any, *, beta: float, lower: float, upper: float, clip: bool = False,
                              max_distance: int | None = None) -> jax.Array:
    """:math:`S^*_\\beta(x)` of the median under swaps (NRS07 §3.1).

    Computed in O(n log n) time and O(n) memory by a divide and conquer that
    returns the definition's maximum of float64 products (module docstring);
    on the CPU, for n up to 5789 (or a small ``max_distance``), from the
    largest gap at each distance, which is faster there.

    Args:
      data: ``float64[n]`` in ``[lower, upper]``.
      beta: smoothing parameter > 0.
      lower, upper: the public domain.
      clip: clip out-of-domain data instead of raising.
      max_distance: public truncation ``K`` (default ``n``); a valid upper
        bound either way (module docstring).

    Returns:
      A float64 scalar.

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> x = [0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5]
      >>> round(float(io.median_smooth_sensitivity(x, beta=1/6, lower=0, upper=10)), 6)
      3.59392
    """
    require_x64("median_smooth_sensitivity")
    beta = check_epsilon(beta, "beta")
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    n = x.shape[0]
    K = n if max_distance is None else check_int("max_distance", max_distance, minimum=0)
    return _median_smooth_sensitivity(sort_rows(x), jnp.asarray(beta, jnp.float64), lower, upper, median_rank(n), K)[0]


@functools.partial(jax.jit, static_argnames=("rank", "max_distance", "noise"))
def _smooth_release(key, x, alpha, beta, lower, upper, rank, max_distance, noise):
    smooth, median = _median_smooth_sensitivity(sort_rows(x), beta, lower, upper, rank, max_distance)
    if noise == "cauchy":
        z = jax.random.cauchy(key, (), jnp.float64)
    else:
        z = jax.random.laplace(key, (), jnp.float64)
    scale = smooth / alpha
    return Release(median + scale * z, SmoothSensitivityInfo(beta, smooth, scale, median))


def _check_noise_delta(noise, delta):
    noise = check_choice("noise", noise, SMOOTH_NOISES)
    if noise == "laplace":
        if delta is None:
            raise ValueError("noise='laplace' gives (epsilon, delta)-DP and needs delta (e.g. delta=1e-6); "
                             "noise='cauchy' is pure epsilon-DP and takes no delta.")
        delta = check_delta(delta)
    elif delta is not None:
        raise ValueError(f"noise='cauchy' is pure epsilon-DP and takes no delta, got delta={delta!r}. Pass "
                         "delta=None, or noise='laplace' for the (epsilon, delta) version.")
    return noise, delta


def smooth_sensitivity_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                              clip: bool = False, noise: str = "cauchy", delta: float | None = None,
                              max_distance: int | None = None) -> Release:
    """The smooth-sensitivity median (Nissim, Raskhodnikova & Smith 2007, §3.1, Lemmas 2.6, 2.9).

    .. math::
        M(x) = \\mathrm{med}(x) + \\frac{S^*_\\beta(x)}{\\alpha} Z,

    ``noise="cauchy"``: :math:`Z` standard Cauchy, :math:`\\alpha = \\beta =
    \\varepsilon/6`, pure :math:`\\varepsilon`-DP (scale
    :math:`6 S^*_{\\varepsilon/6}/\\varepsilon`). ``noise="laplace"``:
    :math:`Z \\sim \\mathrm{Lap}(1)`, :math:`\\alpha = \\varepsilon/2`,
    :math:`\\beta = \\varepsilon/(2\\ln(2/\\delta))`,
    :math:`(\\varepsilon, \\delta)`-DP. Swap neighbours, n public, median
    rank ``(n+1)//2``. The output is not clipped (clipping to the domain is
    allowed post-processing; callers may do it).

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` unsorted values in ``[lower, upper]``.
      epsilon: privacy parameter.
      lower, upper: the public domain.
      clip: clamp rows outside ``[lower, upper]`` to it instead of raising.
      noise: "cauchy" (pure DP) or "laplace" (approximate DP).
      delta: required for ``noise="laplace"``, must be None for Cauchy.
      max_distance: public truncation of the max over k (default n).

    Returns:
      ``Release(value, SmoothSensitivityInfo, guarantee)``, the guarantee that of
      :func:`smooth_sensitivity_median_guarantee` for the same parameters.

    Raises:
      ValueError: bad domain, data, epsilon, delta or noise.

    Privacy:
      See above; Cauchy constants checked in the module docstring.
      Idealized numerics.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.smooth_sensitivity_median(jax.random.key(0), [1.0, 2.0, 3.0], epsilon=1.0, lower=0, upper=4)
      >>> r.value.dtype
      dtype('float64')

    References:
      Nissim, Raskhodnikova & Smith, `Smooth Sensitivity and Sampling in
      Private Data Analysis <https://doi.org/10.1145/1250790.1250803>`_, STOC 2007.
    """
    require_x64("smooth_sensitivity_median")
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    noise, delta = _check_noise_delta(noise, delta)
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    n = x.shape[0]
    K = n if max_distance is None else check_int("max_distance", max_distance, minimum=0)
    guarantee = stated_guarantee(smooth_sensitivity_median_guarantee, epsilon=epsilon, lower=lower, upper=upper,
                                 clip=clip, noise=noise, delta=delta,
                                 max_distance=None if max_distance is None else K)
    alpha, beta = smooth_parameters(epsilon, noise, delta)
    # The noise is (smooth sensitivity <= upper - lower) / alpha times a Cauchy-like or Laplace draw.
    check_noise_scale((upper - lower) / smooth_parameters(1.0, noise, delta)[0], epsilon,
                      what="smooth_sensitivity_median",
                      tail=CAUCHY_TAIL if noise == "cauchy" else LAPLACE_TAIL)
    release = _smooth_release(key, x, jnp.asarray(alpha, jnp.float64), jnp.asarray(beta, jnp.float64),
                              jnp.asarray(lower, jnp.float64), jnp.asarray(upper, jnp.float64), median_rank(n), K,
                              noise)
    release = Release(release.value, release.info, guarantee)
    return withheld_unless(release, epsilon_ok(epsilon))  # a traced epsilon skipped the eager check


def smooth_sensitivity_median_guarantee(*, epsilon: float, lower: float, upper: float, clip: bool = False,
                                        noise: str = "cauchy", delta: float | None = None,
                                        max_distance: int | None = None) -> PureDP | ApproxDP:
    """``PureDP(epsilon)`` for Cauchy noise, ``ApproxDP(epsilon, delta)`` for Laplace (NRS07 Lemmas 2.6, 2.9).

    Takes exactly the mechanism's parameters (``guarantee(**params)``); ``lower``/``upper`` are
    required, as for the mechanism, and validated.
    """
    epsilon = check_epsilon(epsilon)
    noise, delta = _check_noise_delta(noise, delta)
    check_domain(lower, upper)
    check_bool("clip", clip)
    if max_distance is not None:
        check_int("max_distance", max_distance, minimum=0)
    return PureDP(epsilon) if noise == "cauchy" else ApproxDP(epsilon, delta)


def smooth_sensitivity_by_definition(sorted_data, beta, lower, upper, rank: int, max_distance: int):
    """:math:`S^*_\\beta` straight from its definition in O(n K) (NRS07 §3.1): the largest gap at each
    distance k, weighted by :math:`e^{-k\\beta}`, and the tail bound :math:`e^{-(K+1)\\beta}(u - \\ell)`.

    Not used by any release (the O(n log n) search above is); kept as the reference that search is
    tested against and benchmarked against. ``sorted_data`` [n] sorted, ``rank`` the 1-based median rank.
    """
    n = sorted_data.shape[0]
    padded = jnp.concatenate([jnp.full(1, lower), sorted_data, jnp.full(1, upper)])
    t = jnp.arange(max_distance + 2)

    def at_distance(k):
        hi_index = jnp.clip(rank + t, 0, n + 1)
        lo_index = jnp.clip(rank + t - k - 1, 0, n + 1)
        gaps = jnp.where(t <= k + 1, padded[hi_index] - padded[lo_index], 0.0)
        return jnp.max(gaps)

    ks = jnp.arange(max_distance + 1)
    local = jax.lax.map(at_distance, ks, batch_size=min(max_distance + 1, 256))
    weighted = jnp.exp(-ks.astype(jnp.float64) * beta) * local
    tail = jnp.exp(-(max_distance + 1) * beta) * (upper - lower)
    return jnp.maximum(jnp.max(weighted), tail)
