"""Covering designs (spec 002 §3): constructions, the exact verifier, bounds, the planner, exact aggregation."""

import itertools
import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from gpuprivacy import designs, subsets

DATA = json.loads((Path(__file__).parents[1] / "data" / "covering_numbers.json").read_text())


def _all_constructions():
    # Each family is built when its test runs, not while pytest collects (1.4 s in every worker).
    key = jax.random.key(3)
    return [
        ("sample_and_aggregate", lambda: designs.sample_and_aggregate(20, t=4), 4),
        ("blocks c=2", lambda: designs.block_design(31, t=5, c=2), 5),
        ("blocks c=3 permuted", lambda: designs.block_design(40, t=3, c=3, key=key), 3),
        ("all t-subsets", lambda: designs.all_subsets_design(7, 2), 2),
        ("random patched", lambda: designs.random_design(key, 60, num_chunks=12, removed_chunks=8, t=3), 3),
        ("greedy", lambda: designs.greedy_design(30, num_chunks=9, removed_chunks=5, t=2), 2),
    ]


@pytest.mark.parametrize("name,build,t", _all_constructions(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_construction_covers_exactly_its_t(name, build, t):
    family = build()
    assert designs.verify_covering(family, t)
    assert designs.covering_strength(family, max_t=t + 3) == t
    # The verifier can fail: one more row is always too many for these designs.
    assert not designs.verify_covering(family, t + 1)
    with pytest.raises(ValueError, match="not a t"):
        designs.check_covering(family, t + 1)


def test_verifier_agrees_with_brute_force_on_random_families():
    rng = np.random.default_rng(0)
    for _ in range(150):
        n, k = int(rng.integers(3, 8)), int(rng.integers(1, 7))
        keep = rng.random((k, n)) < 0.6
        keep[np.arange(k), rng.integers(0, n, k)] = True
        family = subsets.from_keep_masks(keep)
        for t in range(n):
            brute = all(any(not keep[i, list(T)].any() for i in range(k))
                        for T in itertools.combinations(range(n), t))
            assert designs.verify_covering(family, t) == brute, (keep, t)


def test_block_design_sizes_and_shapes():
    # Table 6.1 rows 1-3: k = binom(t + c, c), n - m = c floor(n / (t + c)); leftover rows are never kept.
    for t, c in [(4, 1), (5, 2), (3, 3)]:
        n = 7 * (t + c) + 2
        family = designs.block_design(n, t, c)
        keep = designs.keep_matrix(family)
        assert family.num_subsets == designs.block_design_size(t, c) == math.comb(t + c, c)
        assert (keep.sum(1) == c * (n // (t + c))).all()
        assert keep[:, -2:].sum() == 0
    assert designs.sample_and_aggregate(46, 22).num_subsets == 23  # (3.31)


def test_section_6_1_identities():
    for n, t in [(9, 3), (12, 5), (20, 2)]:
        assert designs.schonheim_bound(n, n, t) == 1  # C(n, n, t) = 1
        assert designs.schonheim_bound(n, t, t) == math.comb(n, t)  # (3.29)
    for n, t in [(7, 2), (6, 3)]:
        family = designs.all_subsets_design(n, t)
        assert family.num_subsets == math.comb(n, t) and designs.covering_strength(family) == t
    # Schonheim at m/n = t/(t+1) is t + 1: sample-and-aggregate is optimal.
    for t in (22, 42, 56):
        assert designs.schonheim_bound(3 * (t + 1), 3 * t, t) == t + 1
    steiner = {(7, 3, 2): 7, (9, 3, 2): 12, (13, 4, 2): 13, (8, 4, 3): 14, (10, 4, 3): 30, (12, 6, 5): 132,
               (24, 8, 5): 759, (6, 3, 2): 6}
    for (n, m, t), value in steiner.items():
        assert designs.schonheim_bound(n, m, t) == value
    assert designs.schonheim_bound(24, 8, 5) == designs.binomial_ratio(24, 8, 5) == 759


def test_bounds_against_reference_covering_numbers():
    rows = DATA["ilp_verified"]["rows"]
    assert len(rows) >= 20
    for row in rows:
        n, m, t = row["v"], row["k"], row["t"]
        assert designs.schonheim_bound(n, m, t) == row["schonheim"]
        assert designs.random_cover_upper_bound(n, m, t) == row["prop37_upper"]
        assert float(designs.binomial_ratio(n, m, t)) == pytest.approx(row["binom_ratio_lb"], abs=1e-4)
        if row["ilp_status"] == "optimal":
            assert designs.schonheim_bound(n, m, t) <= row["ilp_value"] <= row["prop37_upper"]
    for row in DATA["steiner"]:
        assert designs.schonheim_bound(row["v"], row["k"], row["t"]) == row["C"]
    for row in DATA["oeis_A011975_C_n_3_2"]["rows"]:
        assert designs.schonheim_bound(row["v"], 3, 2) == row["C"]  # Fort-Hedlund: C(n,3,2) = Schonheim


def test_our_verified_designs_are_never_smaller_than_known_covering_numbers():
    known = {(r["v"], r["k"], r["t"]): r["ilp_value"] for r in DATA["ilp_verified"]["rows"]
             if r["ilp_status"] == "optimal"}
    checked = 0
    for (n, m, t), value in known.items():
        if math.comb(n, m) * math.comb(n, t) > 10**7 or n > 12:
            continue
        family = designs.greedy_design(n, num_chunks=n, removed_chunks=m, t=t)
        assert designs.verify_covering(family, t)
        assert family.num_subsets >= value  # C is the minimum: a smaller verified cover would be a bug
        checked += 1
    assert checked >= 5


def test_prop_3_7_and_corollary_3_8_inequalities_on_a_grid():
    for n in (12, 30, 100):
        for m in range(3, n, max(1, n // 6)):
            for t in range(2, min(m, 8) + 1):
                r = float(designs.binomial_ratio(n, m, t))
                lower, upper = designs.corollary_3_8_bounds(n, m, t)
                assert (n / m) ** t <= lower * (1 + 1e-12) and lower <= r * (1 + 1e-12)  # (3.21), (3.25)
                assert r <= designs.schonheim_bound(n, m, t) <= designs.random_cover_upper_bound(n, m, t)
                assert designs.random_cover_upper_bound(n, m, t) < r * (1 + math.log(math.comb(m, t))) + 1
                assert designs.schonheim_bound(n, m, t) <= upper


def test_spec_section_3_4_numbers():
    n, m, t = 2400, 2200, 22
    assert float(designs.binomial_ratio(n, m, t)) == pytest.approx(6.84, abs=0.01)
    assert designs.schonheim_bound(n, m, t) == 43
    assert designs.random_cover_upper_bound(n, m, t) == 833
    assert designs.block_design_size(22, 2) == 276
    assert designs.block_design_size(56, 4) == 487635


def test_theorem_5_1_lower_bound_examples():
    log10, t = designs.oracle_calls_lower_bound(1000, 100, epsilon=0.1, delta=1e-6)
    assert t == 54 and 10**log10 == pytest.approx(9.5e54, rel=0.01)
    log10, t = designs.oracle_calls_lower_bound(1000, 400, epsilon=0.1, delta=1e-6)
    assert t == 53 and 10**log10 == pytest.approx(3.3e16, rel=0.02)
    log10, t = designs.oracle_calls_lower_bound(1000, 100, epsilon=0.5, delta=1e-6)
    assert t == 12 and 10**log10 == pytest.approx(2.8e6, rel=0.02)
    log10, t = designs.oracle_calls_lower_bound(2400, 2200, epsilon=1.0, delta=1e-6)
    assert t == 0 and 10**log10 == pytest.approx(0.5, rel=1e-5)  # vacuous regime (spec §5.3)


def test_planner_maximises_rows_per_evaluation_within_budget():
    plan = designs.plan_design(2400, budget=300, epsilon=1.0, num_outputs=16, beta=0.1)
    assert plan.t == 2 * designs.pure_tau(epsilon=1.0, num_outputs=16, beta=0.1) == 22
    assert plan.choice.num_subsets <= 300
    assert plan.choice.kept_size == max(c.kept_size for c in plan.candidates) == 2 * (2400 // 24)
    assert plan.choice.c == 2
    family = plan.build()
    assert family.num_subsets == plan.choice.num_subsets and designs.verify_covering(family, plan.t)
    small = designs.plan_design(2400, budget=23, epsilon=1.0, num_outputs=16, beta=0.1)
    assert small.choice.c == 1 and small.choice.num_subsets == 23
    with pytest.raises(ValueError, match="no covering design"):
        designs.plan_design(2400, budget=22, epsilon=1.0, num_outputs=16, beta=0.1)
    tiny = designs.plan_design(10, budget=100, epsilon=20.0, num_outputs=2, beta=0.4)
    # m = t (all t-subsets, or equivalently blocks of one row with c = n - t): the least waste.
    assert tiny.t == 2 and tiny.choice.kept_size == 10 - tiny.t and tiny.choice.num_subsets == 45
    assert "all_subsets" in {c.design for c in tiny.candidates}


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="t must be <= m"):
        designs.schonheim_bound(10, 3, 4)
    with pytest.raises(ValueError, match="m must be <= n"):
        designs.schonheim_bound(10, 11, 2)
    with pytest.raises(ValueError, match="blocks"):
        designs.block_design(5, t=5, c=1)
    with pytest.raises(ValueError, match="t must be < n"):
        designs.all_subsets_design(5, 5)
    with pytest.raises(ValueError, match="removed_chunks"):
        designs.random_design(jax.random.key(0), 20, num_chunks=10, removed_chunks=10, t=2)
    with pytest.raises(ValueError, match="t must be <= 3"):
        designs.random_design(jax.random.key(0), 20, num_chunks=10, removed_chunks=3, t=4)
    with pytest.raises(ValueError, match="max_subsets"):
        designs.block_design(1000, t=40, c=5)
    empty = np.ones((3, 6), dtype=bool)
    empty[1] = False  # m = n for one evaluation: nothing to evaluate, nothing can hit it
    with pytest.raises(ValueError, match="m = n"):
        designs.aggregation_plan(subsets.from_keep_masks(empty), 2)


# ---------------------------------------------------------------------------------------------------------------
# Exact aggregation F(v).

def _brute_force_statistics(keep, values, cap):
    k, n = keep.shape
    out = []
    for v in range(cap):
        best = None
        for removed in itertools.combinations(range(n), min(v, n)):
            alive = ~keep[:, list(removed)].any(1) if removed else np.ones(k, dtype=bool)
            value = int(values[alive].max()) if alive.any() else 0
            best = value if best is None else min(best, value)
        out.append(best)
    return np.array(out)


def test_every_exact_method_matches_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(120):
        n, k = int(rng.integers(3, 8)), int(rng.integers(1, 7))
        keep = rng.random((k, n)) < 0.5
        keep[np.arange(k), rng.integers(0, n, k)] = True
        family = subsets.from_keep_masks(keep)
        values = rng.integers(0, 5, k)
        cap = int(rng.integers(1, n + 2))
        expected = _brute_force_statistics(keep, values, cap)
        for method in ("subset_transform", "branching"):
            got = designs.robust_order_statistics(values, family, cap=cap, method=method)
            np.testing.assert_array_equal(got, expected)


def test_sample_and_aggregate_statistics_are_the_sorted_values():
    family = designs.sample_and_aggregate(50, t=9)
    values = np.random.default_rng(2).integers(0, 100, 10)
    plan = designs.aggregation_plan(family, 12)
    assert plan.method == "sort"
    got = designs.robust_order_statistics(values, family, cap=12)
    np.testing.assert_array_equal(got, np.r_[np.sort(values)[::-1], 0, 0])


def test_block_design_statistics_agree_across_methods():
    family = designs.block_design(60, t=4, c=2)  # 15 subsets on 6 block-chunks
    rng = np.random.default_rng(3)
    for _ in range(20):
        values = rng.integers(0, 9, family.num_subsets)
        a = designs.robust_order_statistics(values, family, cap=5, method="subset_transform")
        b = designs.robust_order_statistics(values, family, cap=5, method="branching")
        np.testing.assert_array_equal(a, b)
        assert (np.diff(a) <= 0).all() and a[0] == values.max()
        assert (a >= values.min()).all()  # Lemma 4.2: the design covers t = 4 = cap - 1


def test_large_designs_are_refused_before_any_data():
    family = designs.block_design(200, t=30, c=2)  # 32 chunks: no transform; branching bound 2^29
    with pytest.raises(ValueError, match="refused before any data"):
        designs.aggregation_plan(family, 30, max_work=10**6)
    # The refusal is a function of the design and cap only: no values are involved.
    assert designs.aggregation_plan(family, 3, max_work=10**6).method == "branching"
