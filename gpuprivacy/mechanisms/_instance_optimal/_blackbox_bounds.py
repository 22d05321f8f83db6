"""Exact local bounds of black-box statistics (Durfee 2025, Sec. 3.1; see docs/errata.md).

* ``f`` declared nondecreasing in every record: exact bounds by enumerating the masks that
  replace at most ``l`` records by the domain end, through the oracle evaluator and the
  subset engine (§4.2, :func:`monotone_bounds`).
* Generic ``f``: only over a finite universe (exact ball enumeration by layers, §4.3 (i),
  :func:`finite_universe_bounds`) or with user-certified bounds (§4.3 (ii),
  :func:`make_local_bounds`); anything else is refused (:func:`generic_blackbox_bounds`),
  because removal-only subsets, greedy or sampled searches give *lower* bounds of the true
  sup and break privacy (see docs/errata.md).

Neighbours are **swaps** (n public); beyond the public cut-off ``K`` the bounds jump to the
public range limit (Durfee 2025, Sec. 5.2).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_data, check_finite_real, check_int
from gpuprivacy._config import require_x64
from gpuprivacy.mechanisms._instance_optimal._dataset_checks import check_dataset, check_domain
from gpuprivacy.mechanisms._instance_optimal._local_bounds_type import LocalBounds


# ----------------------------------------------------------------------------------------------------------------
# Black-box f, declared nondecreasing in every record


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
    """Exact local bounds of a black-box ``f`` that is nondecreasing in every record.

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
    ``f``; Durfee 2025, Sec. 5.2). Cost :math:`\\sum_{j \\le K} \\binom{n}{j}`
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
# Generic black-box f over a finite universe


def _histogram_rows(universe: np.ndarray, hist: np.ndarray, n: int) -> np.ndarray:
    return np.repeat(universe, hist)[:n]


def finite_universe_bounds(fn: Callable[[np.ndarray], float], histogram: Any, *, universe: Any,
                           max_pieces: int | None = None, range_limits: tuple[float, float] | None = None,
                           max_states: int = 10**6) -> LocalBounds:
    """Exact local bounds of an arbitrary ``f`` over a finite universe, by ball enumeration.

    Datasets are histograms :math:`h \\in \\mathbb{N}^{|G|}` with ``n =
    sum(h)`` records (swap neighbours: move one record between two bins).
    Layer ``l`` of the ball is the set of histograms at distance exactly
    ``l``, built from layer ``l-1`` by all single swaps and de-duplicated;
    :math:`U_l` is the running max of ``f`` over the layers. The enumeration
    stops at the public ``max_pieces`` (or when the ball is the whole space);
    if it stops early, ``range_limits`` -- the public, certified range of
    ``f`` over all datasets of size n -- closes the family (Durfee 2025, Sec. 5.2).

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
                         "family would be truncated at K, which is not a valid bound (Durfee 2025, Sec. 5.2; "
                         "see docs/errata.md).")
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
      ValueError: always, saying why and what to use instead (see docs/errata.md).
    """
    raise ValueError(
        "exact local bounds of a generic black-box f need the sup and inf of f over every dataset within distance "
        "l, including swaps with arbitrary universe points; over a continuous universe no finite set of black-box "
        "queries gives them, and removal-only subsets, greedy or sampled searches give LOWER bounds that break "
        "privacy (see docs/errata.md). Use quantile_bounds/clipped_mean_bounds/count_bounds (closed "
        "forms), monotone_bounds (f nondecreasing in every record), finite_universe_bounds (finite universe), "
        "make_local_bounds with bounds you certify, or the approximate variant with a certified local-sensitivity "
        "bound.")
