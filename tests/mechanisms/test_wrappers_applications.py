"""App. A of spec 000 as documented, tested examples: average, user-level 1-D convex ERM, G(n, p) edge density."""

import itertools
import math

import jax
import numpy as np
import pytest
from scipy import optimize, stats

from gpuprivacy import oracle, subsets
from gpuprivacy.mechanisms import run_trials, wrappers
from tests.conftest import TEST_FAILURE_RATE


def test_average_down_sensitivity_fact_and_sens_o_matic_accuracy(key):
    # Cor A.1: DS_lam(avg)(x) <= diam(x) lam/(n - lam), checked on every subset down to depth lam.
    rng = np.random.default_rng(0)
    x = rng.uniform(0.4, 0.6, size=12)
    values = np.asarray(oracle.evaluate_levels(wrappers.average_oracle(), x, depth=3))
    lam = 3
    assert np.abs(values - x.mean()).max() <= np.ptp(x) * lam / (x.size - lam) + 1e-12
    grid = np.linspace(0, 1, 41)
    out = run_trials(wrappers.sens_o_matic, key, 500, x, oracle_fn=wrappers.average_oracle(), grid=grid,
                     epsilon=4.0, beta=0.2)
    assert np.median(np.abs(np.asarray(out.value) - x.mean())) <= 0.05


def test_average_with_subset_extension_is_unbiased_laplace(key):
    # W2: claimed c = sigma/(n_min - D + 1) with D >= n here (power set), so c = sigma; output avg + Lap(600c/eps).
    x = np.linspace(0.0, 1.0, 6)
    sigma = 1.0
    empty = float(x.mean())  # a public convention chosen so that avg is sigma-Lipschitz on every subset
    out = run_trials(wrappers.subset_extension, key, 20_000, x, oracle_fn=wrappers.average_oracle(empty),
                     c=sigma, epsilon=3.0, delta=1e-6)
    assert not np.asarray(out.info.nonresponse).any()
    error = np.asarray(out.value) - x.mean()
    assert stats.kstest(error, stats.laplace(scale=200 * sigma).cdf).pvalue > TEST_FAILURE_RATE


def test_convex_minimizer_matches_a_reference_solver():
    f = wrappers.convex_minimizer_oracle(lower=-5.0, upper=5.0, huber_width=1.0)
    rng = np.random.default_rng(1)
    rows = rng.normal(1.0, 2.0, size=(7, 4))
    values = np.asarray(oracle.evaluate_levels(f, rows, depth=2))
    n = rows.shape[0]
    for index in [0, 3, 11, 20, values.size - 1]:
        removed = subsets.removal_set(n, index)
        items = rows[[i for i in range(n) if i not in removed]].ravel()
        loss = lambda t: np.where(np.abs(t - items) <= 1, 0.5 * (t - items) ** 2, np.abs(t - items) - 0.5).sum()
        reference = optimize.minimize_scalar(loss, bounds=(-5, 5), method="bounded", options=dict(xatol=1e-10)).x
        assert values[index] == pytest.approx(reference, abs=1e-4)


def test_user_level_erm_with_sens_o_matic(key):
    f = wrappers.convex_minimizer_oracle(lower=-2.0, upper=4.0)
    rows = np.random.default_rng(2).normal(1.0, 1.0, size=(10, 8))
    theta = float(f(rows, np.ones(10, bool)))
    out = run_trials(wrappers.sens_o_matic, key, 200, rows, oracle_fn=f, grid=np.linspace(-2, 4, 61),
                     epsilon=4.0, beta=0.2)
    assert np.median(np.abs(np.asarray(out.value) - theta)) <= 0.3


def test_edge_density_sees_exactly_the_induced_subgraph():
    rows = wrappers.gnp_adjacency(7, 0.5, key=jax.random.key(5), universe=9)
    adjacency = rows[:, 1:8]
    values = np.asarray(oracle.evaluate_levels(wrappers.edge_density_oracle(), rows, depth=7))
    for index in range(values.size):
        removed = subsets.removal_set(7, index)
        kept = [i for i in range(7) if i not in removed]
        pairs = list(itertools.combinations(kept, 2))
        expected = sum(adjacency[a, b] for a, b in pairs) / len(pairs) if pairs else 0.0
        assert values[index] == pytest.approx(expected, abs=1e-12)


def test_node_private_edge_density_of_gnp(key):
    # Sens-o-Matic needs n >> lam: with eps = 20, lam = 4 and D = ceil(3 - Lap(0.1)); a public cap of 6
    # (delta = e^20 P(D > 6) = e^-10 / 2) runs the level layout (regime B) on n = 24 vertices.
    n, p, epsilon = 24, 0.3, 20.0
    rows = wrappers.gnp_adjacency(n, p, key=jax.random.key(6))
    density = float(wrappers.edge_density_oracle()(rows, np.ones(n, bool)))
    grid = np.linspace(0, 1, 51)
    assert wrappers.sens_o_matic_depths(epsilon=epsilon, beta=0.2, grid_size=51) == (2, 4)
    assert wrappers.sens_o_matic_guarantee(epsilon=epsilon, beta=0.2, grid_size=51, max_depth=6).delta < 1e-4
    out = run_trials(wrappers.sens_o_matic, key, 20, rows, oracle_fn=wrappers.edge_density_oracle(), grid=grid,
                     epsilon=epsilon, beta=0.2, max_depth=6)
    assert not np.asarray(out.info.nonresponse).any()
    assert np.median(np.abs(np.asarray(out.value) - density)) <= 0.03
    assert math.isclose(density, p, abs_tol=0.15)
