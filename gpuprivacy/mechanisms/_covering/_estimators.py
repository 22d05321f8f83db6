"""Private black-box estimation over covering designs (Steinke & Steinke; spec 002 §2, §4).

Pipeline (Algorithm 4.1 with the mechanisms of App. A):

1. **Design** (public, data-independent): kept sets ``K_i`` of a covering
   design (:mod:`gpuprivacy.designs`), checked exactly to cover the t the
   mechanism needs, and an exact aggregation method chosen (or the design
   refused) *before any data is seen*.
2. **Oracle** (untrusted): ``v_i = f(x_{K_i})`` for every kept set, through
   :func:`gpuprivacy.oracle.evaluate` (the oracle sees only its gathered rows).
3. **Finite output grid** Y = {lower, lower + resolution, ..., } (public).
   An in-range value is rounded to the nearest grid point. A NaN, infinite or
   out-of-range value is a **nonresponse**, counted as min Y: exactly the same
   as leaving that evaluation out of the max of (4.1), since max ∅ = min Y
   (so it is never clipped to the range). Evaluations whose kept set holds an
   absent slot (``present[j]`` False, the paper's ⊥) are left out the same way
   (Lemma 4.1).
4. **Aggregation**: the exact robust order statistics ``F(0..C-1)``
   (:func:`gpuprivacy.designs.robust_order_statistics`), whose counts
   ``l_C(y) = #{v : F(v) > y}`` and ``lbar_C(y) = #{v : F(v) >= y}`` have
   sensitivity 1 under adding or removing one slot (Prop. A.1; capping at a
   public C keeps this, spec §4.2).
5. **Release** by one of three rank-based mechanisms on those counts.

Outputs are biased downwards (``M <= max_i v_i``; App. A); this is inherent
and not corrected (spec §8 pitfall 17).
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import noise as _noise
from gpuprivacy import oracle as _oracle
from gpuprivacy._checks import (
    check_epsilon,
    check_finite_real,
    check_int,
    check_key,
    check_positive,
    check_probability,
)
from gpuprivacy.accounting import ZCDP, PureDP
from gpuprivacy.designs import (
    DEFAULT_MAX_WORK,
    aggregation_plan,
    hitting_counts,
    required_t,
    robust_order_statistics,
    verify_covering,
    zcdp_search_parameters,
)
from gpuprivacy.mechanisms._release import Release
from gpuprivacy.mechanisms._selection._selection import (
    exponential_mechanism,
    exponential_mechanism_probabilities,
)
from gpuprivacy.subsets import SubsetFamily

# Largest output grid (scores are computed for every grid point).
MAX_GRID_POINTS = 1 << 24
_VERIFIED: weakref.WeakKeyDictionary[SubsetFamily, dict] = weakref.WeakKeyDictionary()


class BlackboxInfo(NamedTuple):
    """Public parameters of a black-box release, and non-private diagnostics.

    Attributes:
      index: grid index of the released value (a function of ``value``).
      t: covering strength the design was checked for.
      cap: C, the number of order statistics used.
      tau: the pure-DP rank tau, the zCDP threshold eta, or the binary threshold (t + 1)/2.
      num_outputs: |Y|.
      num_subsets: k, oracle calls.
      aggregation: the exact aggregation method.
      nonprivate_order_statistics: F(0..C-1) as grid indices. NOT private.
      nonprivate_num_nonresponses: oracle values that were NaN/inf/out of range. NOT private.
      nonprivate_min_value, nonprivate_max_value: min and max of the k grid values. NOT private.
    """

    index: jax.Array
    t: int
    cap: int
    tau: float
    num_outputs: int
    num_subsets: int
    aggregation: str
    nonprivate_order_statistics: np.ndarray
    nonprivate_num_nonresponses: int
    nonprivate_min_value: float
    nonprivate_max_value: float


class GridValues(NamedTuple):
    """Oracle values mapped onto the output grid (NOT private).

    Attributes:
      indices: int64 ``[k]`` grid indices (0 = min Y; also every nonresponse and every left-out evaluation).
      num_nonresponses: how many oracle values were NaN, infinite or outside [lower, upper].
      num_left_out: evaluations whose kept set holds an absent slot.
    """

    indices: np.ndarray
    num_nonresponses: int
    num_left_out: int


def output_grid(*, lower: float, upper: float, resolution: float) -> np.ndarray:
    """The public finite output space ``Y = {lower + j * resolution : 0 <= j, <= upper}`` (spec §2.7).

    Raises:
      ValueError: if the range holds fewer than 2 points or more than 2^24.
    """
    lower = check_finite_real("lower", lower)
    upper = check_finite_real("upper", upper)
    resolution = check_positive("resolution", resolution)
    if not upper > lower:
        raise ValueError(f"upper must be > lower, got lower={lower!r}, upper={upper!r}; the output range is empty.")
    count = math.floor((upper - lower) / resolution + 1e-9) + 1
    if count < 2:
        raise ValueError(f"the output range [{lower}, {upper}] with resolution {resolution} has {count} point; "
                         "use a resolution <= upper - lower.")
    if count > MAX_GRID_POINTS:
        raise ValueError(f"the output grid has {count} points, more than {MAX_GRID_POINTS}; use a coarser "
                         "resolution.")
    return lower + resolution * np.arange(count, dtype=np.float64)


def to_grid(values, *, lower: float, upper: float, resolution: float) -> tuple[np.ndarray, int]:
    """Maps oracle values to grid indices; NaN/inf/out-of-range values are nonresponses (index 0)."""
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    v = np.asarray(values, dtype=np.float64)
    inside = np.isfinite(v) & (v >= lower) & (v <= upper)
    raw = np.where(inside, np.rint((np.where(inside, v, lower) - lower) / resolution), 0)
    # Rounding to the nearest grid point; a value in the last partial cell above the top point rounds to it.
    indices = np.minimum(raw.astype(np.int64), grid.size - 1)
    return indices, int((~inside).sum())


def grid_values(data, oracle_fn, design: SubsetFamily, *, lower: float, upper: float, resolution: float,
                present=None, chunk_size: int | None = None, progress: bool = False) -> GridValues:
    """Runs the oracle on every kept set of ``design`` and maps the values onto the grid (NOT private).

    Args:
      data: ``[n, ...]`` rows; row j is slot j of the design.
      oracle_fn: ``oracle_fn(rows, valid) -> scalar`` (see :mod:`gpuprivacy.oracle`).
      design: the covering design (keep masks over the n slots).
      lower, upper, resolution: the public output grid.
      present: optional bool ``[n]``: False marks an empty slot (⊥); evaluations
        that keep an empty slot are left out (Lemma 4.1).
    """
    if not isinstance(design, SubsetFamily):
        raise TypeError(f"design must be a gpuprivacy.subsets.SubsetFamily, got {type(design).__name__}.")
    data = np.asarray(data)
    if data.shape[0] != design.n:
        raise ValueError(f"data has {data.shape[0]} rows but the design is over n = {design.n} slots; build the "
                         "design for this n.")
    present = _check_present(present, design.n)
    if not present.all():
        # Empty slots hold zeros; every evaluation that keeps one is discarded below, so its value never matters.
        data = np.where(present.reshape((-1,) + (1,) * (data.ndim - 1)), data, 0)
    values = np.asarray(_oracle.evaluate(oracle_fn, data, design, chunk_size=chunk_size, progress=progress))
    indices, nonresponses = to_grid(values, lower=lower, upper=upper, resolution=resolution)
    left_out = np.zeros(design.num_subsets, dtype=bool)
    if not present.all():
        from gpuprivacy.designs import keep_matrix

        left_out = keep_matrix(design)[:, ~present].any(1)
        indices = np.where(left_out, 0, indices)
    return GridValues(indices=indices, num_nonresponses=nonresponses, num_left_out=int(left_out.sum()))


def _check_present(present, n):
    if present is None:
        return np.ones(n, dtype=bool)
    present = np.asarray(present)
    if present.dtype != np.bool_ or present.shape != (n,):
        raise ValueError(f"present must be a bool array of shape ({n},), got dtype {present.dtype} and shape "
                         f"{present.shape}.")
    return present


def _prepare_design(design: SubsetFamily, t: int, cap: int, max_work: int):
    """Data-independent: exact covering check for t and the aggregation plan (or refusal)."""
    if not isinstance(design, SubsetFamily):
        raise TypeError(f"design must be a gpuprivacy.subsets.SubsetFamily, got {type(design).__name__}.")
    checked = _VERIFIED.setdefault(design, {})
    if t not in checked:
        checked[t] = verify_covering(design, t, max_work=max_work)
    if not checked[t]:
        raise ValueError(f"the design {design.name!r} does not cover t = {t} (some {t} rows hit every kept set), "
                         "which this mechanism needs for its accuracy guarantee (Lemma 4.2). Build one with "
                         f"gpuprivacy.designs.plan_design(...) or designs.block_design(n, t={t}, c=...).")
    return aggregation_plan(design, cap, max_work=max_work)


def _info(index, t, cap, tau, grid_size, design, plan, f, values: GridValues) -> BlackboxInfo:
    return BlackboxInfo(index=index, t=t, cap=cap, tau=tau, num_outputs=grid_size, num_subsets=design.num_subsets,
                        aggregation=plan.method, nonprivate_order_statistics=f,
                        nonprivate_num_nonresponses=values.num_nonresponses,
                        nonprivate_min_value=float(values.indices.min()), nonprivate_max_value=float(
                            values.indices.max()))


# ---------------------------------------------------------------------------------------------------------------
# Pure DP: the exponential mechanism (Thm 4.4, (A.4)-(A.5)).

def pure_scores(order_statistics, *, tau: int, num_outputs: int) -> np.ndarray:
    """``max(l_C(y) - tau, tau - lbar_C(y))`` for every grid point y (A.4), capped as in spec §4.2."""
    ell, ell_bar = hitting_counts(order_statistics, num_outputs)
    xp = jnp if isinstance(order_statistics, jax.Array) else np
    return xp.maximum(ell - tau, tau - ell_bar).astype(xp.float64)


def blackbox_estimate_probabilities(order_statistics, *, epsilon: float, tau: int, num_outputs: int) -> np.ndarray:
    """Exact output probabilities (A.5) of the pure-DP estimator given F(0..C-1), in float64.

    .. math:: \\Pr[M = y] = \\frac{\\exp(-\\tfrac{\\varepsilon}{2}\\hat\\ell_\\tau(y))}
              {\\sum_{\\hat y} \\exp(-\\tfrac{\\varepsilon}{2}\\hat\\ell_\\tau(\\hat y))}.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy.mechanisms import blackbox
      >>> p = blackbox.blackbox_estimate_probabilities(np.array([3, 2]), epsilon=1.0, tau=1, num_outputs=4)
      >>> [round(float(x), 4) for x in p]
      [0.1888, 0.1888, 0.3112, 0.3112]
    """
    scores = pure_scores(order_statistics, tau=tau, num_outputs=num_outputs)
    return np.asarray(exponential_mechanism_probabilities(np.asarray(-scores), epsilon=epsilon))


def _pure_parameters(epsilon, beta, grid_size):
    t, cap = required_t("pure", epsilon=epsilon, num_outputs=grid_size, beta=beta)
    return t, cap, cap // 2


def blackbox_estimate_from_values(key, values, *, design: SubsetFamily, epsilon: float, lower: float, upper: float,
                                  resolution: float, beta: float = 1e-2,
                                  max_work: int = DEFAULT_MAX_WORK) -> Release:
    """Pure-DP estimator (Thm 4.4) from oracle values already on the grid (see :func:`blackbox_estimate`).

    Args:
      key: a single PRNG key.
      values: int ``[k]`` grid indices from :func:`grid_values` (0 = min Y / nonresponse).
      design, epsilon, lower, upper, resolution, beta, max_work: as in :func:`blackbox_estimate`.
    """
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    t, cap, tau = _pure_parameters(epsilon, check_probability("beta", beta), grid.size)
    plan = _prepare_design(design, t, cap, max_work)
    gv = _as_grid_values(values, design, grid.size)
    f = robust_order_statistics(gv.indices, design, cap=cap, plan=plan)
    index = _pure_release(key, f, epsilon, tau, grid.size)
    return Release(jnp.asarray(grid)[index], _info(index, t, cap, float(tau), grid.size, design, plan, f, gv))


def _pure_release(key, f, epsilon, tau, grid_size):
    utilities = -pure_scores(jnp.asarray(f), tau=tau, num_outputs=grid_size)
    return exponential_mechanism(key, utilities, epsilon=epsilon).value


def _as_grid_values(values, design, grid_size) -> GridValues:
    if isinstance(values, GridValues):
        gv = values
    else:
        gv = GridValues(np.asarray(values), 0, 0)
    idx = np.asarray(gv.indices)
    if idx.shape != (design.num_subsets,) or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"values must be int grid indices of shape ({design.num_subsets},) (from grid_values), got "
                         f"dtype {idx.dtype} and shape {idx.shape}.")
    if idx.size and (idx.min() < 0 or idx.max() >= grid_size):
        raise ValueError(f"grid indices must lie in [0, {grid_size}), got [{idx.min()}, {idx.max()}].")
    return gv._replace(indices=idx.astype(np.int64))


def blackbox_estimate(key, data, oracle_fn, *, design: SubsetFamily, epsilon: float, lower: float, upper: float,
                      resolution: float, beta: float = 1e-2, present=None, max_work: int = DEFAULT_MAX_WORK,
                      chunk_size: int | None = None, progress: bool = False) -> Release:
    """Pure epsilon-DP estimate of any black-box statistic over a covering design (Thm 4.4).

    The oracle runs on the k kept sets of ``design`` (each of n - m rows); the
    release is the exponential mechanism (A.5) over the grid Y with the
    capped score of (A.4) computed from the exact order statistics F:

    .. math:: \\Pr[M(x) = y] \\propto \\exp\\!\\big(-\\tfrac{\\varepsilon}{2}
              \\max\\{\\ell_C(x,y) - \\tau,\\ \\tau - \\bar\\ell_C(x,y)\\}\\big),
              \\qquad \\tau = \\Big\\lceil \\frac{2}{\\varepsilon}\\ln\\frac{|Y|}{\\beta}\\Big\\rceil,\\ C = 2\\tau.

    Privacy: epsilon-DP under adding/removing one slot (⊥, Sec. 3.2) for ANY
    design and ANY oracle (footnote 10); replacing a row costs 2 epsilon.
    Accuracy (4.7): the design must cover t = 2 tau (checked exactly here); then
    with probability >= 1 - beta, ``min_i v_i <= M <= max_i v_i`` on grid values.

    Args:
      key: a single PRNG key.
      data: ``[n, ...]`` rows (row j = slot j of the design; keep a data-independent order).
      oracle_fn: ``oracle_fn(rows, valid) -> scalar``.
      design: covering design over n slots (e.g. ``designs.plan_design(...).build()``).
      epsilon: > 0.
      lower, upper, resolution: the public output grid.
      beta: accuracy failure probability (sets tau and the t the design must cover).
      present: optional bool ``[n]`` of occupied slots.
      max_work: public limit on exact aggregation work; larger designs are refused before any data is seen.
      chunk_size: oracle evaluation chunk size.
      progress: show a progress bar over the k oracle calls (stderr).

    Returns:
      ``Release(value, BlackboxInfo)``: the grid value released.

    Raises:
      ValueError: for a design that does not cover t, an empty grid, bad parameters, or a design too large to
        aggregate exactly (all decided from public inputs).

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import designs, oracle
      >>> from gpuprivacy.mechanisms import blackbox
      >>> data = np.linspace(0.0, 1.0, 240)
      >>> design = designs.sample_and_aggregate(240, t=22)
      >>> r = blackbox.blackbox_estimate(jax.random.key(0), data, oracle.median, design=design, epsilon=1.0,
      ...                                lower=0.0, upper=1.0, resolution=0.25, beta=0.1)
      >>> float(r.value) in (0.0, 0.25, 0.5, 0.75, 1.0)
      True

    References:
      Steinke & Steinke, *Privately Estimating Black-Box Statistics*, Algorithm 4.1, Thm 4.4, App. A.1.
    """
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    t, cap, _ = _pure_parameters(epsilon, check_probability("beta", beta), grid.size)
    _prepare_design(design, t, cap, max_work)  # refuse bad designs before touching data
    values = grid_values(data, oracle_fn, design, lower=lower, upper=upper, resolution=resolution, present=present,
                         chunk_size=chunk_size, progress=progress)
    return blackbox_estimate_from_values(key, values, design=design, epsilon=epsilon, lower=lower, upper=upper,
                                         resolution=resolution, beta=beta, max_work=max_work)


def blackbox_estimate_guarantee(*, epsilon: float) -> PureDP:
    """epsilon-DP (Thm 4.4; the exponential mechanism with a sensitivity-1 score, Dwork & Roth Thm 3.10)."""
    return PureDP(check_epsilon(epsilon))


# ---------------------------------------------------------------------------------------------------------------
# zCDP: naive noisy binary search with explicit constants (Thm 4.5, spec §2.5).

@functools.partial(jax.jit, static_argnums=(3, 4))
def _binary_search(key, ell, sigma, steps, grid_size):
    """s noisy comparisons ``l_C(y_mid) + N(0, sigma^2) > tau``; always exactly s Gaussian draws."""
    tau = ell[-1]  # threshold passed as the last entry (float)
    counts = ell[:-1]

    def body(i, state):
        lo, hi = state
        z = _noise.gaussian(jax.random.fold_in(key, i), (), jnp.float64)
        mid = (lo + hi) // 2
        active = hi - lo > 1
        noisy = counts[jnp.clip(mid, 0, grid_size - 1)] + sigma * z
        go_up = noisy > tau
        lo = jnp.where(active & go_up, mid, lo)
        hi = jnp.where(active & ~go_up, mid, hi)
        return lo, hi

    _, hi = jax.lax.fori_loop(0, steps, body, (jnp.int64(-1), jnp.int64(grid_size - 1)))
    return hi


def blackbox_estimate_zcdp_from_values(key, values, *, design: SubsetFamily, rho: float, lower: float, upper: float,
                                       resolution: float, beta: float = 1e-2,
                                       max_work: int = DEFAULT_MAX_WORK) -> Release:
    """rho-zCDP estimator from grid values (see :func:`blackbox_estimate_zcdp`)."""
    key = check_key(key)
    rho = check_positive("rho", rho)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    beta = check_probability("beta", beta)
    steps, sigma, eta = zcdp_search_parameters(rho=rho, num_outputs=grid.size, beta=beta)
    t, cap = required_t("zcdp", rho=rho, num_outputs=grid.size, beta=beta)
    plan = _prepare_design(design, t, cap, max_work)
    gv = _as_grid_values(values, design, grid.size)
    f = robust_order_statistics(gv.indices, design, cap=cap, plan=plan)
    index = _zcdp_release(key, f, sigma, eta, steps, grid.size)
    return Release(jnp.asarray(grid)[index], _info(index, t, cap, eta, grid.size, design, plan, f, gv))


def _zcdp_release(key, f, sigma, eta, steps, grid_size):
    ell, _ = hitting_counts(jnp.asarray(f), grid_size)
    packed = jnp.append(ell.astype(jnp.float64), jnp.float64(eta))
    return _binary_search(key, packed, jnp.float64(sigma), steps, grid_size)


def blackbox_estimate_zcdp(key, data, oracle_fn, *, design: SubsetFamily, rho: float, lower: float, upper: float,
                           resolution: float, beta: float = 1e-2, present=None, max_work: int = DEFAULT_MAX_WORK,
                           chunk_size: int | None = None, progress: bool = False) -> Release:
    """rho-zCDP estimate by noisy binary search on the sensitivity-1 count l_C (Thm 4.5; spec §2.5).

    With ``s = ceil(log2 |Y|)`` steps, ``sigma = sqrt(s / (2 rho))`` and
    ``eta = sigma Phi^{-1}(1 - beta/s)``, each step compares
    ``l_C(x, y_mid) + N(0, sigma^2)`` with ``tau = eta`` (exactly s Gaussian
    draws, data-independent count). Composition of s Gaussian mechanisms of
    sensitivity 1: rho-zCDP (Bun & Steinke 2016, Prop. 1.6, Lemma 2.3).

    .. math:: \\sigma^2 = \\frac{s}{2\\rho},\\quad C = \\lceil 2\\eta\\rceil,\\quad t = C - 1.

    Accuracy: with probability >= 1 - beta the output y satisfies
    ``l(x, y_{hi-1}) > 0`` (so y <= g(x)) and ``l(x, y) < 2 eta``.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import designs, oracle
      >>> from gpuprivacy.mechanisms import blackbox
      >>> data = np.linspace(0.0, 1.0, 600)
      >>> t, _ = designs.required_t("zcdp", rho=0.5, num_outputs=5, beta=0.1)
      >>> design = designs.sample_and_aggregate(600, t=t)
      >>> r = blackbox.blackbox_estimate_zcdp(jax.random.key(0), data, oracle.median, design=design, rho=0.5,
      ...                                     lower=0.0, upper=1.0, resolution=0.25, beta=0.1)
      >>> float(r.value) in (0.0, 0.25, 0.5, 0.75, 1.0)
      True

    References:
      Steinke & Steinke, Thm 4.5, Prop. A.3; spec 002 §2.5 (explicit naive variant).
    """
    key = check_key(key)
    rho = check_positive("rho", rho)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    t, cap = required_t("zcdp", rho=rho, num_outputs=grid.size, beta=check_probability("beta", beta))
    _prepare_design(design, t, cap, max_work)
    values = grid_values(data, oracle_fn, design, lower=lower, upper=upper, resolution=resolution, present=present,
                         chunk_size=chunk_size, progress=progress)
    return blackbox_estimate_zcdp_from_values(key, values, design=design, rho=rho, lower=lower, upper=upper,
                                              resolution=resolution, beta=beta, max_work=max_work)


def blackbox_estimate_zcdp_guarantee(*, rho: float) -> ZCDP:
    """rho-zCDP (s adaptive Gaussian mechanisms with sigma^2 = s/(2 rho) on a sensitivity-1 count)."""
    return ZCDP(check_positive("rho", rho))


# ---------------------------------------------------------------------------------------------------------------
# Binary outputs Y = {0, 1} (spec §1.2 / §2.6).

def blackbox_binary_from_values(key, values, *, design: SubsetFamily, epsilon: float, beta: float = 1e-2,
                                max_work: int = DEFAULT_MAX_WORK) -> Release:
    """Binary-output estimator from grid values in {0, 1} (see :func:`blackbox_binary`)."""
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    t, cap = required_t("binary", epsilon=epsilon, beta=check_probability("beta", beta))
    plan = _prepare_design(design, t, cap, max_work)
    gv = _as_grid_values(values, design, 2)
    f = robust_order_statistics(gv.indices, design, cap=cap, plan=plan)
    threshold = (t + 1) / 2.0
    index = _binary_release(key, f, epsilon, threshold)
    return Release(index.astype(jnp.float64), _info(index, t, cap, threshold, 2, design, plan, f, gv))


@jax.jit
def _binary_kernel(key, count, scale, threshold):
    noisy = count + scale * _noise.laplace(key, (), jnp.float64)
    return (noisy > threshold).astype(jnp.int64)


def _binary_release(key, f, epsilon, threshold):
    count = (jnp.asarray(f) > 0).sum().astype(jnp.float64)  # l_C(x, 0): capped min hitting set of {K_i : v_i = 1}
    return _binary_kernel(key, count, jnp.float64(1.0 / epsilon), jnp.float64(threshold))


def blackbox_binary(key, data, oracle_fn, *, design: SubsetFamily, epsilon: float, beta: float = 1e-2,
                    present=None, max_work: int = DEFAULT_MAX_WORK, chunk_size: int | None = None,
                    progress: bool = False) -> Release:
    """Pure epsilon-DP estimate of a {0, 1}-valued black-box statistic (spec §1.2, §2.6).

    ``l(x, 0)`` is the minimum number of rows to remove so that every intact
    evaluation outputs 0 (a minimum hitting set of ``{K_i : v_i = 1}``,
    capped at ``C = t + 1``). The release is

    .. math:: M(x) = \\mathbb{1}\\big[\\ell_C(x, 0) + \\mathrm{Lap}(1/\\varepsilon) > (t+1)/2\\big],
              \\qquad t = \\lceil (2/\\varepsilon)\\ln(1/(2\\beta)) \\rceil - 1,

    epsilon-DP (Laplace mechanism on a sensitivity-1 count). Oracle values are
    rounded to the nearest of {0, 1}; NaN or values outside [0, 1] are
    nonresponses (counted as 0). If every evaluation says 1 (0), the output is
    1 (0) with probability >= 1 - beta.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import designs
      >>> from gpuprivacy.mechanisms import blackbox
      >>> t, _ = designs.required_t("binary", epsilon=1.0, beta=0.01)
      >>> design = designs.sample_and_aggregate(80, t=t)
      >>> always_one = lambda rows, valid: 1.0
      >>> int(blackbox.blackbox_binary(jax.random.key(0), np.zeros(80), always_one, design=design, epsilon=1.0).value)
      1

    References:
      Steinke & Steinke §1.2 (binary case); spec 002 §2.6 (explicit thresholds).
    """
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    t, cap = required_t("binary", epsilon=epsilon, beta=check_probability("beta", beta))
    _prepare_design(design, t, cap, max_work)
    values = grid_values(data, oracle_fn, design, lower=0.0, upper=1.0, resolution=1.0, present=present,
                         chunk_size=chunk_size, progress=progress)
    return blackbox_binary_from_values(key, values, design=design, epsilon=epsilon, beta=beta, max_work=max_work)


def blackbox_binary_guarantee(*, epsilon: float) -> PureDP:
    """epsilon-DP (Laplace noise of scale 1/epsilon on a sensitivity-1 count)."""
    return PureDP(check_epsilon(epsilon))


def order_statistics_for(values, design: SubsetFamily, *, cap: int, max_work: int = DEFAULT_MAX_WORK) -> np.ndarray:
    """F(0..cap-1) for grid values on ``design`` (NOT private; for audits and experiments)."""
    return robust_order_statistics(np.asarray(values), design, cap=check_int("cap", cap, minimum=1),
                                   max_work=max_work)


def zcdp_rho_for(*, epsilon: float, delta: float) -> float:
    """(4.9) [Ste22, Remark 15]: ``rho = eps^2 / (4 log(1/delta) + 4 eps)`` makes rho-zCDP imply (eps, delta)-DP.

    Rounded down (a smaller rho is the safe side). Spec 002 §2.5: 0.01687 at (1, 1e-6).

    Examples:
      >>> from gpuprivacy.mechanisms import blackbox
      >>> round(blackbox.zcdp_rho_for(epsilon=1.0, delta=1e-6), 5)
      0.01687
    """
    epsilon = check_epsilon(epsilon)
    delta = check_probability("delta", delta)
    rho = epsilon**2 / (4 * math.log(1 / delta) + 4 * epsilon)
    return float(np.nextafter(rho, 0.0))


def gdp_mu_for(*, epsilon: float, delta: float) -> float:
    """The largest mu with mu-GDP implying (eps, delta)-DP: ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.

    Solved with mpmath (50 digits) and rounded down; spec 002 §2.5: 0.2367 at (1, 1e-6). The zCDP estimator is
    sqrt(2 rho)-GDP (Thm 4.5), so ``rho = mu^2 / 2`` with this mu is the exact GDP route.

    Examples:
      >>> from gpuprivacy.mechanisms import blackbox
      >>> round(blackbox.gdp_mu_for(epsilon=1.0, delta=1e-6), 4)
      0.2367
    """
    import mpmath

    epsilon = check_epsilon(epsilon)
    delta = check_probability("delta", delta)
    with mpmath.workdps(50):
        eps = mpmath.mpf(epsilon)

        def gap(mu):
            return (mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)
                    - mpmath.mpf(delta))

        lo, hi = mpmath.mpf("1e-6"), mpmath.mpf(1)
        while gap(hi) < 0:
            hi *= 2
        for _ in range(200):  # bisection: delta(mu) increases in mu
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
        return float(lo)
