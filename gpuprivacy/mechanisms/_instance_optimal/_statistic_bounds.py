"""Closed-form local bounds :math:`U_l, L_l` of common statistics (Durfee 2025, Sec. 3.1), on the device.

Order statistics, quantiles, the median, the clipped mean and counts, from sorted data and
batched over a leading axis of datasets. Neighbours are **swaps** (n public); every cut-off
``K`` is a public parameter, beyond which the bounds jump to the public range limit
(Durfee 2025, Sec. 5.2), so the family stays valid.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_int, is_tracer
from gpuprivacy._config import require_x64
from gpuprivacy.mechanisms._instance_optimal._dataset_checks import (
    _max_pieces,
    check_dataset,
    check_domain,
    check_rank,
    median_rank,
    quantile_rank,
    sort_rows,
)
from gpuprivacy.mechanisms._instance_optimal._local_bounds_type import LocalBounds


_INF = math.inf


@functools.partial(jax.jit, static_argnames=("pieces",))
def _order_statistic_bounds(sorted_data, lower, upper, rank, pieces):
    # U_l = x_(r+l) (or the domain end), L_l = x_(r-l). Swapping the l smallest
    # points to `upper` moves the rank-r element to x_(r+l). Beyond `pieces` the range cap
    # (Durfee 2025, Sec. 5.2) sets U = upper, L = lower.
    # The rank (1..n, checked by the callers) is an argument, not part of the program: every rank of one data
    # size and number of pieces shares one compiled program (a grid of quantiles compiles it once). Inside a
    # release traced with its rank a constant, XLA folds the dynamic slices into static ones.
    n = sorted_data.shape[-1]
    pad = pieces + 1
    hi = jnp.full(sorted_data.shape[:-1] + (pad,), upper, jnp.float64)
    lo = jnp.full(sorted_data.shape[:-1] + (pad,), lower, jnp.float64)
    up_pad = jnp.concatenate([sorted_data, hi], axis=-1)
    low_pad = jnp.concatenate([lo, sorted_data], axis=-1)
    up = jax.lax.dynamic_slice_in_dim(up_pad, rank - 1, pad, axis=-1)  # x_(r) .. x_(r+pieces), padded with upper
    low = jnp.flip(jax.lax.dynamic_slice_in_dim(low_pad, rank, pad, axis=-1), axis=-1)  # x_(r) .. x_(r-pieces)
    # The last level always reaches the range (cap, Durfee 2025, Sec. 5.2).
    up = up.at[..., -1].set(upper)
    low = low.at[..., -1].set(lower)
    batch = sorted_data.shape[:-1]
    zero = jnp.zeros(batch, jnp.float64)
    del n
    return LocalBounds(up, low, zero, zero, jnp.full(batch, upper), jnp.full(batch, lower))


def quantile_bounds(data: Any, *, lower: float, upper: float, quantile: float | None = None,
                    rank: int | None = None, clip: bool = False, max_pieces: int | None = None) -> LocalBounds:
    """Exact local bounds of an order statistic under swaps (Durfee 2025, Sec. 3.1), batched over datasets.

    For the rank-``r`` order statistic of ``n`` values in ``[lower, upper]``:

    .. math::
        U_l = x_{(r+l)}\\ (r + l \\le n),\\ \\text{else upper}; \\qquad
        L_l = x_{(r-l)}\\ (r - l \\ge 1),\\ \\text{else lower}.

    ``max_pieces`` (public, default ``n + 1``, i.e. exact) caps the number of
    pieces per side: level ``max_pieces`` jumps to the domain end (Durfee
    2025, Sec. 5.2; still valid).

    Args:
      data: ``[n]`` or ``[B, n]`` values (unsorted).
      lower, upper: the public domain.
      quantile: in [0, 1]; rank ``max(1, ceil(quantile * n))``. Or give ``rank``.
      rank: 1-based rank.
      clip: clip out-of-domain values instead of raising.
      max_pieces: public cap on the pieces per side.

    Returns:
      :class:`LocalBounds` with ``K = max_pieces`` (leading batch axis if given).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.quantile_bounds([0.5, 1, 2, 4.5, 5, 5.2, 7, 9, 9.5], lower=0, upper=10, quantile=0.5)
      >>> b.upper.tolist()[:6], b.lower.tolist()[:6]
      ([5.0, 5.2, 7.0, 9.0, 9.5, 10.0], [5.0, 4.5, 2.0, 1.0, 0.5, 0.0])
    """
    require_x64("quantile_bounds")
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip, batched=True)
    n = x.shape[-1]
    if (quantile is None) == (rank is None):
        raise ValueError("pass exactly one of quantile= or rank= (e.g. quantile=0.5 for the median).")
    r = quantile_rank(quantile, n) if rank is None else check_rank(rank, n)
    pieces = _max_pieces(max_pieces, n)
    return _order_statistic_bounds(sort_rows(x), lower, upper, r, pieces)


def median_bounds(data: Any, *, lower: float, upper: float, clip: bool = False,
                  max_pieces: int | None = None) -> LocalBounds:
    """Exact local bounds of the (lower) median, rank ``(n+1)//2`` (Durfee 2025, Sec. 3.1).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> io.median_bounds([1.0, 2.0, 3.0], lower=0, upper=4).upper.tolist()
      [2.0, 3.0, 4.0, 4.0, 4.0]
    """
    require_x64("median_bounds")
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip, batched=True)
    n = x.shape[-1]
    return _order_statistic_bounds(sort_rows(x), lower, upper, median_rank(n), _max_pieces(max_pieces, n))


@jax.jit
def _clipped_mean_bounds(sorted_data, lower, upper):
    # U_l = f0 + sum_{i<=l} (hi - x_(i)) / n (swap the l smallest to hi).
    n = sorted_data.shape[-1]
    f0 = jnp.mean(sorted_data, axis=-1, keepdims=True)
    # The gains and the losses as one stacked cumulative sum, and the two envelopes as one running max (of up and
    # of -low): XLA:CPU compiles each cumulative op over n values as its own tree of passes (0.18 -> 0.125 s at
    # n = 1000 under vmap; the same values).
    steps = jnp.stack([upper - sorted_data, jnp.flip(sorted_data, axis=-1) - lower])
    gains, losses = jnp.cumsum(steps, axis=-1) / n
    up = jnp.concatenate([f0, f0 + gains], axis=-1)
    low = jnp.concatenate([f0, f0 - losses], axis=-1)
    # Rounding can break monotonicity by an ulp; the exact family is monotone. Level n is the range end.
    envelopes = jax.lax.cummax(jnp.stack([up, -low]), axis=up.ndim)
    up = envelopes[0].at[..., -1].set(upper)
    low = (-envelopes[1]).at[..., -1].set(lower)
    up = jnp.maximum(up, f0)
    batch = sorted_data.shape[:-1]
    zero = jnp.zeros(batch, jnp.float64)
    return LocalBounds(up, low, zero, zero, jnp.full(batch, upper), jnp.full(batch, lower))


def clipped_mean_bounds(data: Any, *, lower: float, upper: float, clip: bool = False) -> LocalBounds:
    """Exact local bounds of the mean of ``n`` values in ``[lower, upper]`` under swaps (Durfee 2025, Sec. 3.1).

    .. math::
        U_l = \\bar x + \\frac{1}{n}\\sum_{i \\le l} (\\text{upper} - x_{(i)}), \\qquad
        L_l = \\bar x - \\frac{1}{n}\\sum_{i \\le l} (x_{(n+1-i)} - \\text{lower}).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> io.clipped_mean_bounds([0.0, 1.0], lower=0, upper=1).upper.tolist()
      [0.5, 1.0, 1.0]
    """
    require_x64("clipped_mean_bounds")
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip, batched=True)
    return _clipped_mean_bounds(sort_rows(x), lower, upper)


def count_bounds(count: Any, *, max_pieces: int = 0) -> LocalBounds:
    """Local bounds of a count under add/remove neighbours (Durfee 2025, Sec. 3.1).

    :math:`U_l = c + l` and :math:`L_l = \\max(c - l, 0)`. Beyond the public
    ``max_pieces`` the tail rule with global sensitivity 1 applies (Durfee
    2025, Sec. 5.2; capped at 0 below); PLM is then
    :math:`\\mathrm{Lap}(2/\\varepsilon)` truncated to :math:`[0, \\infty)`.

    Args:
      count: a nonnegative integer count (or ``[B]`` of them).
      max_pieces: explicit pieces per side (public); the rest is the tail.

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.count_bounds(3, max_pieces=2)
      >>> b.upper.tolist(), b.lower.tolist()
      ([3.0, 4.0, 5.0], [3.0, 2.0, 1.0])
    """
    require_x64("count_bounds")
    c = count if is_tracer(count) else np.asarray(count)
    if not is_tracer(count):
        if c.dtype.kind not in "iuf" or (c.dtype.kind == "f" and not np.all(np.isfinite(c))) or np.any(c < 0) \
                or np.any(c != np.floor(c)):
            raise ValueError(f"count must hold nonnegative integers, got {count!r}.")
    K = check_int("max_pieces", max_pieces, minimum=0)
    c = jnp.asarray(c, jnp.float64)
    levels = jnp.arange(K + 1, dtype=jnp.float64)
    up = c[..., None] + levels
    low = jnp.maximum(c[..., None] - levels, 0.0)
    one = jnp.ones(c.shape, jnp.float64)
    return LocalBounds(up, low, one, one, jnp.full(c.shape, _INF), jnp.zeros(c.shape, jnp.float64))
