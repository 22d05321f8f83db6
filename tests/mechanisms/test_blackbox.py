"""Black-box estimation over covering designs (spec 002 §2, §4, §6.1)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from gpuprivacy import audit, designs, oracle, subsets
from gpuprivacy.mechanisms import blackbox

TEST_FAILURE_RATE = 1e-6


def _chi_square_pvalue(samples, probabilities):
    counts = np.bincount(np.asarray(samples), minlength=probabilities.size)
    keep = probabilities > 0
    assert counts[~keep].sum() == 0
    return stats.chisquare(counts[keep], probabilities[keep] * counts.sum()).pvalue


# ---------------------------------------------------------------------------------------------------------------
# Spec §4.5, the hand-worked example.

def test_section_4_5_worked_example_exact_probabilities():
    family = designs.sample_and_aggregate(3, t=2)  # 3 disjoint blocks of one row
    f = blackbox.order_statistics_for(np.array([3, 1, 2]), family, cap=2)
    np.testing.assert_array_equal(f, [3, 2])
    ell, ell_bar = designs.hitting_counts(f, 4)
    np.testing.assert_array_equal(ell, [2, 2, 1, 0])
    np.testing.assert_array_equal(ell_bar, [2, 2, 2, 1])
    np.testing.assert_array_equal(blackbox.pure_scores(f, tau=1, num_outputs=4), [1, 1, 0, 0])
    for epsilon in (0.5, 1.0, 3.0):
        p = blackbox.blackbox_estimate_probabilities(f, epsilon=epsilon, tau=1, num_outputs=4)
        top = 1 / (2 + 2 * math.exp(-epsilon / 2))
        bottom = math.exp(-epsilon / 2) / (2 + 2 * math.exp(-epsilon / 2))
        np.testing.assert_allclose(p, [bottom, bottom, top, top], rtol=1e-12)


def test_pure_sampler_matches_exact_probabilities_and_rejects_a_wrong_epsilon():
    entry = audit.get("blackbox-estimate")
    (x, _), = entry.worst_case_pairs
    samples = np.asarray(entry.sample(jax.random.key(11), x, 200_000))
    design = designs.sample_and_aggregate(x.size, x.size - 1)
    values = blackbox.grid_values(x, oracle.mean, design, lower=0.0, upper=1.0, resolution=1.0)
    _, cap = designs.required_t("pure", epsilon=1.0, num_outputs=2, beta=0.5)
    f = blackbox.order_statistics_for(values.indices, design, cap=cap)
    right = blackbox.blackbox_estimate_probabilities(f, epsilon=1.0, tau=cap // 2, num_outputs=2)
    assert _chi_square_pvalue(samples, right) > TEST_FAILURE_RATE
    # Power: the neighbour's distribution (one rank lower) is rejected.
    wrong = blackbox.blackbox_estimate_probabilities(np.r_[f[1:], 0], epsilon=1.0, tau=cap // 2, num_outputs=2)
    assert _chi_square_pvalue(samples, wrong) < TEST_FAILURE_RATE


def test_audit_sampler_is_the_public_function_key_by_key():
    entry = audit.get("blackbox-estimate")
    (x, x_prime), = entry.worst_case_pairs
    design = designs.sample_and_aggregate(x.size, x.size - 1)
    key = jax.random.key(5)
    for dataset in (x, x_prime):
        samples = np.asarray(entry.sample(key, dataset, 8))
        present = ~np.isnan(dataset)
        for i, k in enumerate(jax.random.split(key, 8)):
            release = blackbox.blackbox_estimate(k, np.nan_to_num(dataset), oracle.mean, design=design, epsilon=1.0,
                                                 lower=0.0, upper=1.0, resolution=1.0, beta=0.5, present=present)
            assert int(release.info.index) == samples[i]


# ---------------------------------------------------------------------------------------------------------------
# Sensitivity 1 of the exact counts (Prop. A.1), by brute force over neighbours.

def test_exact_counts_have_sensitivity_one_on_thousands_of_random_instances():
    rng = np.random.default_rng(7)
    checked = 0
    for trial in range(2000):
        n, k = int(rng.integers(3, 8)), int(rng.integers(1, 8))
        keep = rng.random((k, n)) < rng.uniform(0.2, 0.7)
        keep[np.arange(k), rng.integers(0, n, k)] = True
        family = subsets.from_keep_masks(keep)
        values = rng.integers(0, 4, k)
        cap = n + 1
        # Both exact methods (the device transform on a quarter of the instances, to keep the test fast).
        plan = designs.aggregation_plan(family, cap, method="subset_transform" if trial % 4 == 0 else "branching")
        f = designs.robust_order_statistics(values, family, cap=cap, plan=plan)
        ell, ell_bar = designs.hitting_counts(f, 4)
        for j in range(n):
            # Emptying slot j leaves out every evaluation that keeps it (Lemma 4.1).
            neighbour_values = np.where(keep[:, j], 0, values)
            g = designs.robust_order_statistics(neighbour_values, family, cap=cap, plan=plan)
            assert (g <= f).all() and (g[:-1] >= f[1:]).all(), (keep, values, j)  # F(v+1) <= F'(v) <= F(v)
            ell2, ell_bar2 = designs.hitting_counts(g, 4)
            assert (0 <= ell - ell2).all() and (ell - ell2 <= 1).all()
            assert (0 <= ell_bar[1:] - ell_bar2[1:]).all() and (ell_bar[1:] - ell_bar2[1:] <= 1).all()
            checked += 1
    assert checked > 8000


def test_covering_gives_lemma_4_2_bounds():
    family = designs.block_design(36, t=4, c=2)
    rng = np.random.default_rng(8)
    for _ in range(50):
        values = rng.integers(0, 20, family.num_subsets)
        f = designs.robust_order_statistics(values, family, cap=6)
        assert f[0] == values.max()
        assert (f[:5] >= values.min()).all()  # t = 4: removing <= 4 rows leaves an intact evaluation


# ---------------------------------------------------------------------------------------------------------------
# Parameters: the spec's explicit constants.

def test_pure_dp_t_table_of_spec_section_2_3():
    table = {(0.5, 2, 1e-2): 44, (0.5, 2**8, 1e-3): 100, (1.0, 2, 1e-6): 60, (1.0, 2**8, 1e-2): 42,
             (1.0, 2**16, 1e-3): 72, (1.0, 2**32, 1e-6): 144, (2.0, 2**16, 1e-2): 32}
    for (epsilon, size, beta), t in table.items():
        assert designs.required_t("pure", epsilon=epsilon, num_outputs=size, beta=beta) == (t, t)


def test_zcdp_constants_of_spec_section_2_5():
    def rho_from(epsilon, delta):  # (4.9)
        return epsilon**2 / (4 * math.log(1 / delta) + 4 * epsilon)

    rho = rho_from(1.0, 1e-6)
    assert rho == pytest.approx(0.01687, abs=5e-6)
    assert designs.required_t("zcdp", rho=rho, num_outputs=2**8, beta=1e-2)[0] == 93
    assert designs.required_t("zcdp", rho=rho, num_outputs=2**16, beta=1e-3)[0] == 167
    steps, sigma, eta = designs.zcdp_search_parameters(rho=rho, num_outputs=2**8, beta=1e-2)
    assert steps == 8 and sigma == pytest.approx(math.sqrt(8 / (2 * rho)))
    assert eta == pytest.approx(sigma * stats.norm.isf(1e-2 / 8))


def test_binary_thresholds_of_spec_section_2_6():
    table = {(0.5, 1e-2): 15, (0.5, 1e-3): 24, (0.5, 1e-6): 52, (1.0, 1e-2): 7, (1.0, 1e-3): 12, (1.0, 1e-6): 26,
             (2.0, 1e-2): 3, (2.0, 1e-3): 6, (2.0, 1e-6): 13}
    for (epsilon, beta), t in table.items():
        assert designs.required_t("binary", epsilon=epsilon, beta=beta) == (t, t + 1)


def test_zcdp_and_binary_samplers_match_exact_probabilities():
    entry = audit.get("blackbox-estimate-zcdp")
    (x, x_prime), = entry.worst_case_pairs
    steps, sigma, eta = designs.zcdp_search_parameters(rho=0.5, num_outputs=2, beta=0.1)
    assert steps == 1
    for dataset, count in ((x, 3), (x_prime, 2)):
        samples = np.asarray(entry.sample(jax.random.key(2), dataset, 100_000))
        p_top = stats.norm.sf((eta - count) / sigma)  # one step: go up iff count + sigma Z > eta
        assert _chi_square_pvalue(samples, np.array([1 - p_top, p_top])) > TEST_FAILURE_RATE
        wrong = stats.norm.sf((eta - count + 1) / sigma)
        assert _chi_square_pvalue(samples, np.array([1 - wrong, wrong])) < TEST_FAILURE_RATE
    entry = audit.get("blackbox-binary")
    (x, x_prime), = entry.worst_case_pairs
    for dataset, count in ((x, 1), (x_prime, 0)):
        samples = np.asarray(entry.sample(jax.random.key(3), dataset, 100_000))
        p_one = stats.laplace.sf(1.0 - count)  # threshold (t + 1)/2 = 1, Laplace scale 1/epsilon = 1
        assert _chi_square_pvalue(samples, np.array([1 - p_one, p_one])) > TEST_FAILURE_RATE
        wrong = stats.laplace.sf(1.0 - count - 1)
        assert _chi_square_pvalue(samples, np.array([1 - wrong, wrong])) < TEST_FAILURE_RATE


# ---------------------------------------------------------------------------------------------------------------
# Accuracy (Thm 4.3/4.4/4.5): min_i v_i <= M <= max_i v_i with probability >= 1 - beta.

def test_accuracy_between_min_and_max_on_adversarial_values():
    grid = dict(lower=0.0, upper=1.0, resolution=1 / 15)
    beta = 0.05
    t, _ = designs.required_t("pure", epsilon=2.0, num_outputs=16, beta=beta)
    design = designs.block_design(5 * (t + 2), t, 2)
    rng = np.random.default_rng(4)
    values = np.where(rng.random(design.num_subsets) < 0.5, 12, 4)  # two clusters: an adversarial split
    failures, trials = 0, 300
    for i in range(trials):
        release = blackbox.blackbox_estimate_from_values(jax.random.key(i), values, design=design, epsilon=2.0,
                                                         beta=beta, **grid)
        failures += not (values.min() <= int(release.info.index) <= values.max())
    assert stats.binom.sf(failures - 1, trials, beta) > TEST_FAILURE_RATE, failures
    t_z, _ = designs.required_t("zcdp", rho=2.0, num_outputs=16, beta=beta)
    design_z = designs.sample_and_aggregate(4 * (t_z + 1), t_z)
    values_z = rng.integers(3, 9, design_z.num_subsets)
    failures = 0
    for i in range(trials):
        release = blackbox.blackbox_estimate_zcdp_from_values(jax.random.key(i), values_z, design=design_z, rho=2.0,
                                                              beta=beta, **grid)
        failures += not (values_z.min() <= int(release.info.index) <= values_z.max())
    assert stats.binom.sf(failures - 1, trials, beta) > TEST_FAILURE_RATE, failures


def test_end_to_end_median_with_a_planned_design():
    data = np.asarray(jax.random.normal(jax.random.key(0), (2400,)))
    plan = designs.plan_design(2400, budget=300, epsilon=1.0, num_outputs=41, beta=0.05)
    design = plan.build()
    release = blackbox.blackbox_estimate(jax.random.key(1), data, oracle.median, design=design, epsilon=1.0,
                                         lower=-1.0, upper=1.0, resolution=0.05, beta=0.05)
    assert release.info.num_subsets == plan.choice.num_subsets and release.info.t == plan.t
    assert release.info.nonprivate_num_nonresponses == 0
    assert abs(float(release.value)) <= 0.25  # the median of N(0,1) on 200-row subsets is within ~0.2
    assert float(release.value) <= release.info.nonprivate_max_value * 0.05 - 1.0 + 1e-9


# ---------------------------------------------------------------------------------------------------------------
# Bad input and totality.

def test_bad_inputs():
    data = np.linspace(0, 1, 60)
    grid = dict(lower=0.0, upper=1.0, resolution=0.1)
    t, _ = designs.required_t("pure", epsilon=1.0, num_outputs=11, beta=0.1)
    weak = designs.sample_and_aggregate(60, t=3)
    with pytest.raises(ValueError, match="does not cover t"):
        blackbox.blackbox_estimate(jax.random.key(0), data, oracle.mean, design=weak, epsilon=1.0, beta=0.1, **grid)
    good = designs.sample_and_aggregate(60, t=t)
    with pytest.raises(ValueError, match="range is empty"):
        blackbox.blackbox_estimate(jax.random.key(0), data, oracle.mean, design=good, epsilon=1.0, lower=1.0,
                                   upper=1.0, resolution=0.1)
    with pytest.raises(ValueError, match="resolution <= upper - lower"):
        blackbox.output_grid(lower=0.0, upper=1.0, resolution=2.0)
    with pytest.raises(ValueError, match="rows but the design"):
        blackbox.blackbox_estimate(jax.random.key(0), data[:-1], oracle.mean, design=good, epsilon=1.0, beta=0.1,
                                   **grid)
    with pytest.raises(ValueError):
        blackbox.blackbox_estimate(jax.random.key(0), np.r_[data[:-1], np.nan], oracle.mean, design=good,
                                   epsilon=1.0, beta=0.1, **grid)
    with pytest.raises(ValueError, match="epsilon"):
        blackbox.blackbox_estimate(jax.random.key(0), data, oracle.mean, design=good, epsilon=0.0, **grid)


def test_nan_and_out_of_range_oracle_values_are_nonresponses_not_clipped():
    t, _ = designs.required_t("pure", epsilon=1.0, num_outputs=11, beta=0.1)
    design = designs.sample_and_aggregate(5 * (t + 1), t)
    data = np.linspace(0, 1, design.n)

    @oracle.trusted
    def sometimes_bad(rows, valid):
        m = jnp.sum(jnp.where(valid, rows, 0.0)) / jnp.sum(valid).astype(jnp.float64)
        return jnp.where(m < 0.3, jnp.nan, jnp.where(m > 0.7, 5.0, m))

    values = blackbox.grid_values(data, sometimes_bad, design, lower=0.0, upper=1.0, resolution=0.1)
    assert values.num_nonresponses > 0
    raw = np.asarray(oracle.evaluate(sometimes_bad, data, design))
    bad = ~(np.isfinite(raw) & (raw >= 0) & (raw <= 1))
    assert values.num_nonresponses == bad.sum()
    assert (values.indices[bad] == 0).all()  # min Y = left out of the max, never the top of the range
    np.testing.assert_array_equal(values.indices[~bad], np.rint(raw[~bad] / 0.1).astype(int))
    release = blackbox.blackbox_estimate(jax.random.key(0), data, sometimes_bad, design=design, epsilon=1.0,
                                         lower=0.0, upper=1.0, resolution=0.1, beta=0.1)
    assert release.info.nonprivate_num_nonresponses == bad.sum()


def test_empty_slots_leave_their_evaluations_out():
    design = designs.block_design(24, t=2, c=2)
    data = np.arange(24.0)
    present = np.ones(24, dtype=bool)
    present[0] = False
    values = blackbox.grid_values(data, oracle.mean, design, lower=0.0, upper=30.0, resolution=1.0, present=present)
    keep = designs.keep_matrix(design)
    assert values.num_left_out == keep[:, 0].sum() > 0
    assert (values.indices[keep[:, 0]] == 0).all() and (values.indices[~keep[:, 0]] > 0).all()
    with pytest.raises(ValueError, match="present"):
        blackbox.grid_values(data, oracle.mean, design, lower=0.0, upper=30.0, resolution=1.0, present=present[1:])


def test_guarantees():
    assert blackbox.blackbox_estimate_guarantee(epsilon=0.7).epsilon == 0.7
    assert blackbox.blackbox_estimate_zcdp_guarantee(rho=0.1).rho == 0.1
    assert blackbox.blackbox_binary_guarantee(epsilon=2.0).epsilon == 2.0
    assert special.ndtri(0.5) == 0.0


def test_all_subsets_design_runs_through_the_evaluator():
    # m = t (all t-subsets, removed-form family): the least waste, k = binom(n, t).
    t, _ = designs.required_t("pure", epsilon=20.0, num_outputs=2, beta=0.4)
    design = designs.all_subsets_design(10, t)
    data = np.r_[np.ones(7), np.zeros(3)]
    values = blackbox.grid_values(data, oracle.median, design, lower=0.0, upper=1.0, resolution=1.0)
    # A subset's median is 0 only when t of the ones are removed... never here: >= 5 ones of 8 rows remain.
    assert values.indices.min() == 1 and design.num_subsets == math.comb(10, t)
    release = blackbox.blackbox_estimate_from_values(jax.random.key(0), values, design=design, epsilon=20.0,
                                                     lower=0.0, upper=1.0, resolution=1.0, beta=0.4)
    assert release.info.aggregation in ("subset_transform", "branching")  # the cheaper exact method


def test_conversions_of_spec_section_2_5():
    for (epsilon, delta), rho in {(1.0, 1e-5): 0.01998, (1.0, 1e-6): 0.01687, (1.0, 1e-9): 0.01151,
                                  (0.5, 1e-6): 0.004366, (2.0, 1e-6): 0.06323}.items():
        assert blackbox.zcdp_rho_for(epsilon=epsilon, delta=delta) == pytest.approx(rho, abs=6e-6)
    for (epsilon, delta), mu in {(1.0, 1e-6): 0.2367, (0.5, 1e-6): 0.1241, (2.0, 1e-6): 0.4483,
                                 (1.0, 1e-9): 0.1820}.items():
        assert blackbox.gdp_mu_for(epsilon=epsilon, delta=delta) == pytest.approx(mu, abs=6e-5)
    # The exact GDP route gives the spec's smaller t: 72 and 129 (vs 93 and 167 with (4.9)).
    mu = blackbox.gdp_mu_for(epsilon=1.0, delta=1e-6)
    assert designs.required_t("zcdp", rho=mu**2 / 2, num_outputs=2**8, beta=1e-2)[0] == 72
    assert designs.required_t("zcdp", rho=mu**2 / 2, num_outputs=2**16, beta=1e-3)[0] == 129
