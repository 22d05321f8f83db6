"""The optimal private median (seed 003): routing, the log-space piece sampler and the public API.

Tzamos, Vlatakis-Gkaragkounis & Zadik, `Optimal Private Median Estimation under Minimal
Distributional Assumptions <https://arxiv.org/abs/2011.06202>`_, NeurIPS 2020, eq. (3.6),
Prop. 2.1/A.5, Lemma 4.2, Algorithm 7; implemented as spec 003 Sec. 2.6.

Every release samples the general density (3.6). The paper's Case-A shortcut (return the
flattened Laplace whenever X is typical) is *not* used: it is not private in the worst case
(spec Sec. 0 item 2, Sec. 5.1). Route per data set (decided by the data, never by the key):

1. the certified fast path (spec 2.6.6): when the certificate proves that row 0 dominates every
   other row, (3.6) *is* the flattened Laplace at the median and the piece table has one row;
2. otherwise the full computation with at most ``max_rows`` Pareto rows;
3. if more rows survive (overflow), the same computation with ``full_rows`` rows, always enough.

All three produce the same density, so the route affects only the running time.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_data, check_int, check_key, is_tracer
from gpuprivacy._typing import Array, Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._median._config import MedianConfig, median_config
from gpuprivacy.mechanisms._median._density import (
    PieceTable,
    certificate,
    compact_rows,
    hull_rows,
    pareto_keep,
    piece_table,
    snap,
)
from gpuprivacy.mechanisms._release import Release

ROUTE_FAST, ROUTE_CAPPED, ROUTE_OVERFLOW = 0, 1, 2
ROUTE_NAMES = ("certified-fast-path", "full", "full-overflow")


class PrivateMedianInfo(NamedTuple):
    """Info of :func:`private_median`.

    Attributes:
      scale: Laplace scale sigma = 12C/(L n epsilon) of the central part (public).
      support: B = R + 4Cr; the release lies in [-B, B] (public).
      num_windows: K (public).
      nonprivate_route: 0 certified fast path, 1 full computation, 2 overflow route (data-dependent).
      nonprivate_num_rows: number of Pareto rows P of the envelope.
      nonprivate_distance: k0 = the smallest k with a nonempty sub-level set (0 iff X is in H).
      nonprivate_median: the (snapped) empirical median X_(l).
    """

    scale: Array
    support: Array
    num_windows: Array
    nonprivate_route: Array
    nonprivate_num_rows: Array
    nonprivate_distance: Array
    nonprivate_median: Array


def _single_row_table(s, cfg):
    m = s[cfg.median_index - 1]
    zero = jnp.zeros((1,), jnp.int64)
    return piece_table(zero, m[None], m[None], jnp.ones((1,), bool), m, cfg)


def _full_table(s, cfg, size):
    exists, lo, hi = hull_rows(s, cfg)
    keep, k0 = pareto_keep(exists, lo, hi, cfg)
    index, rows_lo, rows_hi, valid, count = compact_rows(keep, lo, hi, size)
    table = piece_table(index.astype(jnp.int64), rows_lo, rows_hi, valid, s[cfg.median_index - 1], cfg)
    return table, count, k0


def sample_pieces(key, table: PieceTable, cfg: MedianConfig):
    """Algorithm 7 in log space (spec 2.6.4): the piece by inverse CDF on the cumulative log-masses
    (``lax.cumlogsumexp``; trailing padding with -inf mass never changes the draw), then the
    truncated-exponential inverse CDF inside the piece (mirrored for positive slopes).

    Returns the release in data units.
    """
    piece_key, inner_key = jax.random.split(key)
    log_cdf = jax.lax.cumlogsumexp(table.log_mass)
    target = jnp.log(jax.random.uniform(piece_key, dtype=jnp.float64, minval=jnp.finfo(jnp.float64).tiny)) + log_cdf[-1]
    index = jnp.minimum(jnp.searchsorted(log_cdf, target, side="left").astype(jnp.int64), table.log_mass.shape[0] - 1)
    left, length, slope = table.left[index], table.length[index], table.slope[index]
    u = jax.random.uniform(inner_key, dtype=jnp.float64)
    magnitude = jnp.abs(slope)
    uniform = magnitude * length < 1e-12
    safe = jnp.where(uniform, 1.0, magnitude)
    offset = jnp.where(uniform, u * length, jnp.log1p(u * jnp.expm1(-safe * length)) / -safe)
    t = jnp.where(slope > 0, left + length - offset, left + offset)
    return (table.center.astype(jnp.float64) + t) * cfg.unit


# Largest overflow table kept inside one traced kernel (under a user's vmap/jit, where the host
# cannot route); beyond it, tracing raises a parameter-only error that points to private_median_trials.
TRACED_OVERFLOW_ROWS = 2048


def _route_tables(s, cfg, include_overflow):
    """(route, table, P, k0); the routes as conds (a select under vmap).

    Tables are padded at the end; padding has -inf mass and does not change the draw, so every
    route and the batched driver (unpadded tables) give the same values for the same keys.
    """
    size = cfg.full_rows if include_overflow else cfg.max_rows

    def fast_branch(s):
        return _pad_table(_single_row_table(s, cfg), size), jnp.int64(1), jnp.int64(0)

    def slow_branch(s):
        table, count, k0 = _full_table(s, cfg, cfg.max_rows)
        if not include_overflow:
            return table, count, k0
        return jax.lax.cond(count > cfg.max_rows, lambda _: _full_table(s, cfg, size),
                            lambda _: (_pad_table(table, size), count, k0), None)

    fast = certificate(s, cfg)
    table, count, k0 = jax.lax.cond(fast, fast_branch, slow_branch, s)
    route = jnp.where(fast, ROUTE_FAST, jnp.where(count > cfg.max_rows, ROUTE_OVERFLOW, ROUTE_CAPPED))
    return route, table, count, k0


def _pad_table(table, size):
    extra = 4 * (3 * size + 1) - table.left.shape[0]
    if extra == 0:
        return table
    fills = dict(left=0.0, length=0.0, log_left=-jnp.inf, slope=0.0, log_mass=-jnp.inf)
    return table._replace(**{name: jnp.concatenate([getattr(table, name), jnp.full((extra,), value)])
                             for name, value in fills.items()})


@functools.partial(jax.jit, static_argnames=("cfg", "include_overflow"))
def _private_median(key, data, cfg: MedianConfig, include_overflow: bool):
    s = snap(data, cfg)
    route, table, count, k0 = _route_tables(s, cfg, include_overflow)
    return sample_pieces(key, table, cfg), _info(s, route, count, k0, cfg)


def _info(s, route, count, k0, cfg):
    return PrivateMedianInfo(
        scale=jnp.float64(cfg.scale), support=jnp.float64(cfg.support), num_windows=jnp.int64(cfg.num_windows),
        nonprivate_route=jnp.asarray(route).astype(jnp.int64), nonprivate_num_rows=jnp.asarray(count).astype(jnp.int64),
        nonprivate_distance=jnp.asarray(k0).astype(jnp.int64),
        nonprivate_median=s[cfg.median_index - 1].astype(jnp.float64) * cfg.unit)


def _kernel_config(cfg):
    """The host-routed kernels take the row cap as a static argument, so it is not part of their cache key."""
    return dataclasses.replace(cfg, max_rows=1)


def _check_median_data(data):
    data = check_data(data)
    if not is_tracer(data) and data.ndim != 1:
        raise ValueError(f"data must be a vector of n real records, got shape {data.shape}. "
                         "Use jax.vmap or private_median_trials for batches.")
    return data


def private_median(key: Key, data, *, epsilon: float, min_density: float, radius: float, median_bound: float,
                   constant: float = 6.0, median_index: str = "ceil", grid_resolution: int = 256,
                   max_rows: int = 64) -> Release:
    """Optimal pure-DP median under minimal assumptions (Tzamos et al. 2020, eq. 3.6).

    Samples the general density (3.6), the extension of the flattened Laplace (3.4) from the
    typical set H to every data set:

    .. math::

        f(\\omega \\mid X) \\propto \\exp\\Big(\\min_{X' \\in H}\\Big[\\tfrac{\\varepsilon}{2} d_H(X, X')
            - \\tfrac{\\varepsilon}{4}\\min\\{a\\,|m(X') - \\omega|, b\\}\\Big]\\Big),\\quad
        \\omega \\in [-B, B],

    with :math:`a = Ln/(3C)`, :math:`b = Lrn`, :math:`B = R + 4Cr`. For every data set it is
    :math:`\\varepsilon`-DP under replacement of one record (Prop. A.5, first half; it needs no
    property of the restricted mechanism). Computed exactly in closed form (spec 003 Sec. 2.6):
    closed-form TypicalHamming, sub-level hulls, Pareto pruning, min-plus envelope, log-space piece
    sampler. The certified fast path returns the flattened Laplace only when it provably *equals*
    (3.6); the paper's Case-A shortcut is not used because it is not private (spec Sec. 0, 5.1).

    Records are snapped to the lattice of spacing ``delta/Q`` (``delta = C/(Ln)``), a record-wise map,
    so all window and rank comparisons are exact integer comparisons (spec Sec. 5.2). Records far
    outside ``[-R, R]`` are legal (the model allows unbounded support); they are clipped to
    ``R + r/2 + (K+2) delta``, which leaves the output distribution unchanged (spec Sec. 5.3).

    Accuracy: the rate of Theorem 3.1 is proved for :math:`C > 104.31` (Lemma B.3; spec Sec. 0
    item 5) with :math:`\\varepsilon < 1`; privacy holds for every :math:`C > 0` and
    :math:`\\varepsilon > 0`. The default ``C = 6`` is a practical choice (accuracy measured by
    simulation, ``gpuprivacy reproduce seed003``). Idealized numerics: the log-density is exact up
    to float64 rounding of a continuous function of the (snapped) data.

    Args:
      key: a single PRNG key.
      data: vector of n finite real records.
      epsilon: privacy parameter (> 0).
      min_density: L, a lower bound on the data density on ``[m(D) - r, m(D) + r]``.
      radius: r, the half-width of that window; ``L r <= 1/2``.
      median_bound: R, the population median is assumed in ``[-R, R]``.
      constant: C > 0 (``delta = C/(Ln)``, ``K = floor(Lnr/(2C))``).
      median_index: "ceil" (``l = ceil(n/2)``, default) or "floor" (Def. A.2's ``floor(n/2)``).
      grid_resolution: Q, lattice points per ``delta`` (a power of two).
      max_rows: static cap on envelope rows in the first full pass; more rows take the overflow route.

    Returns:
      A :class:`Release` with the private median and a :class:`PrivateMedianInfo`.

    Raises:
      ValueError: for invalid parameters (see ``median_config``) or non-finite data.

    References:
      Tzamos, Vlatakis-Gkaragkounis & Zadik, `Optimal Private Median Estimation under Minimal
      Distributional Assumptions <https://arxiv.org/abs/2011.06202>`_, NeurIPS 2020, eq. (3.6), Thm 3.1.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy.mechanisms import median
      >>> data = np.asarray(jax.random.uniform(jax.random.key(1), (2000,), minval=-1.0, maxval=1.0))
      >>> out = median.private_median(jax.random.key(0), data, epsilon=1.0, min_density=0.5, radius=1.0,
      ...                             median_bound=10.0)
      >>> bool(abs(out.value) < 0.2), int(out.info.nonprivate_route)
      (True, 0)
    """
    key = check_key(key)
    data = _check_median_data(data)
    cfg = median_config(np.shape(data)[0], epsilon=epsilon, min_density=min_density, radius=radius,
                        median_bound=median_bound, constant=constant, median_index=median_index,
                        grid_resolution=grid_resolution, max_rows=max_rows)
    data = jnp.asarray(data, jnp.float64)
    if is_tracer(data) or is_tracer(key):
        if cfg.full_rows > TRACED_OVERFLOW_ROWS:
            raise ValueError(
                f"private_median under jax.vmap/jit keeps its overflow route inside the kernel, which is limited "
                f"to {TRACED_OVERFLOW_ROWS} envelope rows; these parameters need up to {cfg.full_rows} "
                f"(ceil(L r n/2) + 1). Use private_median_trials for batches, or call private_median eagerly.")
        value, info = _private_median(key, data, cfg, True)
        return Release(value, info)
    # Eager: route on the host (spec 2.6.5), so only the kernels this data set needs are compiled.
    max_rows, cfg = cfg.max_rows, _kernel_config(cfg)
    s, fast = _snap_and_certify(data[None, :], cfg)
    if bool(fast[0]):
        value = _fast_values(key[None], s, cfg)[0]
        route, count, k0 = ROUTE_FAST, 1, 0
    else:
        value, count, k0 = (a[0] for a in _full_values(key[None], s, cfg, max_rows))
        route = ROUTE_CAPPED
        if int(count) > max_rows:
            # Overflow route (spec 2.6.5 step 4): the same density with room for every surviving row.
            value, count, k0 = (a[0] for a in _full_values(key[None], s, cfg, cfg.full_rows))
            route = ROUTE_OVERFLOW
    return Release(value, _info(s[0], jnp.int64(route), jnp.int64(count), jnp.int64(k0), cfg))


def private_median_guarantee(*, epsilon: float, **_params) -> PureDP:
    """Pure epsilon-DP under replacement of one record, for every C > 0 (Prop. A.5, first half)."""
    from gpuprivacy._checks import check_epsilon
    return PureDP(epsilon=check_epsilon(epsilon))


# --- batched trials with host-side routing --------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("cfg",))
def _snap_and_certify(data, cfg):
    s = jax.vmap(lambda x: snap(x, cfg))(data)
    return s, jax.vmap(lambda x: certificate(x, cfg))(s)


@functools.partial(jax.jit, static_argnames=("cfg",))
def _fast_values(keys, s, cfg):
    return jax.vmap(lambda k, x: sample_pieces(k, _single_row_table(x, cfg), cfg))(keys, s)


@functools.partial(jax.jit, static_argnames=("cfg", "size"))
def _full_values(keys, s, cfg, size):
    def one(k, x):
        table, count, k0 = _full_table(x, cfg, size)
        return sample_pieces(k, table, cfg), count, k0
    return jax.vmap(one)(keys, s)


def _bucketed_full_values(keys, s, index, cfg, size):
    """The full route for the trials ``index``, padded to a power-of-two count (few recompilations)."""
    bucket = 1 << (int(index.size) - 1).bit_length()
    padded = np.concatenate([index, np.full(bucket - index.size, index[0])])
    out = _full_values(keys[padded], s[padded], cfg, size)
    return tuple(np.asarray(a)[:index.size] for a in out)


class PrivateMedianTrials(NamedTuple):
    """Result of :func:`private_median_trials` (per-trial arrays; routes and rows are non-private)."""

    values: np.ndarray
    nonprivate_route: np.ndarray
    nonprivate_num_rows: np.ndarray
    nonprivate_distance: np.ndarray
    overflow_rate: float
    fast_path_rate: float


def private_median_trials(key: Key, data, *, epsilon: float, min_density: float, radius: float,
                          median_bound: float, constant: float = 6.0, median_index: str = "ceil",
                          grid_resolution: int = 256, max_rows: int = 64) -> PrivateMedianTrials:
    """Runs :func:`private_median` on each row of ``data`` [T, n], routing trials on the host.

    Trial ``i`` uses ``jax.random.split(key, T)[i]`` and gives exactly the release of
    ``private_median(keys[i], data[i], ...)`` (same routes, same pieces, same draws). Certified
    trials are sampled in one vmapped pass; only the others run the full computation, and only
    the overflow trials the large one. Each trial is epsilon-DP for its own data set; the
    route is a timing side channel only (document it before exposing timings).

    Returns:
      :class:`PrivateMedianTrials` with the values and the fast-path and overflow rates.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy.mechanisms import median
      >>> data = np.random.default_rng(0).uniform(-1.0, 1.0, (100, 400))
      >>> out = median.private_median_trials(jax.random.key(0), data, epsilon=1.0, min_density=0.5, radius=1.0,
      ...                                    median_bound=10.0)
      >>> out.values.shape, out.overflow_rate
      ((100,), 0.0)
    """
    key = check_key(key)
    data = check_data(data)
    if data.ndim != 2:
        raise ValueError(f"data must be [num_trials, n], got shape {data.shape}.")
    cfg = median_config(data.shape[1], epsilon=epsilon, min_density=min_density, radius=radius,
                        median_bound=median_bound, constant=constant, median_index=median_index,
                        grid_resolution=grid_resolution, max_rows=max_rows)
    num_trials = check_int("num_trials", data.shape[0], minimum=1)
    max_rows, cfg = cfg.max_rows, _kernel_config(cfg)
    keys = jax.random.split(key, num_trials)
    s, fast = _snap_and_certify(jnp.asarray(data, jnp.float64), cfg)
    fast = np.asarray(fast)
    values = np.array(_fast_values(keys, s, cfg))
    route = np.where(fast, ROUTE_FAST, ROUTE_CAPPED)
    rows = np.ones(num_trials, np.int64)
    distance = np.zeros(num_trials, np.int64)
    slow = np.flatnonzero(~fast)
    if slow.size:
        v, count, k0 = _bucketed_full_values(keys, s, slow, cfg, max_rows)
        values[slow], rows[slow], distance[slow] = v, count, k0
        over = slow[count > max_rows]
        if over.size:
            v, count, k0 = _bucketed_full_values(keys, s, over, cfg, cfg.full_rows)
            values[over], rows[over], distance[over], route[over] = v, count, k0, ROUTE_OVERFLOW
    return PrivateMedianTrials(values=values, nonprivate_route=route, nonprivate_num_rows=rows,
                               nonprivate_distance=distance, overflow_rate=float(np.mean(route == ROUTE_OVERFLOW)),
                               fast_path_rate=float(np.mean(fast)))
