"""The exact density (3.6) of the optimal private median (spec 003 Sec. 2.6, 3.2, 5.1, 5.5).

Closed forms against brute force (with ties), the spec's counterexamples to the Case-A shortcut,
Pareto pruning and pieces against the direct envelope, exact per-pair log-ratios, the certificate.
"""

import itertools
from fractions import Fraction

import jax
import mpmath
import numpy as np
import pytest

from gpuprivacy.mechanisms import median

# Counterexample parameters of spec 003 Sec. 3.2 items 4-5 (delta = 1/4 resp. 1/32 at n = 48 resp. 384).
SPEC = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=100.0, constant=6.0)


def _breakpoints(*data_sets, params):
    points = np.concatenate([np.r_[p.left, p.right] for p in (median.private_median_pieces(x, **params)
                                                               for x in data_sets)])
    points = np.unique(points)
    return np.r_[points, 0.5 * (points[1:] + points[:-1])]


def log_density_from_pieces(pieces, omega):
    """The normalized log-density from a piece table (continuous, so either side of a breakpoint works)."""
    index = np.clip(np.searchsorted(pieces.left, omega, side="right") - 1, 0, pieces.left.size - 1)
    return pieces.log_left[index] + pieces.slope[index] * (omega - pieces.left[index])


def max_log_ratio(x, y, params):
    """Exact max |log f_X - log f_Y| over the union of both piece tables' breakpoints and midpoints.

    Both log-densities are piecewise linear with these breakpoints, so the maximum is attained there.
    """
    px, py = median.private_median_pieces(x, **params), median.private_median_pieces(y, **params)
    points = np.unique(np.r_[px.left, px.right, py.left, py.right])
    points = np.r_[points, 0.5 * (points[1:] + points[:-1])]
    return float(np.max(np.abs(log_density_from_pieces(px, points) - log_density_from_pieces(py, points))))


def restricted_log_ratio(x, y, params):
    n = len(x)
    points = _breakpoints(x, y, params=params)
    mx, my = median.nonprivate_median(x), median.nonprivate_median(y)
    return float(np.max(np.abs(median.flattened_laplace_log_density(points, mx, n, **params)
                               - median.flattened_laplace_log_density(points, my, n, **params))))


def total_variation(x, params):
    """TV between (3.6) and the restricted (3.4) at X, by a fine midpoint rule (both are piecewise smooth)."""
    support = median.median_parameters(len(x), **params).support
    grid = np.linspace(-support, support, 400_001)
    mid = 0.5 * (grid[1:] + grid[:-1])
    f = np.exp(log_density_from_pieces(median.private_median_pieces(x, **params), mid))
    g = np.exp(median.flattened_laplace_log_density(mid, median.nonprivate_median(x), len(x), **params))
    return 0.5 * float(np.sum(np.abs(f - g)) * (grid[1] - grid[0]))


def tie_counterexample():
    x = np.r_[np.zeros(24), np.full(24, 50.0)]
    y = np.r_[np.zeros(23), np.full(25, 50.0)]
    return x, y


def no_tie_counterexample():
    n, delta, K, l = 384, 1 / 32, 16, 192
    x = np.empty(n)
    x[:l - 1] = -np.arange(l - 1, 0, -1) * delta
    x[l - 1] = 0.0
    x[l:l + K + 1] = np.arange(1, K + 2) * delta
    x[l + K + 1:] = 50 + np.arange(n - l - K - 1) * delta
    y = x.copy()
    y[:2 * K + 3] = 50 - np.arange(1, 2 * K + 4) * delta
    return x, y


# --- spec 003 Sec. 3.2 items 4-5 and Sec. 5.1: the Case-A shortcut is not private --------------------

def test_tie_counterexample_breaks_the_shortcut_but_not_the_general_density():
    x, y = tie_counterexample()
    assert np.sum(x != y) == 1
    hx, hy = median.typical_hulls(x, **SPEC), median.typical_hulls(y, **SPEC)
    assert hx.distance == 0 and hy.distance == 0        # both are in H
    assert median.nonprivate_median(x) == 0.0 and median.nonprivate_median(y) == 50.0
    assert restricted_log_ratio(x, y, SPEC) == pytest.approx(6.0, abs=1e-9)  # > eps/2 = 0.5: Lemma 3.3 fails
    general = max_log_ratio(x, y, SPEC)
    assert general == pytest.approx(0.5, abs=1e-9) and general <= SPEC["epsilon"] * 1
    assert not hx.certified                              # the fast path refuses it
    assert total_variation(x, SPEC) == pytest.approx(0.767, abs=1.5e-3)


def test_no_tie_counterexample_breaks_the_shortcut_but_not_the_general_density():
    x, y = no_tie_counterexample()
    distance = int(np.sum(x != y))
    assert distance == 35
    assert median.typical_hulls(x, **SPEC).distance == 0 and median.typical_hulls(y, **SPEC).distance == 0
    assert median.nonprivate_median(y) == 49.4375
    assert restricted_log_ratio(x, y, SPEC) == pytest.approx(48.0, abs=1e-9)   # > eps d/2 = 17.5
    assert max_log_ratio(x, y, SPEC) == pytest.approx(9.0, abs=1e-9)            # <= eps d = 35
    assert total_variation(x, SPEC) == pytest.approx(0.883, abs=1.5e-3)


# --- spec 2.6.1: closed-form TypicalHamming against subset brute force (ties, both conventions) ------

def _brute_force_tables(n, K, grid, l):
    """For every X' in grid^n: its median (lattice units, delta = 1) and whether X' is in H."""
    everything = np.array(list(itertools.product(grid, repeat=n)), dtype=np.int64)
    ordered = np.sort(everything, axis=1)
    m = ordered[:, l - 1]
    typical = np.ones(len(everything), bool)
    for kappa in range(1, K + 1):
        right = np.sum((everything - m[:, None] >= 0) & (everything - m[:, None] <= kappa), axis=1)
        left = np.sum((m[:, None] - everything >= 0) & (m[:, None] - everything <= kappa), axis=1)
        typical &= (right >= kappa + 1) & (left >= kappa + 1)
    return everything[typical], m[typical]


@pytest.mark.parametrize("n, constant, convention", [(7, 0.875, "ceil"), (7, 0.875, "floor"), (8, 1.0, "ceil")])
def test_typical_hamming_closed_form_equals_brute_force(n, constant, convention):
    # L = 1/2, r = 1: K = floor(n/(4C)) = 2 and delta = C/(L n) = 1/4; with Q = 1 the lattice unit is delta.
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=1.0, constant=constant,
                  grid_resolution=1, median_index=convention)
    cfg = median.median_parameters(n, **params)
    assert cfg.num_windows == 2 and cfg.unit == 0.25
    grid = np.arange(-3, 4) if n == 7 else np.arange(-2, 3)
    l = (n + 1) // 2 if convention == "ceil" else n // 2
    typical, medians = _brute_force_tables(n, 2, grid, l)
    rng = np.random.default_rng(n)
    mismatches = 0
    for trial in range(12):
        support = rng.choice(grid, size=rng.integers(2, 5), replace=False)
        x = rng.choice(support, size=n)                       # heavy ties
        distance = np.sum(typical != x[None, :], axis=1)
        for xi in grid:
            brute = distance[medians == xi].min()
            closed = median.typical_hamming(x * cfg.unit, xi * cfg.unit, **params)
            mismatches += int(closed != brute)
    assert mismatches == 0


# --- spec 2.6.2: sub-level hulls against a scan of the closed form (anchors and midpoints) -------------

def hull_by_scan(x, params):
    """Brute-force hulls: TH is constant between anchors X_i + kappa delta (Claim 4.8), so the closure of
    {TH <= k} has its ends among anchors, and open intervals are represented by their midpoints."""
    cfg = median.median_parameters(len(x), **params)
    s = median.snap_to_lattice(x, **params)
    anchors = (s[:, None] + np.arange(-cfg.num_windows, cfg.num_windows + 1)[None, :] * cfg.grid_resolution).ravel()
    anchors = np.unique(np.r_[anchors, -cfg.xi_bound, cfg.xi_bound])
    anchors = anchors[np.abs(anchors) <= cfg.xi_bound]
    mids = 0.5 * (anchors[1:] + anchors[:-1])
    th_anchor = median.typical_hamming(x, anchors * cfg.unit, **params)
    th_mid = median.typical_hamming(x, mids * cfg.unit, **params)
    rows = {}
    for k in range(cfg.num_rows):
        ends = np.r_[anchors[th_anchor <= k], anchors[:-1][th_mid <= k], anchors[1:][th_mid <= k]]
        rows[k] = (ends.min() * cfg.unit, ends.max() * cfg.unit) if ends.size else None
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_hulls_equal_brute_force_with_ties(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.choice([30, 31, 41]))
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=1.0,
                  constant=float(rng.choice([1.0, 1.25, 2.0])), grid_resolution=4)
    cfg = median.median_parameters(n, **params)
    # Values on a coarse lattice near 0 (ties, windows matter), a few far out.
    x = rng.integers(-3 * cfg.grid_resolution, 3 * cfg.grid_resolution + 1, size=n) // 2 * 2 * cfg.unit
    x[rng.random(n) < 0.15] = rng.choice([-5.0, 3.0])
    hulls = median.typical_hulls(x, **params)
    scan = hull_by_scan(x, params)
    for k, expected in scan.items():
        if expected is None:
            assert not hulls.exists[k], k
        else:
            assert hulls.exists[k], k
            assert (hulls.lower[k], hulls.upper[k]) == expected, k
    assert hulls.distance == min(k for k, v in scan.items() if v is not None)


def test_lattice_predicates_are_exact_on_delta_commensurate_data():
    # Spec 5.2: float64 with delta = 1/6 on a 1/12 grid lost the k = 0 row. Here delta = C/(L n) = 1/6
    # (n = 48, C = 4) and the data lie on the 1/12 grid; exact rational TH must match the lattice.
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=2.0, constant=4.0)
    cfg = median.median_parameters(48, **params)
    assert cfg.delta == pytest.approx(1 / 6) and cfg.num_windows == 3
    rng = np.random.default_rng(5)
    delta = Fraction(1, 6)
    for _ in range(5):
        ticks = np.sort(rng.integers(-10, 11, size=48))
        x = ticks / 12.0
        exact = [Fraction(int(t), 12) for t in ticks]
        l = 24
        for xi_ticks in range(-12, 13):
            xi = Fraction(xi_ticks, 12)
            below = sum(v < xi for v in exact)
            equal = sum(v == xi for v in exact)
            med = max(0, below - l + 1) + max(0, l - below - equal)
            w = 0
            for kappa in range(1, 4):
                right = sum(xi <= v <= xi + kappa * delta for v in exact)
                left = sum(xi - kappa * delta <= v <= xi for v in exact)
                w = max(w, kappa + 1 - right, kappa + 1 - left)
            assert median.typical_hamming(x, xi_ticks / 12.0, **params) == max(med, w)


# --- spec 2.6.3: Pareto pruning and pieces against the direct envelope over all rows ------------------

@pytest.mark.parametrize("kind", ["typical", "bimodal", "gappy", "far"])
def test_pieces_equal_the_direct_envelope(kind):
    rng = np.random.default_rng(7)
    n = 200
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=5.0, constant=2.0)
    x = {"typical": rng.uniform(-1, 1, n),
         "bimodal": np.r_[rng.uniform(-3, -2.5, n // 2), rng.uniform(2.5, 3, n - n // 2)],
         "gappy": np.sort(rng.uniform(-1, 1, n)) * np.where(np.arange(n) % 7 == 0, 3.0, 1.0),
         "far": rng.standard_cauchy(n) * 20}[kind]
    pieces = median.private_median_pieces(x, **params)
    assert np.all(pieces.right >= pieces.left)
    assert float(jax.scipy.special.logsumexp(pieces.log_mass)) == pytest.approx(0.0, abs=1e-12)
    # Evaluate the pieces at interior points and compare with the direct min over all nonempty rows.
    t = rng.uniform(0.05, 0.95, (pieces.left.size, 3))
    omega = (pieces.left[:, None] + t * (pieces.right - pieces.left)[:, None])
    from_pieces = pieces.log_left[:, None] + pieces.slope[:, None] * (omega - pieces.left[:, None])
    direct = median.private_median_log_density(x, omega, **params)
    np.testing.assert_allclose(from_pieces, direct, rtol=0, atol=1e-9)
    # The pieces cover [-B, B] without gaps.
    support = median.median_parameters(n, **params).support
    assert pieces.left.min() == pytest.approx(-support) and pieces.right.max() == pytest.approx(support)
    assert np.all(np.isclose(pieces.left[1:], pieces.right[:-1]) | (np.diff(pieces.left) >= 0))


def test_density_integrates_to_one_by_quadrature():
    rng = np.random.default_rng(8)
    x = np.r_[rng.uniform(-3, -2.5, 60), rng.uniform(2.5, 3, 61)]
    params = dict(epsilon=0.5, min_density=0.5, radius=1.0, median_bound=4.0, constant=2.0)
    support = median.median_parameters(len(x), **params).support
    grid = np.linspace(-support, support, 200_001)
    mid = 0.5 * (grid[1:] + grid[:-1])
    integral = np.sum(np.exp(median.private_median_log_density(x, mid, **params))) * (grid[1] - grid[0])
    assert integral == pytest.approx(1.0, abs=1e-5)
    assert median.private_median_cdf(x, support, **params) == pytest.approx(1.0, abs=1e-12)


# --- privacy: exact per-pair log-ratios at all breakpoints (spec 5.5 item 4) ----------------------------

def _neighbours(rng, x, spread):
    y = x.copy()
    i = rng.integers(len(x))
    y[i] = rng.choice([rng.uniform(-spread, spread), -x[i], x[len(x) // 2], 100.0])
    return y


@pytest.mark.parametrize("seed, n, epsilon, constant", [(0, 41, 1.0, 2.0), (1, 40, 2.0, 1.0), (2, 41, 1.0, 6.0)])
def test_exact_log_ratio_is_at_most_epsilon_on_random_neighbours(seed, n, epsilon, constant):
    rng = np.random.default_rng(seed)
    params = dict(epsilon=epsilon, min_density=0.5, radius=1.0, median_bound=3.0, constant=constant)
    worst = 0.0
    for _ in range(8):
        kind = rng.integers(3)
        x = [rng.uniform(-1, 1, n), np.round(rng.normal(0, 1, n) * 4) / 4,
             np.r_[rng.uniform(-2.5, -2, n // 2), rng.uniform(2, 2.5, n - n // 2)]][kind]
        y = _neighbours(rng, x, 3.0)
        ratio = max_log_ratio(x, y, params)
        assert ratio <= params["epsilon"] + 1e-9, (x, y, ratio)
        worst = max(worst, ratio)
    assert worst > 0.0


def test_exact_log_ratio_on_adversarial_neighbours():
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=3.0, constant=2.0)
    n = 41
    cases = []
    for gap in (0.1, 1.0, 2.5):
        x = np.r_[np.full(20, -gap), np.full(21, gap)]                  # ties at two atoms
        cases.append((x, np.r_[np.full(21, -gap), np.full(20, gap)]))
        y = x.copy()
        y[0] = 0.0                                                      # a point onto the gap
        cases.append((x, y))
    x = np.sort(np.linspace(-1, 1, n) ** 3)
    y = x.copy()
    y[n // 2] = 50.0                                                    # the median itself leaves
    cases.append((x, y))
    ratios = [max_log_ratio(a, b, params) for a, b in cases]
    assert max(ratios) <= 1.0 + 1e-9
    assert max(ratios) > 0.4                                            # the check sees real loss
    # Group privacy: d_H = 3 allows 3 epsilon.
    x = np.r_[np.full(20, -1.0), np.full(21, 1.0)]
    y = np.r_[np.full(23, -1.0), np.full(18, 1.0)]
    assert max_log_ratio(x, y, params) <= 3.0 + 1e-9


# --- spec 5.5 item 5: the certificate never fires unless row 0 alone defines the envelope -------------

def test_certificate_fires_only_when_one_row_remains():
    rng = np.random.default_rng(11)
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=5.0, constant=2.0)
    fired = 0
    for trial in range(24):
        n = 150
        x = [rng.uniform(-1, 1, n), rng.standard_cauchy(n),
             np.r_[rng.uniform(-3, -2.9, n // 2), rng.uniform(2.9, 3, n - n // 2)],
             np.round(rng.uniform(-1, 1, n) * 3) / 3][trial % 4]
        hulls = median.typical_hulls(x, **params)
        if hulls.certified:
            fired += 1
            assert hulls.distance == 0 and np.flatnonzero(hulls.keep).tolist() == [0]
    assert 0 < fired < 24


# --- spec 2.3 / 3.2: the restricted normalizer and tails; log-space stability ----------------------------

@pytest.mark.parametrize("n, constant, median_bound, epsilon, z, tail01, tail05", [
    (1000, 6, 10, 1.0, 0.288, 0.4993517886, 0.03104795848),
    (1000, 6, 10, 0.1, 2.88010852014, 0.9329144882, 0.7066593311),
    (10000, 105, 1000, 1.0, 0.504, 0.6724514275, 0.1375006019),
    (100, 6, 1e6, 0.5, 3866.68031849, 0.9999491637, 0.9997625852),
])
def test_restricted_normalizer_and_tails_match_the_spec_table(n, constant, median_bound, epsilon, z, tail01,
                                                              tail05):
    params = dict(epsilon=epsilon, min_density=0.5, radius=1.0, median_bound=median_bound, constant=constant)
    assert np.exp(median.flattened_laplace_log_normalizer(n, **params)) == pytest.approx(z, rel=1e-9)
    assert median.flattened_laplace_tail(0.1, n, **params) == pytest.approx(tail01, abs=1e-9)
    assert median.flattened_laplace_tail(0.5, n, **params) == pytest.approx(tail05, abs=1e-9)


def test_restricted_normalizer_against_mpmath_quadrature():
    params = dict(epsilon=0.5, min_density=0.5, radius=1.0, median_bound=10.0, constant=6.0)
    cfg = median.median_parameters(100, **params)
    lam, cap_e, m = 1 / cfg.scale, params["epsilon"] * cfg.cap / 4, 10.5   # m at the edge R + r/2
    quad = mpmath.quad(lambda w: mpmath.exp(-min(lam * abs(m - w), cap_e)),
                       [-cfg.support, m - 3 * 6, m, m + 3 * 6, cfg.support])
    assert float(quad) == pytest.approx(5.81065511653461, rel=1e-12)
    assert np.exp(median.flattened_laplace_log_normalizer(100, **params)) == pytest.approx(float(quad), rel=1e-12)


def test_log_space_is_stable_at_cap_e_1e5():
    # capE = eps L r n/4 = 1e5: exp(-capE) underflows; the log normalizer must stay exact.
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=10.0, constant=6.0)
    n = 800_000
    log_z = median.flattened_laplace_log_normalizer(n, **params)
    cfg = median.median_parameters(n, **params)
    assert np.isfinite(log_z) and log_z == pytest.approx(np.log(2 * cfg.scale), rel=1e-12)
    x = np.random.default_rng(0).uniform(-1, 1, n)
    out = median.private_median(jax.random.key(0), x, **params)   # certified: one row, capE = 1e5
    assert int(out.info.nonprivate_route) == 0
    assert np.isfinite(float(out.value)) and abs(float(out.value) - median.nonprivate_median(x)) < 0.01


# --- spec 1.3 lower bounds and 3.2 constants -------------------------------------------------------------

def test_lower_bound_sample_sizes_match_the_spec():
    a = median.lower_bound_sample_sizes(alpha=0.1, beta=0.05, epsilon=1.0, min_density=0.5, radius=1.0,
                                        median_bound=10.0)
    assert a["local"] == pytest.approx(45.0921, abs=1e-4) and a["range"] == pytest.approx(4.1384, abs=1e-4)
    b = median.lower_bound_sample_sizes(alpha=0.01, beta=0.01, epsilon=0.1, min_density=0.25, radius=1.0,
                                        median_bound=1000.0)
    assert b["local"] == pytest.approx(9655.11, abs=1e-2) and b["range"] == pytest.approx(227.637, abs=1e-3)


def test_theory_constant():
    c = median.THEORY_CONSTANT
    assert 4 * c * np.e * np.exp(-2 * c / 27) == pytest.approx(0.5, rel=1e-12)
