"""The kernel of the median's smooth sensitivity (Nissim, Raskhodnikova & Smith 2007, §3.1): which exact
search runs where, and how a batch of trials runs on a CPU.

* CPU, up to ``_LARGEST_GAPS_PAIRS`` pairs: the largest gap at each distance
  (:func:`._smooth_searches._by_largest_gaps`), whose gaps do not depend on beta;
* CPU, past that: the blocked search (:func:`._smooth_blocked._blocked_search`);
* accelerators: the divide and conquer (:func:`._smooth_searches._divide_and_conquer`).

All three return the max of the same float64 products (:mod:`._smooth_pairs`). The choice reads only
public quantities (n, the rank, K and the backend), at trace time.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from gpuprivacy._chunked_vmap import in_cpu_chunks
from gpuprivacy.mechanisms._instance_optimal._smooth_blocked import _blocked_search
from gpuprivacy.mechanisms._instance_optimal._smooth_pairs import _pair_matrix
from gpuprivacy.mechanisms._instance_optimal._smooth_searches import _divide_and_conquer, _largest_gaps

# On the CPU backend, a pairs' matrix of at most this many pairs (rows x columns; n <= 5789 with the default K)
# takes the largest gaps (:mod:`._smooth_searches`). Measured on the 2-core development VM (2026-11-27, AVX-512), per
# trial and beta, the largest gaps against the divide and conquer:
#   one beta (a batch of trials): n = 200: 3.4 against 4.3 us (every pair, the previous CPU path); n = 1000:
#   55 against 191; n = 2000: 211 against 443; n = 4093: 791 against 964; n = 5000: 1228 against 1567;
#   n = 6000: 1744 against 1652 (the crossing, at about 9M pairs);
#   4 betas vmapped outside the trials, as the study engine runs an epsilon grid: n = 500: 5.3 against 32
#   (every pair); n = 1000: 14.5 against 181; n = 2000: 51 against 396; n = 4000: 195 against 912.
# The largest gaps compile in 0.3-0.5 s where the divide and conquer takes 1.9-2.5 s. Accelerators keep the
# divide and conquer (not measured there). Past the budget the CPU takes the blocked search
# (:mod:`._smooth_blocked`), 2.6x the divide and conquer at n = 10^4.
_LARGEST_GAPS_PAIRS = 2**23


def takes_largest_gaps(n: int, rank: int, max_distance: int) -> bool:
    """Whether the kernel takes the largest gap at each distance for ``n`` values: on the CPU backend, at most
    ``_LARGEST_GAPS_PAIRS`` pairs (read when the program is traced); else the divide and conquer."""
    _, num_rows, num_cols = _pair_matrix(n, rank, max_distance)
    return jax.default_backend() == "cpu" and num_rows * num_cols <= _LARGEST_GAPS_PAIRS



# On CPU, vmap runs the kernel over chunks of about this many values (trials x n) at a time, in sequence.
_CPU_CHUNK_VALUES = 2**15

# The blocked search's level arrays hold about 4 n values a trial ([columns, 3] products and their column
# indices), twice the divide and conquer's; a trial runs about 600 small kernels, whose fixed cost a chunk of
# several trials shares. Per trial on the 2-core development VM (2026-12-01, quiet), one trial a step against
# chunks of 80,000 values: n = 6000 0.69 -> 0.62 ms, n = 10^4 (8 trials a chunk) 1.26 -> 0.96 ms, n = 2 10^4
# 2.49 -> 2.17 ms; at n = 10^4, 2, 4, 6, 13 and 32 trials a chunk: 1.24, 1.08, 1.00-1.04, 1.07-1.10, 1.19 ms.
# (On 2026-11-29, under load 5.5-6.4, chunks of 2 and 3 had looked slower than one trial a step.)
_BLOCKED_CHUNK_VALUES = 80_000


def _in_chunks_on_cpu(kernel, n, chunk_values=None):
    """``kernel`` whose ``vmap`` runs, on the CPU backend, chunks of trials in sequence (gpuprivacy/_chunked_vmap.py).

    Batched by ``vmap``, the kernel's gathers and selects stream ``[trials, n]`` arrays once per level;
    on a CPU, once they outgrow the cache, the batch runs slower than a loop over the trials (100 trials
    at n = 10^4: 2.4 s batched, 0.7 s in chunks of 3, on 2 cores). Chunks of ``_CPU_CHUNK_VALUES / n``
    trials stay in cache (``chunk_values`` instead, where given). Each trial computes the same as alone.
    """
    return in_cpu_chunks(kernel, lambda args: n, _CPU_CHUNK_VALUES if chunk_values is None else chunk_values)


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
        kernel = functools.partial(_search_kernel, rank=rank, max_distance=max_distance)
        best, median = _in_chunks_on_cpu(kernel, n, _BLOCKED_CHUNK_VALUES)(sorted_data, weights, lower, upper)
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


def _search_kernel(sorted_data, weights, lower, upper, rank, max_distance):
    padded, nan = _with_bounds(sorted_data, lower, upper, rank, max_distance)
    # The blocked search shares a level's gathers and scatters between several rows, which pays on a CPU;
    # the divide and conquer does the fewest products (accelerators, not measured there).
    search = _blocked_search if jax.default_backend() == "cpu" else _divide_and_conquer
    best = search(padded, weights, rank, max_distance)
    return jnp.where(nan, jnp.nan, best), sorted_data[rank - 1]

