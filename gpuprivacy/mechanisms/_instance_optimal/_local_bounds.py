"""Local bounds :math:`U_l, L_l` for PLM and INV (spec 001 §4.1-4.3), computed on the device.

* Closed forms from sorted data (order statistics, quantiles, median,
  clipped mean, counts), batched over a leading axis of datasets (§4.1).
* Black-box ``f`` declared nondecreasing in every record: exact bounds by
  enumerating the masks that replace at most ``l`` records by the domain end,
  through the oracle evaluator and the subset engine (§4.2).
* Generic black-box ``f``: only over a finite universe (exact ball
  enumeration by layers, §4.3 (i)) or with user-certified bounds (§4.3 (ii),
  :func:`make_local_bounds`); anything else is refused, because removal-only
  subsets, greedy or sampled searches give *lower* bounds of the true sup and
  break privacy (§4.3, §7 pitfall 2).

Neighbours are **swaps** (n public) unless stated. Every cut-off ``K`` is a
public parameter; beyond it the bounds jump to the public range limit
(spec §2.7 (a)), so the family stays valid.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_data, check_finite_real, check_int, check_probability, is_tracer
from gpuprivacy._config import require_x64
from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import LocalBounds
from gpuprivacy.mechanisms._common import check_bool

_INF = math.inf


def _numpy_sort(values):
    return np.sort(np.asarray(values), axis=-1)


def sort_rows(x: jax.Array) -> jax.Array:
    """Sorts along the last axis; on the CPU backend through NumPy's sort.

    XLA's CPU sort is 5-8x slower than NumPy's and dominates the cost of
    the closed-form bounds (issue 7 benchmark), so on CPU the sort runs as a
    host callback (the data are on the host anyway); on accelerators it is
    ``jnp.sort``. Same result either way (a sort is deterministic).
    """
    if jax.default_backend() != "cpu":
        return jnp.sort(x, axis=-1)
    return jax.pure_callback(_numpy_sort, jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="expand_dims")


def check_domain(lower: Any, upper: Any) -> tuple[float, float]:
    """A public domain ``[lower, upper]`` with finite ends and ``lower < upper``."""
    lower = check_finite_real("lower", lower)
    upper = check_finite_real("upper", upper)
    if not lower < upper:
        raise ValueError(f"the domain needs lower < upper, got lower={lower!r}, upper={upper!r}. Pass the public "
                         "range of the data, e.g. lower=0.0, upper=10.0.")
    return lower, upper


def check_dataset(data: Any, lower: float, upper: float, clip: bool, *, batched: bool = False,
                  name: str = "data") -> jax.Array:
    """Curator-boundary check of one 1-D dataset (or ``[B, n]`` when ``batched``) in ``[lower, upper]``.

    NaN/inf always raise; values outside the domain raise unless ``clip=True``
    (then they are clipped, as the user asked).
    """
    clip = check_bool("clip", clip)
    if is_tracer(data):
        out = jnp.asarray(data, jnp.float64)
        return jnp.clip(out, lower, upper)
    arr = check_data(data, name)
    want = 2 if batched else 1
    if batched and arr.ndim == 1:
        want = 1
    if arr.ndim != want:
        hint = " Use jax.vmap, or the batched bound providers, for several datasets." if arr.ndim > want else ""
        raise ValueError(f"{name} must be a 1-D array of n values{' (or [B, n])' if batched else ''}, got shape "
                         f"{arr.shape}.{hint}")
    arr = arr.astype(np.float64)
    outside = (arr < lower) | (arr > upper)
    if outside.any() and not clip:
        first = arr[outside].ravel()[0]
        raise ValueError(f"{name} has {int(outside.sum())} value(s) outside the declared domain [{lower}, {upper}] "
                         f"(e.g. {float(first)!r}). Widen lower/upper (they must be public) or pass clip=True to clip "
                         "them into the domain.")
    return jnp.asarray(np.clip(arr, lower, upper))


def check_rank(rank: Any, n: int) -> int:
    return check_int("rank", rank, minimum=1, maximum=n)


def quantile_rank(quantile: Any, n: int) -> int:
    """The 1-based rank of the lower empirical ``quantile``: ``max(1, ceil(quantile * n))``."""
    q = check_probability("quantile", quantile, open_interval=False)
    return max(1, min(n, math.ceil(q * n - 1e-12)))


def median_rank(n: int) -> int:
    """The (lower) median rank ``(n + 1) // 2``; for odd n this is the median (spec §7 pitfall 11)."""
    return (n + 1) // 2


def _max_pieces(max_pieces, n):
    if max_pieces is None:
        return n + 1
    return check_int("max_pieces", max_pieces, minimum=1)


@functools.partial(jax.jit, static_argnames=("rank", "pieces"))
def _order_statistic_bounds(sorted_data, lower, upper, rank, pieces):
    # Spec §4.1: U_l = x_(r+l) (or the domain end), L_l = x_(r-l). Swapping the l smallest
    # points to `upper` moves the rank-r element to x_(r+l). Beyond `pieces` the range cap
    # (spec §2.7 (a)) sets U = upper, L = lower.
    n = sorted_data.shape[-1]
    pad = pieces + 1
    hi = jnp.full(sorted_data.shape[:-1] + (pad,), upper, jnp.float64)
    lo = jnp.full(sorted_data.shape[:-1] + (pad,), lower, jnp.float64)
    up_pad = jnp.concatenate([sorted_data, hi], axis=-1)
    low_pad = jnp.concatenate([lo, sorted_data], axis=-1)
    up = jax.lax.slice_in_dim(up_pad, rank - 1, rank + pieces, axis=-1)
    low = jnp.flip(jax.lax.slice_in_dim(low_pad, pad + rank - 1 - pieces, pad + rank, axis=-1), axis=-1)
    # The last level always reaches the range (cap, spec §2.7 (a)).
    up = up.at[..., -1].set(upper)
    low = low.at[..., -1].set(lower)
    batch = sorted_data.shape[:-1]
    zero = jnp.zeros(batch, jnp.float64)
    del n
    return LocalBounds(up, low, zero, zero, jnp.full(batch, upper), jnp.full(batch, lower))


def quantile_bounds(data: Any, *, lower: float, upper: float, quantile: float | None = None,
                    rank: int | None = None, clip: bool = False, max_pieces: int | None = None) -> LocalBounds:
    """Exact local bounds of an order statistic under swaps (spec 001 §4.1), batched over datasets.

    For the rank-``r`` order statistic of ``n`` values in ``[lower, upper]``:

    .. math::
        U_l = x_{(r+l)}\\ (r + l \\le n),\\ \\text{else upper}; \\qquad
        L_l = x_{(r-l)}\\ (r - l \\ge 1),\\ \\text{else lower}.

    ``max_pieces`` (public, default ``n + 1``, i.e. exact) caps the number of
    pieces per side: level ``max_pieces`` jumps to the domain end (spec
    §2.7 (a), still valid).

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
    """Exact local bounds of the (lower) median, rank ``(n+1)//2`` (spec 001 §4.1, §6.1).

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
    # Spec §4.1: U_l = f0 + sum_{i<=l} (hi - x_(i)) / n (swap the l smallest to hi).
    n = sorted_data.shape[-1]
    f0 = jnp.mean(sorted_data, axis=-1, keepdims=True)
    gains = jnp.cumsum(upper - sorted_data, axis=-1) / n
    losses = jnp.cumsum(jnp.flip(sorted_data, axis=-1) - lower, axis=-1) / n
    up = jnp.concatenate([f0, f0 + gains], axis=-1)
    low = jnp.concatenate([f0, f0 - losses], axis=-1)
    # Rounding can break monotonicity by an ulp; the exact family is monotone. Level n is the range end.
    up = jax.lax.cummax(up, axis=up.ndim - 1).at[..., -1].set(upper)
    low = jax.lax.cummin(low, axis=low.ndim - 1).at[..., -1].set(lower)
    up = jnp.maximum(up, f0)
    batch = sorted_data.shape[:-1]
    zero = jnp.zeros(batch, jnp.float64)
    return LocalBounds(up, low, zero, zero, jnp.full(batch, upper), jnp.full(batch, lower))


def clipped_mean_bounds(data: Any, *, lower: float, upper: float, clip: bool = False) -> LocalBounds:
    """Exact local bounds of the mean of ``n`` values in ``[lower, upper]`` under swaps (spec 001 §4.1).

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
    """Local bounds of a count under add/remove neighbours (spec 001 §4.1, §6.5).

    :math:`U_l = c + l` and :math:`L_l = \\max(c - l, 0)`. Beyond the public
    ``max_pieces`` the tail rule with global sensitivity 1 applies (spec
    §2.2, §2.7 (b), capped at 0 below (c)); PLM is then
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


# ----------------------------------------------------------------------------------------------------------------
# Black-box f, declared nondecreasing in every record (spec §4.2)


def _layer_masks(n: int, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep masks over ``n`` data rows + ``depth`` replacement rows: replace the set I (|I| <= depth)."""
    masks, sizes = [], []
    for j in range(depth + 1):
        for combo in itertools.combinations(range(n), j):
            keep = np.ones(n + depth, dtype=bool)
            keep[list(combo)] = False
            keep[n + j:] = False
            masks.append(keep)
            sizes.append(j)
    return np.asarray(masks), np.asarray(sizes)


def monotone_bounds(oracle_fn: Callable, data: Any, *, lower: float, upper: float, max_pieces: int,
                    clip: bool = False, max_queries: int | None = 10**6, chunk_size: int | None = None) -> LocalBounds:
    """Exact local bounds of a black-box ``f`` that is nondecreasing in every record (spec 001 §4.2).

    Under swaps on the domain :math:`[\\ell, u]`:

    .. math::
        U_l = \\max_{|I| \\le l} f(x_{I \\leftarrow u}), \\qquad
        L_l = \\min_{|I| \\le l} f(x_{I \\leftarrow \\ell}),

    because any :math:`x'` at distance :math:`\\le l` differs on some
    :math:`I` and is dominated by the replacement. The masks over the data
    plus ``max_pieces`` copies of the domain end are evaluated through
    :func:`gpuprivacy.oracle.evaluate` (the oracle sees only gathered rows),
    and ``U`` is the running max over layers. Level ``max_pieces + 1`` is
    the range end :math:`f(u, \\dots, u)` (public: the sup of a monotone
    ``f``; spec §2.7 (a)). Cost :math:`\\sum_{j \\le K} \\binom{n}{j}`
    evaluations per side.

    The declaration of monotonicity is the user's: a non-monotone ``f``
    makes these bounds invalid.

    Args:
      oracle_fn: ``f(rows, valid) -> scalar``, nondecreasing in each record.
      data: ``[n]`` or ``[n, 1]`` values in the domain.
      lower, upper: the public domain.
      max_pieces: public ``K``.
      clip: clip out-of-domain values instead of raising.
      max_queries: refuse more evaluations than this per side.
      chunk_size: passed to the evaluator.

    Examples:
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.monotone_bounds(oracle.median, [1.0, 2.0, 3.0], lower=0, upper=4, max_pieces=1)
      >>> b.upper.tolist(), b.lower.tolist()
      ([2.0, 3.0, 4.0], [2.0, 1.0, 0.0])
    """
    from gpuprivacy import oracle, subsets

    require_x64("monotone_bounds")
    lower, upper = check_domain(lower, upper)
    arr = np.asarray(check_data(data))
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    x = np.asarray(check_dataset(arr, lower, upper, clip))
    n = x.shape[0]
    K = check_int("max_pieces", max_pieces, minimum=1, maximum=n)
    total = sum(math.comb(n, j) for j in range(K + 1))
    if max_queries is not None and total > max_queries:
        raise ValueError(f"monotone_bounds needs {total} oracle evaluations per side for n={n}, max_pieces={K}, "
                         f"more than max_queries={max_queries}. Lower max_pieces (the rest is capped at the range "
                         "end, still valid) or raise max_queries.")
    masks, sizes = _layer_masks(n, K)
    family = subsets.from_keep_masks(masks, name=f"monotone replacements (n={n}, K={K})")
    results = []
    for end, reduce in ((upper, np.maximum), (lower, np.minimum)):
        augmented = np.concatenate([x, np.full(K, end)])
        values = np.asarray(oracle.evaluate(oracle_fn, augmented, family, chunk_size=chunk_size), np.float64)
        values = values.reshape(values.shape[0])
        layer = np.array([reduce.reduce(values[sizes == j]) for j in range(K + 1)])
        extreme = np.asarray(oracle.evaluate(oracle_fn, np.full(n, end),
                                             subsets.from_keep_masks(np.ones((1, n), bool))), np.float64).ravel()
        layer = np.concatenate([reduce.accumulate(layer), reduce(layer[-1:], extreme)])
        # Untrusted oracle values: NaN would break the family; map it to the range end (documented).
        results.append(np.where(np.isnan(layer), extreme[0], layer))
    up, low = results
    if not (np.all(np.isfinite(up)) and np.all(np.isfinite(low))):
        raise ValueError("oracle_fn returned a non-finite value on the domain ends; monotone bounds need a finite "
                         "range.")
    zero = jnp.zeros((), jnp.float64)
    return LocalBounds(jnp.asarray(up), jnp.asarray(low), zero, zero, jnp.asarray(up[-1]), jnp.asarray(low[-1]))


# ----------------------------------------------------------------------------------------------------------------
# Generic black-box f over a finite universe (spec §4.3 (i))


def _histogram_rows(universe: np.ndarray, hist: np.ndarray, n: int) -> np.ndarray:
    return np.repeat(universe, hist)[:n]


def finite_universe_bounds(fn: Callable[[np.ndarray], float], histogram: Any, *, universe: Any,
                           max_pieces: int | None = None, range_limits: tuple[float, float] | None = None,
                           max_states: int = 10**6) -> LocalBounds:
    """Exact local bounds of an arbitrary ``f`` over a finite universe, by ball enumeration (spec 001 §4.3 (i)).

    Datasets are histograms :math:`h \\in \\mathbb{N}^{|G|}` with ``n =
    sum(h)`` records (swap neighbours: move one record between two bins).
    Layer ``l`` of the ball is the set of histograms at distance exactly
    ``l``, built from layer ``l-1`` by all single swaps and de-duplicated;
    :math:`U_l` is the running max of ``f`` over the layers. The enumeration
    stops at the public ``max_pieces`` (or when the ball is the whole space);
    if it stops early, ``range_limits`` -- the public, certified range of
    ``f`` over all datasets of size n -- closes the family (spec §2.7 (a)).

    This is exponential in ``max_pieces``; for a continuous universe no
    finite number of black-box queries gives exact bounds, so use
    :func:`make_local_bounds` with certified bounds or the approximate
    variants instead.

    Args:
      fn: ``f(rows) -> float`` on a sorted 1-D array of ``n`` universe values.
      histogram: ``int[|G|]`` counts of the dataset.
      universe: ``float[|G|]`` the universe values (sorted, distinct).
      max_pieces: public ``K`` (default: until the ball covers everything).
      range_limits: ``(inf f, sup f)`` (public), required if ``K < n``.
      max_states: refuse balls larger than this.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.finite_universe_bounds(lambda r: float(np.max(r)), [1, 1, 0], universe=[0.0, 1.0, 2.0])
      >>> b.upper.tolist(), b.lower.tolist()
      ([1.0, 2.0, 2.0], [1.0, 0.0, 0.0])
    """
    require_x64("finite_universe_bounds")
    universe = np.asarray(universe, np.float64)
    hist = np.asarray(histogram)
    if universe.ndim != 1 or hist.shape != universe.shape:
        raise ValueError(f"histogram and universe must be 1-D of the same length, got {hist.shape} and "
                         f"{universe.shape}.")
    if not np.all(np.isfinite(universe)) or np.any(np.diff(universe) <= 0):
        raise ValueError("universe must hold finite, strictly increasing values.")
    if hist.dtype.kind not in "iu" or np.any(hist < 0) or hist.sum() < 1:
        raise ValueError(f"histogram must hold nonnegative integer counts with a positive total, got {histogram!r}.")
    n, g = int(hist.sum()), universe.shape[0]
    K = n if max_pieces is None else check_int("max_pieces", max_pieces, minimum=1)
    if K < n and range_limits is None:
        raise ValueError(f"finite_universe_bounds stops at max_pieces={K} < n={n}, so it needs range_limits=(inf f, "
                         "sup f): the public, certified range of f over all datasets of this size. Without it the "
                         "family would be truncated at K, which is not a valid bound (spec 001 §2.7).")
    value = lambda h: float(fn(_histogram_rows(universe, h, n)))
    f0 = value(hist)
    if not math.isfinite(f0):
        raise ValueError(f"fn returned {f0!r} on the dataset; it must be finite.")
    seen = {hist.tobytes()}
    layer = [hist.astype(np.int64)]
    ups, lows = [f0], [f0]
    moves = [(i, j) for i in range(g) for j in range(g) if i != j]
    for _ in range(min(K, n)):
        nxt = []
        for h in layer:
            for i, j in moves:
                if h[i] == 0:
                    continue
                h2 = h.copy()
                h2[i] -= 1
                h2[j] += 1
                key = h2.tobytes()
                if key not in seen:
                    seen.add(key)
                    nxt.append(h2)
            if len(seen) > max_states:
                raise ValueError(f"the ball has more than max_states={max_states} datasets; lower max_pieces and "
                                 "give range_limits, or certify bounds yourself (make_local_bounds).")
        values = [value(h) for h in nxt] or [ups[-1]]
        if not all(math.isfinite(v) for v in values):
            raise ValueError("fn returned a non-finite value on a dataset in the ball; it must be finite.")
        ups.append(max(ups[-1], max(values)))
        lows.append(min(lows[-1], min(values)))
        layer = nxt
    if K < n:
        lo_limit, hi_limit = (check_finite_real("range_limits[0]", range_limits[0]),
                              check_finite_real("range_limits[1]", range_limits[1]))
        if lo_limit > lows[-1] or hi_limit < ups[-1]:
            raise ValueError(f"range_limits={range_limits} do not contain the values of f found in the ball "
                             f"([{lows[-1]}, {ups[-1]}]); they are not a certified range.")
        ups.append(hi_limit)
        lows.append(lo_limit)
    zero = jnp.zeros((), jnp.float64)
    return LocalBounds(jnp.asarray(ups), jnp.asarray(lows), zero, zero, jnp.asarray(ups[-1]), jnp.asarray(lows[-1]))


def generic_blackbox_bounds(*args, **kwargs):
    """Refuses: exact local bounds of a generic black-box ``f`` over a continuous universe are not computable.

    Raises:
      ValueError: always, saying why and what to use instead (spec 001 §4.3).
    """
    raise ValueError(
        "exact local bounds of a generic black-box f need the sup and inf of f over every dataset within distance "
        "l, including swaps with arbitrary universe points; over a continuous universe no finite set of black-box "
        "queries gives them, and removal-only subsets, greedy or sampled searches give LOWER bounds that break "
        "privacy (spec 001 §4.3, §7 pitfall 2). Use quantile_bounds/clipped_mean_bounds/count_bounds (closed "
        "forms), monotone_bounds (f nondecreasing in every record), finite_universe_bounds (finite universe), "
        "make_local_bounds with bounds you certify, or the approximate variant with a certified local-sensitivity "
        "bound.")


def check_local_bounds_neighbours(bounds_fn: Callable[[Any], LocalBounds], pairs) -> list[tuple[int, int, str]]:
    """Property test of condition (V2) of spec 001 §2.7 on neighbouring pairs (spec §6.8 (d)).

    For each ``(x, x')`` in ``pairs`` checks, in both directions and for every
    level (the tail rule included, 3 levels past K),
    :math:`U(x;l) \\le U(x';l+1)` and :math:`L(x;l) \\ge L(x';l+1)`.

    Returns:
      ``(pair index, level, side)`` for every violation (empty if none).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> fn = lambda x: io.median_bounds(x, lower=0, upper=10)
      >>> io.check_local_bounds_neighbours(fn, [([1.0, 2.0, 3.0], [1.0, 2.0, 9.0])])
      []
    """
    violations = []
    for index, (x, x_prime) in enumerate(pairs):
        for first, second in ((x, x_prime), (x_prime, x)):
            b1, b2 = bounds_fn(first), bounds_fn(second)
            levels = max(np.shape(b1.upper)[-1], np.shape(b2.upper)[-1]) + 3
            for side, sign in (("upper", 1.0), ("lower", -1.0)):
                e1 = extended_bounds(b1, levels, side)
                e2 = extended_bounds(b2, levels + 1, side)
                bad = np.flatnonzero(sign * (e1 - e2[1:]) > 1e-12 * (1 + np.abs(e1)))
                violations.extend((index, int(level), side) for level in bad)
    return violations


def extended_bounds(bounds: LocalBounds, levels: int, side: str) -> np.ndarray:
    """``U_0..U_{levels-1}`` (or ``L``) with the tail rule of :class:`LocalBounds` applied past K."""
    if side == "upper":
        values, step, limit, sign = np.asarray(bounds.upper), float(bounds.upper_step), float(bounds.upper_limit), 1.0
    else:
        values, step, limit, sign = np.asarray(bounds.lower), float(bounds.lower_step), float(bounds.lower_limit), -1.0
    K = values.shape[0] - 1
    out = np.empty(levels)
    for level in range(levels):
        if level <= K:
            out[level] = values[level]
        else:
            moved = values[-1] + sign * step * (level - K)
            out[level] = min(moved, limit) if sign > 0 else max(moved, limit)
    return out
