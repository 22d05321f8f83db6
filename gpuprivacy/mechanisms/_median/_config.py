"""Parameters of the optimal private median (Tzamos et al. 2020) and the integer lattice of its predicates.

Notation of Tzamos et al. 2020, Sec. 3 (Tzamos, Vlatakis-Gkaragkounis & Zadik, *Optimal
Private Median Estimation under Minimal Distributional Assumptions*,
NeurIPS 2020, Sec. 3.1-3.2):

* ``delta = C/(L n)`` bucket width, ``K = floor(L n r/(2C))`` window constraints per side,
* ``a = L n/(3C)`` Laplace slope and ``b = L r n`` flattening cap (Hamming units),
* ``Xi = [-R - r/2, R + r/2]`` allowed typical medians, output support ``[-B, B]``, ``B = R + 4Cr``.

Exact predicates: every record is snapped to the lattice of spacing
``unit = delta/Q`` (``Q = grid_resolution``, a power of two) and all window/rank
comparisons are done on int64 lattice coordinates. Snapping is a fixed
record-wise map, so it cannot increase Hamming distances and the privacy proof
(Tzamos et al. 2020, Prop. A.5 part 1) applies to the snapped data verbatim. In
lattice units ``delta = Q``, the Laplace slope of the log-density is
``epsilon/(12 Q)`` per unit and the flat region starts ``3 b Q`` units from the hull.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

from gpuprivacy._checks import check_epsilon, check_int, check_positive, check_scale_not_flushed

# Largest |lattice coordinate| we allow, so that float64 -> int64 rounding is exact.
_MAX_LATTICE = 2.0**51
# Theory constant of Lemma B.3: 4 C e exp(-2C/27) = 1/2.
THEORY_CONSTANT = 104.312203682800634
MEDIAN_INDEX_CONVENTIONS = ("ceil", "floor")


class MedianParameterWarning(UserWarning):
    """A valid but uninformative parameter choice (e.g. K = 0: no window constraints)."""


@dataclasses.dataclass(frozen=True)
class MedianConfig:
    """Static configuration of one private-median problem (all Python scalars).

    Attributes:
      n: number of records (public).
      median_index: 1-indexed order statistic ``l`` used as the median.
      epsilon, min_density (L), radius (r), median_bound (R), constant (C): the parameters.
      grid_resolution: Q, lattice points per bucket width ``delta``.
      num_windows: K.
      unit: lattice spacing ``delta/Q`` in data units.
      xi_bound: ``floor((R + r/2)/unit)``, the typical-median range in lattice units.
      clip_bound: records are clipped to ``[-clip_bound, clip_bound]`` lattice units
        (``xi_bound + (K + 2) Q``); this leaves TypicalHamming and the certificate unchanged.
      support_units: ``B/unit``, the output support in lattice units.
      cap: ``b = L r n``.
      max_rows: static cap P_MAX on Pareto rows in the first full pass (overflow goes to a pass with
        ``full_rows`` rows, which always suffices).
      num_rows: rows k = 0..num_rows-1 ever needed (``max(l, n - l + 1) + 1``).
      full_rows: ``min(num_rows, ceil(b/2) + 1)``, an upper bound on the Pareto rows that survive.
    """

    n: int
    median_index: int
    epsilon: float
    min_density: float
    radius: float
    median_bound: float
    constant: float
    grid_resolution: int
    num_windows: int
    unit: float
    xi_bound: int
    clip_bound: int
    support_units: float
    cap: float
    max_rows: int
    num_rows: int
    full_rows: int

    @property
    def delta(self) -> float:
        return self.constant / (self.min_density * self.n)

    @property
    def slope(self) -> float:
        """Slope of the log-density per lattice unit: lambda * unit = epsilon/(12 Q)."""
        return self.epsilon / (12.0 * self.grid_resolution)

    @property
    def flat_width(self) -> float:
        """Wf = 3 C r in lattice units = 3 b Q."""
        return 3.0 * self.cap * self.grid_resolution

    @property
    def scale(self) -> float:
        """Laplace scale sigma = 12 C/(L n epsilon) in data units."""
        return 12.0 * self.constant / (self.min_density * self.n * self.epsilon)

    @property
    def support(self) -> float:
        """B = R + 4 C r."""
        return self.median_bound + 4.0 * self.constant * self.radius


def median_config(n, *, epsilon, min_density, radius, median_bound, constant=6.0, median_index="ceil",
                  grid_resolution=256, max_rows=64, warn=True) -> MedianConfig:
    """Validates the parameters and derives the static configuration (Tzamos et al. 2020, Sec. 3).

    Raises:
      ValueError: for ``L <= 0``, ``r <= 0``, ``L r > 1/2``, ``R <= 0``, ``C <= 0``, ``epsilon <= 0``,
        a non-power-of-two ``grid_resolution``, an ``n`` too small for the structural preconditions
        ``n >= 2K + 3`` and ``K + 1 <= l <= n - K``, or a lattice too fine for exact int64 predicates.
    """
    n = check_int("n (the number of records)", n, minimum=1)
    epsilon = check_epsilon(epsilon)
    min_density = check_positive("min_density (L)", min_density)
    radius = check_positive("radius (r)", radius)
    median_bound = check_positive("median_bound (R)", median_bound)
    constant = check_positive("constant (C)", constant)
    if min_density * radius > 0.5:
        raise ValueError(
            f"min_density * radius must be <= 1/2 (a density >= L on a window of width 2r has mass 2Lr <= 1; "
            f"Assumption 1.2), got L*r = {min_density * radius!r}. Lower min_density or radius.")
    grid_resolution = check_int("grid_resolution", grid_resolution, minimum=1)
    if grid_resolution & (grid_resolution - 1):
        raise ValueError(f"grid_resolution must be a power of two (exact lattice arithmetic), got {grid_resolution}.")
    max_rows = check_int("max_rows", max_rows, minimum=1)
    if median_index not in MEDIAN_INDEX_CONVENTIONS:
        raise ValueError(f"median_index must be one of {MEDIAN_INDEX_CONVENTIONS}, got {median_index!r}.")
    index = (n + 1) // 2 if median_index == "ceil" else n // 2
    # K = floor(L n r/(2C)); any deterministic function of public parameters is fine for privacy.
    num_windows = int(math.floor(min_density * n * radius / (2.0 * constant)))
    if index < 1 or n < 2 * num_windows + 3 or not num_windows + 1 <= index <= n - num_windows:
        raise ValueError(
            f"n = {n} is too small for K = floor(L n r/(2C)) = {num_windows} window constraints: Tzamos et al. 2020, Sec. 3 "
            f"needs n >= 2K + 3 and K + 1 <= l <= n - K (l = {index}). Use more records or a larger constant C.")
    if num_windows == 0 and warn:
        warnings.warn(f"K = floor(L n r/(2C)) = 0 for n = {n}: the typical set only constrains the median's range, "
                      "so the release is private but barely informative. Use more records or a "
                      "smaller constant C.", MedianParameterWarning, stacklevel=3)
    delta = constant / (min_density * n)
    unit = delta / grid_resolution
    xi_bound = math.floor((median_bound + radius / 2) / unit)
    clip_bound = xi_bound + (num_windows + 2) * grid_resolution
    support_units = (median_bound + 4 * constant * radius) / unit
    if support_units > _MAX_LATTICE or clip_bound + n * grid_resolution > _MAX_LATTICE:
        raise ValueError(
            f"the lattice is too fine for exact int64 predicates: (R + 4Cr)/unit = {support_units:.3g} > 2^51 with "
            f"unit = C/(L n Q) = {unit:.3g}. Lower grid_resolution (Q = {grid_resolution}) or R.")
    scale = 12.0 * constant / (min_density * n) / epsilon  # in this order: L n epsilon alone may overflow
    check_scale_not_flushed(min(scale, scale / unit), epsilon,
                            what="private_median (the Laplace scale 12 C/(L n epsilon), in data and lattice units)")
    cap = min_density * radius * n
    num_rows = max(index, n - index + 1) + 1
    full_rows = min(num_rows, math.ceil(cap / 2) + 1)
    return MedianConfig(n=n, median_index=index, epsilon=epsilon, min_density=min_density, radius=radius,
                        median_bound=median_bound, constant=constant, grid_resolution=grid_resolution,
                        num_windows=num_windows, unit=unit, xi_bound=xi_bound, clip_bound=clip_bound,
                        support_units=support_units, cap=cap, max_rows=min(max_rows, full_rows),
                        num_rows=num_rows, full_rows=full_rows)
