"""Private black-box estimation over covering designs (Steinke & Steinke 2025, Algorithm 4.1, App. A).

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
   public C keeps this: ``min(l, C)`` still has sensitivity 1).
5. **Release** by one of three rank-based mechanisms on those counts.

Outputs are biased downwards (``M <= max_i v_i``; App. A); this is inherent
and not corrected: a data-dependent shift would break privacy.

This module holds steps 1-4 shared by the three estimators (:mod:`._pure`, :mod:`._zcdp`,
:mod:`._binary`): the public output grid, the oracle values on it, the design check and the
order statistics.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import jax
import numpy as np

from gpuprivacy import oracle as _oracle
from gpuprivacy._checks import check_finite_real, check_int, check_positive
from gpuprivacy.designs import DEFAULT_MAX_WORK, aggregation_plan, robust_order_statistics, verify_covering
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
    """The public finite output space ``Y = {lower + j * resolution : 0 <= j, <= upper}``; the paper
    assumes a finite public Y (Steinke & Steinke 2025, Thm 1.1); this grid is our choice of it.

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


def order_statistics_for(values, design: SubsetFamily, *, cap: int, max_work: int = DEFAULT_MAX_WORK) -> np.ndarray:
    """F(0..cap-1) for grid values on ``design`` (NOT private; for audits and experiments)."""
    return robust_order_statistics(np.asarray(values), design, cap=check_int("cap", cap, minimum=1),
                                   max_work=max_work)
