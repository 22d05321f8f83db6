"""Exact, non-sampling views of the private-median density (Tzamos et al. 2020, eq. (3.6)), for analysis and tests.

None of these functions is private: they read the data directly (``nonprivate`` diagnostics).
They use exactly the kernels the sampler uses, so the sampler, the exact CDF and the per-pair
privacy-loss checks all see the same density.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_data
from gpuprivacy.mechanisms._median._config import MedianConfig, median_config
from gpuprivacy.mechanisms._median._density import certificate, compact_rows, hull_rows, pareto_keep, piece_table, snap


def _config(data, params, warn=False):
    data = check_data(data)
    if data.ndim != 1:
        raise ValueError(f"data must be a vector of n real records, got shape {data.shape}.")
    return np.asarray(data, np.float64), median_config(data.shape[0], warn=warn, **params)


def snap_to_lattice(data, **params) -> np.ndarray:
    """The sorted int64 lattice coordinates the mechanism works on (units of ``delta/Q``)."""
    data, cfg = _config(data, params)
    return np.asarray(_bundle(jnp.asarray(data), cfg)["s"])


def typical_hamming(data, xi, **params) -> np.ndarray:
    """TypicalHamming ``TH(X, xi) = min{d_H(X, X') : X' in H, m(X') = xi}`` in closed form.

    .. math:: TH(\\xi) = \\max(\\mathrm{Med}(\\xi), W_R(\\xi), W_L(\\xi))

    ``xi`` is in data units; it is snapped to the nearest half-lattice point (lattice points and
    midpoints of the data's lattice are then exact), as the data are snapped to the lattice. Returns ``inf`` where ``xi`` is outside Xi (no typical data set
    has that median). NumPy, O(n K) per query: a reference, not the fast path.
    """
    data, cfg = _config(data, params)
    s = np.asarray(_bundle(jnp.asarray(data), cfg)["s"])
    xi_units = np.round(2.0 * np.atleast_1d(np.asarray(xi, np.float64)) / cfg.unit) / 2.0
    return _typical_hamming_units(s, xi_units, cfg.median_index, cfg.num_windows, cfg.grid_resolution,
                                  cfg.xi_bound).reshape(np.shape(xi))


def _typical_hamming_units(s, xi_units, l, K, Q, xi_bound):
    out = np.empty(xi_units.shape, np.float64)
    for j, xi in enumerate(xi_units):
        if abs(xi) > xi_bound:
            out[j] = np.inf
            continue
        below = int(np.sum(s < xi))
        equal = int(np.sum(s == xi))
        med = max(0, below - l + 1) + max(0, l - below - equal)
        kappa = np.arange(1, K + 1)
        n_right = np.array([np.sum((s >= xi) & (s <= xi + k * Q)) for k in kappa], np.int64)
        n_left = np.array([np.sum((s <= xi) & (s >= xi - k * Q)) for k in kappa], np.int64)
        w_right = max(0, int(np.max(kappa + 1 - n_right))) if K else 0
        w_left = max(0, int(np.max(kappa + 1 - n_left))) if K else 0
        out[j] = max(med, w_right, w_left)
    return out


class TypicalHulls(NamedTuple):
    """Hulls ``[lower_k, upper_k]`` of ``{xi : TH(xi) <= k}`` for k = 0..num_rows-1 (data units).

    ``exists[k]`` is False where the sub-level set is empty. ``keep[k]`` marks the Pareto rows
    that define the envelope. ``distance`` is k0 (0 iff X is in H);
    ``certified`` is the fast-path certificate.
    """

    exists: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    keep: np.ndarray
    distance: int
    certified: bool


@functools.partial(jax.jit, static_argnames=("cfg",))
def _bundle(data, cfg):
    """Everything the analysis functions need, in one compiled kernel per configuration."""
    s = snap(data, cfg)
    exists, lo, hi = hull_rows(s, cfg)
    (k, rows_lo, rows_hi, window_keep), k0 = pareto_keep(exists, lo, hi, cfg)
    index, rows_lo, rows_hi, valid, _ = compact_rows(window_keep, rows_lo, rows_hi, cfg.full_rows)
    table = piece_table(k[index], rows_lo, rows_hi, valid, s[cfg.median_index - 1], cfg, cfg.epsilon)
    keep = jnp.zeros(exists.shape, bool).at[k].set(window_keep, mode="drop")  # every row's flag
    return dict(s=s, exists=exists, lo=lo, hi=hi, keep=keep, k0=k0, certified=certificate(s, cfg), table=table)


def typical_hulls(data, **params) -> TypicalHulls:
    """All sub-level hulls of TypicalHamming, from the closed forms of (the sampler's kernels)."""
    data, cfg = _config(data, params)
    out = _bundle(jnp.asarray(data), cfg)
    exists, lo, hi, keep, k0, certified = (np.asarray(out[name]) for name in
                                           ("exists", "lo", "hi", "keep", "k0", "certified"))
    return TypicalHulls(exists=exists, lower=np.where(exists, lo * cfg.unit, np.inf),
                        upper=np.where(exists, hi * cfg.unit, -np.inf), keep=keep, distance=int(k0),
                        certified=bool(certified))


class MedianPieces(NamedTuple):
    """The normalized density (3.6) as pieces, in data units.

    On ``[left[i], right[i]]`` the log-density is ``log_left[i] + slope[i] * (omega - left[i])``
    (normalized: ``logsumexp(log_mass) = 0``). Empty pieces are dropped.
    """

    left: np.ndarray
    right: np.ndarray
    log_left: np.ndarray
    slope: np.ndarray
    log_mass: np.ndarray
    log_normalizer: float


def private_median_pieces(data, **params) -> MedianPieces:
    """The exact piece table of the density (3.6) of :func:`private_median` on ``data``."""
    data, cfg = _config(data, params)
    table = _bundle(jnp.asarray(data), cfg)["table"]
    left = (np.asarray(table.left) + int(table.center)) * cfg.unit
    length = np.asarray(table.length) * cfg.unit
    slope = np.asarray(table.slope) / cfg.unit
    log_mass = np.asarray(table.log_mass) + np.log(cfg.unit)
    keep = np.asarray(table.length) > 0
    log_normalizer = float(jax.scipy.special.logsumexp(log_mass[keep]))
    return MedianPieces(left=left[keep], right=(left + length)[keep],
                        log_left=np.asarray(table.log_left)[keep] - log_normalizer, slope=slope[keep],
                        log_mass=log_mass[keep] - log_normalizer, log_normalizer=log_normalizer)


def private_median_log_density(data, omega, **params) -> np.ndarray:
    """Exact log-density of :func:`private_median` at ``omega`` (data units); -inf outside ``[-B, B]``.

    Evaluated directly as ``(epsilon/2) min_k h_k(omega) - log Z`` over *all* nonempty rows
    (no pruning), so it independently checks the Pareto pruning and the piece table.
    """
    data, cfg = _config(data, params)
    omega = np.asarray(omega, np.float64)
    pieces = private_median_pieces(data, **params)
    out = _bundle(jnp.asarray(data), cfg)
    exists, lo, hi = (np.asarray(out[name]) for name in ("exists", "lo", "hi"))
    k = np.flatnonzero(exists)
    t = np.reshape(omega / cfg.unit, (-1, 1))
    distance = np.maximum(t - lo[k][None, :], hi[k][None, :] - t)
    g = np.min(k[None, :] - np.minimum(distance / (6.0 * cfg.grid_resolution), cfg.cap / 2.0), axis=1)
    values = np.reshape((cfg.epsilon / 2.0) * g, omega.shape)
    inside = np.abs(omega) <= cfg.support
    return np.where(inside, values - pieces.log_normalizer, -np.inf)


def private_median_cdf(data, omega, **params) -> np.ndarray:
    """Exact CDF of :func:`private_median` at ``omega`` from the piece table."""
    pieces = private_median_pieces(data, **params)
    omega = np.asarray(omega, np.float64)[..., None]
    left, right, slope = pieces.left, pieces.right, pieces.slope
    upto = np.clip(omega, left, right) - left
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rise = slope * upto
        # exp(l) expm1(s x)/s, written so that neither factor overflows for large s x.
        grow = np.where(rise < 1.0, np.exp(pieces.log_left) * np.expm1(np.minimum(rise, 1.0)),
                        np.exp(pieces.log_left + rise) - np.exp(pieces.log_left))
        partial = np.where(slope == 0, np.exp(pieces.log_left) * upto, grow / np.where(slope == 0, 1.0, slope))
    return np.clip(np.sum(partial, axis=-1), 0.0, 1.0)


def median_parameters(n, **params) -> MedianConfig:
    """The validated static configuration (``K``, ``delta``, scale, support, ...) for ``n`` records."""
    return median_config(n, warn=False, **params)
