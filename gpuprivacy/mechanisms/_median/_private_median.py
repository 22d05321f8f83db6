"""The optimal private median (Tzamos et al. 2020): routing, the log-space piece sampler and the public API.

Tzamos, Vlatakis-Gkaragkounis & Zadik, `Optimal Private Median Estimation under Minimal
Distributional Assumptions <https://arxiv.org/abs/2011.06202>`_, NeurIPS 2020, eq. (3.6),
Prop. 2.1/A.5, Lemma 4.2, Algorithm 7; implemented by our exact closed form of (3.6).

Every release samples the general density (3.6). The paper's Case-A shortcut (return the
flattened Laplace whenever X is typical) is *not* used: it is not private in the worst case
(Lemma 3.2 of the paper fails; see docs/errata.md). Route per data set (decided by the data, never by the key):

1. the certified fast path (ours; see docs/errata.md): when the certificate proves that row 0 dominates every
   other row, (3.6) *is* the flattened Laplace at the median and the piece table has one row;
2. otherwise the full computation with at most ``max_rows`` Pareto rows;
3. if more rows survive (overflow), the same computation with ``full_rows`` rows, always enough.

All three produce the same density, so the route affects only the running time.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import (
    check_data,
    check_epsilon,
    check_int,
    check_key,
    check_positive,
    check_rows_in_domain,
    is_tracer,
)
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
from gpuprivacy.mechanisms._common import check_bool, concrete
from gpuprivacy.mechanisms._piecewise_sampler import sample_piecewise
from gpuprivacy.mechanisms._release import Release, batched_trials, stated_guarantee

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


def _single_row_table(s, cfg, epsilon):
    m = s[cfg.median_index - 1]
    zero = jnp.zeros((1,), jnp.int64)
    return piece_table(zero, m[None], m[None], jnp.ones((1,), bool), m, cfg, epsilon)


def _full_rows(s, cfg, size):
    """The envelope's Pareto rows ``(k, lo, hi, valid)`` padded to ``size``, their count and k0."""
    exists, lo, hi = hull_rows(s, cfg)
    (k, lo, hi, keep), k0 = pareto_keep(exists, lo, hi, cfg)
    index, rows_lo, rows_hi, valid, count = compact_rows(keep, lo, hi, size)
    return (k[index], rows_lo, rows_hi, valid), count, k0


def _full_table(s, cfg, size, epsilon):
    rows, count, k0 = _full_rows(s, cfg, size)
    return piece_table(*rows, s[cfg.median_index - 1], cfg, epsilon), count, k0


def sample_pieces(key, table: PieceTable, cfg: MedianConfig):
    """Algorithm 7 in log space (Tzamos et al. 2020, Algorithm 7), by the shared exact piece sampler.

    :func:`gpuprivacy.mechanisms._piecewise_sampler.sample_piecewise`: the piece by inverse CDF on
    the log-masses shifted by their maximum (trailing padding with -inf mass never changes
    the draw), then the truncated-exponential inverse CDF inside the piece, started at the piece's
    higher end (mirrored for positive slopes).

    Returns the release in data units.
    """
    rising = table.slope > 0
    start = jnp.where(rising, table.left + table.length, table.left)
    direction = jnp.where(rising, -1.0, 1.0)
    t, _ = sample_piecewise(key, table.log_mass, start, direction, table.length, jnp.abs(table.slope))
    return (table.center.astype(jnp.float64) + t) * cfg.unit


# Largest overflow table kept inside one traced kernel (under a user's vmap/jit, where the host
# cannot route); beyond it, tracing raises a parameter-only error that points to private_median_trials.
TRACED_OVERFLOW_ROWS = 2048


def _route_tables(s, cfg, include_overflow, epsilon):
    """(route, table, P, k0); the routes as conds (a select under vmap) over the envelope's rows.

    Each route gives rows padded to one size (the fast path: row 0 alone, the flattened Laplace at the median;
    padding rows are invalid), and one piece table is built from them after the conds: a program holds one copy
    of the table's code, not one per route. A table's pieces are those of its valid rows followed by pieces of
    zero length (-inf mass), which never change the draw, so every route and the batched driver (unpadded
    tables) give the same values for the same keys.
    """
    size = cfg.full_rows if include_overflow else cfg.max_rows
    median = s[cfg.median_index - 1]

    def pad_rows(rows):
        extra = size - rows[0].shape[0]
        if extra == 0:
            return rows
        return tuple(jnp.concatenate([a, jnp.zeros((extra,), a.dtype)]) for a in rows)

    def fast_branch(s):
        row = (jnp.zeros((1,), jnp.int64), median[None], median[None], jnp.ones((1,), bool))
        return pad_rows(row), jnp.int64(1), jnp.int64(0)

    def slow_branch(s):
        rows, count, k0 = _full_rows(s, cfg, cfg.max_rows)
        if not include_overflow or cfg.max_rows == cfg.full_rows:
            # No overflow when the cap already holds every row that can survive (``median_config`` caps
            # ``max_rows`` at ``full_rows``): the overflow pass would be dead code, compiled for nothing.
            return rows, count, k0
        return jax.lax.cond(count > cfg.max_rows, lambda _: _full_rows(s, cfg, size),
                            lambda _: (pad_rows(rows), count, k0), None)

    fast = certificate(s, cfg)
    rows, count, k0 = jax.lax.cond(fast, fast_branch, slow_branch, s)
    route = jnp.where(fast, ROUTE_FAST, jnp.where(count > cfg.max_rows, ROUTE_OVERFLOW, ROUTE_CAPPED))
    return route, piece_table(*rows, median, cfg, epsilon), count, k0


@functools.partial(jax.jit, static_argnames=("cfg", "include_overflow"))
def _private_median(key, data, epsilon, cfg: MedianConfig, include_overflow: bool):
    """(value, snapped data, route, rows, distance); ``cfg`` without its epsilon (:func:`_kernel_config`)."""
    s = snap(data, cfg)
    route, table, count, k0 = _route_tables(s, cfg, include_overflow, epsilon)
    return sample_pieces(key, table, cfg), s, route, count, k0


def _info(s, route, count, k0, cfg):
    return PrivateMedianInfo(
        scale=jnp.float64(cfg.scale), support=jnp.float64(cfg.support), num_windows=jnp.int64(cfg.num_windows),
        nonprivate_route=jnp.asarray(route).astype(jnp.int64), nonprivate_num_rows=jnp.asarray(count).astype(jnp.int64),
        nonprivate_distance=jnp.asarray(k0).astype(jnp.int64),
        nonprivate_median=s[cfg.median_index - 1].astype(jnp.float64) * cfg.unit)


def _kernel_config(cfg, *, max_rows=1):
    """The static configuration of the compiled kernels: ``cfg`` without what they take as arguments.

    Epsilon is a traced argument of every kernel (it only scales the log-density, :func:`piece_table`), so an
    epsilon grid compiles each kernel once per data size, not once per epsilon; ``None`` here makes any
    read of it inside a kernel an error. The host-routed kernels also take the row cap as a static
    argument (``max_rows=1``), so it is not part of their cache key either.
    """
    return dataclasses.replace(cfg, epsilon=None, max_rows=max_rows)


def _check_median_data(data):
    data = check_data(data)
    if not is_tracer(data) and data.ndim != 1:
        raise ValueError(f"data must be a vector of n real records, got shape {data.shape}. "
                         "For one dataset per trial use gpuprivacy.mechanisms.run_trials(private_median, key, "
                         "num_trials, data, batched_args=True, ...).")
    return data


def _check_median_domain(lower, upper):
    """The optional public domain of :func:`private_median`: real ends (infinite allowed), lower < upper."""
    ends = []
    for name, value in (("lower", lower), ("upper", upper)):
        if is_tracer(value):
            ends.append(value)
            continue
        arr = np.asarray(value) if not isinstance(value, (str, bytes)) else None
        if (arr is None or arr.shape != () or not np.issubdtype(arr.dtype, np.number)
                or isinstance(value, bool) or np.iscomplexobj(arr)):
            raise TypeError(f"{name} must be a real number (or +-inf for no bound), got {value!r}.")
        if np.isnan(arr):
            raise ValueError(f"{name} must not be NaN; pass a real number, or {'-' if name == 'lower' else ''}inf "
                             "for no bound.")
        ends.append(float(arr))
    lower, upper = ends
    if not is_tracer(lower) and not is_tracer(upper) and not lower < upper:
        raise ValueError(f"lower must be < upper, got lower={lower!r}, upper={upper!r}.")
    return lower, upper


def private_median(key: Key, data, *, epsilon: float, lower: float = -math.inf, upper: float = math.inf,
                   clip: bool = False, min_density: float, radius: float, median_bound: float,
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
    property of the restricted mechanism). Computed exactly in closed form (Tzamos et al. 2020, eq. (3.6)):
    closed-form TypicalHamming, sub-level hulls, Pareto pruning, min-plus envelope, log-space piece
    sampler. The certified fast path returns the flattened Laplace only when it provably *equals*
    (3.6); the paper's Case-A shortcut is not used because it is not private (see docs/errata.md).

    Records are snapped to the lattice of spacing ``delta/Q`` (``delta = C/(Ln)``), a record-wise map,
    so all window and rank comparisons are exact integer comparisons. Records far
    outside ``[-R, R]`` are legal (the model allows unbounded support); they are clipped to
    ``R + r/2 + (K+2) delta``, which leaves the output distribution unchanged.

    Accuracy: the rate of Theorem 3.1 is proved for :math:`C > 104.31` (Lemma B.3
    of the paper) with :math:`\\varepsilon < 1`; privacy holds for every :math:`C > 0` and
    :math:`\\varepsilon > 0`. The default ``C = 6`` is a practical choice (accuracy measured by
    simulation, ``gpuprivacy reproduce tzamos2020-private-median``). Idealized numerics: the log-density is exact up
    to float64 rounding of a continuous function of the (snapped) data.

    Args:
      key: a single PRNG key.
      data: vector of n finite real records.
      epsilon: privacy parameter (> 0).
      lower, upper: an optional public data domain (default ``-inf``/``+inf``: the model needs no
        bounded domain). With a finite end, records outside ``[lower, upper]`` raise a ValueError
        unless ``clip=True``, the rule shared by every private median.
      clip: clamp records outside ``[lower, upper]`` to it instead of raising (a record-wise map).
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
    concrete("epsilon", epsilon, "private_median")  # calibrated in Python
    key = check_key(key)
    data = _check_median_data(data)
    lower, upper = _check_median_domain(lower, upper)
    data = check_rows_in_domain(data, lower, upper, clip)
    cfg = median_config(np.shape(data)[0], epsilon=epsilon, min_density=min_density, radius=radius,
                        median_bound=median_bound, constant=constant, median_index=median_index,
                        grid_resolution=grid_resolution, max_rows=max_rows)
    guarantee = stated_guarantee(private_median_guarantee, epsilon=epsilon, lower=lower, upper=upper, clip=clip,
                                 min_density=min_density, radius=radius, median_bound=median_bound,
                                 constant=constant, median_index=median_index, grid_resolution=grid_resolution,
                                 max_rows=max_rows)
    data = jnp.asarray(data, jnp.float64)
    if is_tracer(data) or is_tracer(key):
        if cfg.full_rows > TRACED_OVERFLOW_ROWS:
            raise ValueError(
                f"private_median under jax.vmap/jit keeps its overflow route inside the kernel, which is limited "
                f"to {TRACED_OVERFLOW_ROWS} envelope rows; these parameters need up to {cfg.full_rows} "
                f"(ceil(L r n/2) + 1). Use private_median_trials for batches, or call private_median eagerly.")
        value, s, route, count, k0 = _private_median(key, data, jnp.float64(cfg.epsilon),
                                                     _kernel_config(cfg, max_rows=cfg.max_rows), True)
        return Release(value, _info(s, route, count, k0, cfg), guarantee)
    # Eager: route on the host, so only the kernels this data set needs are compiled.
    max_rows, kernel_cfg, eps = cfg.max_rows, _kernel_config(cfg), jnp.float64(cfg.epsilon)
    s, fast = _snap_and_certify(data[None, :], kernel_cfg)
    if bool(fast[0]):
        value = _fast_values(key[None], s, eps, kernel_cfg)[0]
        route, count, k0 = ROUTE_FAST, 1, 0
    else:
        value, count, k0 = (a[0] for a in _full_values(key[None], s, eps, kernel_cfg, max_rows))
        route = ROUTE_CAPPED
        if int(count) > max_rows:
            # Overflow route: the same density with room for every surviving row.
            value, count, k0 = (a[0] for a in _full_values(key[None], s, eps, kernel_cfg, cfg.full_rows))
            route = ROUTE_OVERFLOW
    return Release(value, _info(s[0], jnp.int64(route), jnp.int64(count), jnp.int64(k0), cfg), guarantee)


def private_median_guarantee(*, epsilon: float, lower: float = -math.inf, upper: float = math.inf,
                             clip: bool = False, min_density: float, radius: float, median_bound: float,
                             constant: float = 6.0, median_index: str = "ceil", grid_resolution: int = 256,
                             max_rows: int = 64) -> PureDP:
    """Pure epsilon-DP under replacement of one record, for every C > 0 (Prop. A.5, first half).

    Takes exactly the mechanism's parameters (``private_median_guarantee(**params)``), required
    where :func:`private_median` requires them, and validates those that do not need ``n``; the
    guarantee itself depends on ``epsilon`` only.
    """
    epsilon = check_epsilon(epsilon)
    _check_median_domain(lower, upper)
    check_bool("clip", clip)
    check_positive("min_density (L)", min_density)
    check_positive("radius (r)", radius)
    check_positive("median_bound (R)", median_bound)
    check_positive("constant (C)", constant)
    check_int("grid_resolution", grid_resolution, minimum=1)
    check_int("max_rows", max_rows, minimum=1)
    if median_index not in ("ceil", "floor"):
        raise ValueError(f"median_index must be one of ('ceil', 'floor'), got {median_index!r}.")
    return PureDP(epsilon=epsilon)


# --- batched trials with host-side routing --------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("cfg",))
def _snap_and_certify(data, cfg):
    s = jax.vmap(lambda x: snap(x, cfg))(data)
    return s, jax.vmap(lambda x: certificate(x, cfg))(s)


@functools.partial(jax.jit, static_argnames=("cfg",))
def _fast_values(keys, s, epsilon, cfg):
    return jax.vmap(lambda k, x: sample_pieces(k, _single_row_table(x, cfg, epsilon), cfg))(keys, s)


@functools.partial(jax.jit, static_argnames=("cfg", "size"))
def _full_values(keys, s, epsilon, cfg, size):
    def one(k, x):
        table, count, k0 = _full_table(x, cfg, size, epsilon)
        return sample_pieces(k, table, cfg), count, k0
    return jax.vmap(one)(keys, s)


def _bucketed_full_values(keys, s, index, epsilon, cfg, size):
    """The full route for the trials ``index``, padded to a power-of-two count (few recompilations)."""
    bucket = 1 << (int(index.size) - 1).bit_length()
    padded = np.concatenate([index, np.full(bucket - index.size, index[0])])
    out = _full_values(keys[padded], s[padded], epsilon, cfg, size)
    return tuple(np.asarray(a)[:index.size] for a in out)


class PrivateMedianTrials(NamedTuple):
    """Result of :func:`private_median_trials` (per-trial arrays; routes and rows are non-private)."""

    values: np.ndarray
    nonprivate_route: np.ndarray
    nonprivate_num_rows: np.ndarray
    nonprivate_distance: np.ndarray
    overflow_rate: float
    fast_path_rate: float


def private_median_trials(key: Key, data, *, epsilon: float, lower: float = -math.inf, upper: float = math.inf,
                          clip: bool = False, min_density: float, radius: float, median_bound: float,
                          constant: float = 6.0, median_index: str = "ceil", grid_resolution: int = 256,
                          max_rows: int = 64) -> PrivateMedianTrials:
    """Runs :func:`private_median` on each row of ``data`` [T, n], routing trials on the host.

    Kept for existing scripts; new code can write ``mechanisms.run_trials(median.private_median,
    key, T, data, batched_args=True, **params)``, which runs this same host-routed driver (the
    ``run_trials`` hook of :func:`private_median`) and returns a :class:`Release` with the same values.

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
    num_trials = check_int("num_trials", data.shape[0], minimum=1)
    keys = jax.random.split(key, num_trials)
    values, route, rows, distance, fast, _, _ = _host_routed_trials(
        keys, data, epsilon=epsilon, lower=lower, upper=upper, clip=clip, min_density=min_density, radius=radius,
        median_bound=median_bound, constant=constant, median_index=median_index, grid_resolution=grid_resolution,
        max_rows=max_rows)
    return PrivateMedianTrials(values=values, nonprivate_route=route, nonprivate_num_rows=rows,
                               nonprivate_distance=distance, overflow_rate=float(np.mean(route == ROUTE_OVERFLOW)),
                               fast_path_rate=float(np.mean(fast)))


def _host_routed_trials(keys, data, *, epsilon, lower=-math.inf, upper=math.inf, clip=False, min_density, radius,
                        median_bound, constant=6.0, median_index="ceil", grid_resolution=256, max_rows=64):
    """The batched driver: ``data`` [T, n] (checked finite), ``keys`` [T]; trial i is ``private_median(keys[i], data[i])``.

    Returns ``(values, route, rows, distance, fast, s, cfg)`` as NumPy arrays plus the snapped data and config.
    """
    lower, upper = _check_median_domain(lower, upper)
    data = check_rows_in_domain(data, lower, upper, clip)
    cfg = median_config(data.shape[1], epsilon=epsilon, min_density=min_density, radius=radius,
                        median_bound=median_bound, constant=constant, median_index=median_index,
                        grid_resolution=grid_resolution, max_rows=max_rows)
    num_trials = data.shape[0]
    max_rows, kernel_cfg, eps = cfg.max_rows, _kernel_config(cfg), jnp.float64(cfg.epsilon)
    s, fast = _snap_and_certify(jnp.asarray(data, jnp.float64), kernel_cfg)
    fast = np.asarray(fast)
    values = np.array(_fast_values(keys, s, eps, kernel_cfg))
    route = np.where(fast, ROUTE_FAST, ROUTE_CAPPED)
    rows = np.ones(num_trials, np.int64)
    distance = np.zeros(num_trials, np.int64)
    slow = np.flatnonzero(~fast)
    if slow.size:
        v, count, k0 = _bucketed_full_values(keys, s, slow, eps, kernel_cfg, max_rows)
        values[slow], rows[slow], distance[slow] = v, count, k0
        over = slow[count > max_rows]
        if over.size:
            v, count, k0 = _bucketed_full_values(keys, s, over, eps, kernel_cfg, cfg.full_rows)
            values[over], rows[over], distance[over], route[over] = v, count, k0, ROUTE_OVERFLOW
    return values, route, rows, distance, fast, s, cfg


def _private_median_run_trials(keys, data, *, batched_args: bool, **params) -> Release:
    """The ``run_trials`` hook of :func:`private_median` (see :func:`gpuprivacy.mechanisms.batched_trials`).

    ``keys`` are ``jax.random.split(key, num_trials)``; ``data`` is one vector [n] shared by every
    trial or, with ``batched_args=True``, [num_trials, n]. Runs the host-routed driver of
    :func:`private_median_trials`, so trial ``i`` is exactly ``private_median(keys[i], data_i, **params)``,
    and returns a :class:`Release` whose leaves have a leading trials axis.
    """
    num_trials = keys.shape[0]
    data = check_data(data)
    if batched_args:
        if data.ndim != 2:
            raise ValueError(f"data must be [num_trials, n] with batched_args=True, got shape {data.shape}.")
    else:
        data = _check_median_data(data)
        data = np.broadcast_to(data, (num_trials,) + data.shape)
    # The guarantee first, from the same parameters, before the driver draws any noise.
    guarantee = stated_guarantee(private_median_guarantee, **params)
    values, route, rows, distance, _, s, cfg = _host_routed_trials(keys, data, **params)
    full = lambda value, dtype: jnp.full((num_trials,), value, dtype)  # noqa: E731
    info = PrivateMedianInfo(
        scale=full(cfg.scale, jnp.float64), support=full(cfg.support, jnp.float64),
        num_windows=full(cfg.num_windows, jnp.int64), nonprivate_route=jnp.asarray(route, jnp.int64),
        nonprivate_num_rows=jnp.asarray(rows, jnp.int64), nonprivate_distance=jnp.asarray(distance, jnp.int64),
        nonprivate_median=s[:, cfg.median_index - 1].astype(jnp.float64) * cfg.unit)
    return Release(jnp.asarray(values, jnp.float64), info, guarantee)


batched_trials(_private_median_run_trials)(private_median)
