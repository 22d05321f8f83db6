"""Positive controls for spec 004: the auditor must flag the paper's two unsound statements.

(a) Gaussian above threshold accounted with Theorem 10 as printed (the "+x" sign typo) under-reports
    the loss at stopping time t >= 2; the auditor flags it on Lemma 18's worst-case pair, and the
    corrected accounting passes on the same samples.
(b) FSRC with the paper's delta rule (Theorem 11/19: the same delta for every mechanism) on the
    two-output counterexample of spec 004 Sec. 3.5 violates its (1, 0.01)-DP claim; the sound
    per-step delta schedule holds.
"""

import math

import jax
import numpy as np
import pytest
from scipy import stats

from gpuprivacy import audit, mechanisms
from tests.audit._controls import (
    COUNTEREXAMPLE,
    above_threshold_worst_case_pair,
    counterexample_filter_control,
    counterexample_schedule,
    simulate_counterexample,
    theorem_10_literal_above_threshold,
    theorem_10_literal_epsilon_post,
)

CONFIDENCE = 1 - 1e-6
SAMPLES = 10**5


def test_theorem_10_literal_formula_reproduces_the_spec_values():
    # Spec 004 Sec. 3.3, typo 2: t = 2, rho = 0.5, sigma_X = 0.15, sigma_Z = sqrt(3) sigma_X, Delta = 1e-3, [0, 1].
    params = dict(threshold=0.5, sigma_threshold=0.15, sigma_query=0.15 * 3**0.5, sensitivity=1e-3, lower=0.0,
                  upper=1.0)
    assert theorem_10_literal_epsilon_post(2, **params) == pytest.approx(0.01143, abs=5e-6)
    correct = mechanisms.gaussian_above_threshold_epsilon_post(2, num_queries=2, **params)
    assert correct == pytest.approx(0.01779, abs=5e-6)
    # At t = 1 the sign does not matter (x and -x have the same law).
    assert theorem_10_literal_epsilon_post(1, **params) == pytest.approx(
        mechanisms.gaussian_above_threshold_epsilon_post(1, num_queries=2, **params), rel=1e-9)


def test_theorem_10_literal_accounting_is_flagged_and_the_corrected_one_is_not():
    control = theorem_10_literal_above_threshold()
    assert control.positive_control
    correct = mechanisms.gaussian_above_threshold_guarantee(
        threshold=0.5, sigma_threshold=0.3, sigma_query=0.3 * 3**0.5, sensitivity=0.2, lower=0.0, upper=1.0,
        num_queries=2)
    assert control.claim.epsilon < 0.75 < 1.0 < correct.epsilon  # 0.71 vs 1.05
    x, x_prime = above_threshold_worst_case_pair(2, 2, sensitivity=0.2, lower=0.0, upper=1.0)
    flagged = audit.audit(control, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(7))
    assert flagged.violated, flagged
    assert flagged.event == "output == 2" and flagged.epsilon_lower > control.claim.epsilon
    honest = audit.audit(control, x, x_prime, claim=correct, num_samples=SAMPLES, confidence=CONFIDENCE,
                         key=jax.random.key(7))
    assert not honest.violated and honest.epsilon_lower == flagged.epsilon_lower


def test_paper_mode_fsrc_is_flagged_on_the_counterexample():
    with pytest.warns(mechanisms.PaperModeWarning):
        control = counterexample_filter_control(mode="paper", **COUNTEREXAMPLE)
    assert control.positive_control
    assert (control.claim.epsilon, control.claim.delta) == (1.0, 0.01)  # the paper's Theorem 11 claim
    (x, x_prime), = control.worst_case_pairs
    result = audit.audit(control, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(8))
    assert result.violated, result
    assert result.event == "output == 1" and result.epsilon_lower > 3.0


def test_paper_mode_fsrc_violates_its_claim_by_clopper_pearson_bounds(key):
    # The event S = {the transcript contains "bad"} and the privacy loss L, simulated directly.
    K, epsilon, delta, n = COUNTEREXAMPLE["K"], COUNTEREXAMPLE["epsilon"], COUNTEREXAMPLE["delta"], 1 << 16
    with pytest.warns(mechanisms.PaperModeWarning):
        schedule = counterexample_schedule(128, mode="paper", p=COUNTEREXAMPLE["p"], K=K, delta=delta)
    loss, in_s = simulate_counterexample(jax.random.fold_in(key, 0), n, schedule, on_neighbour=False, K=K,
                                         epsilon=epsilon)
    _, in_s_prime = simulate_counterexample(jax.random.fold_in(key, 1), n, schedule, on_neighbour=True, K=K,
                                            epsilon=epsilon)
    alpha = (1 - CONFIDENCE) / 3  # three one-sided bounds
    k_loss, k_s, k_s_prime = int((np.asarray(loss) > epsilon).sum()), int(np.sum(in_s)), int(np.sum(in_s_prime))
    loss_lower = stats.beta.ppf(alpha, k_loss, n - k_loss + 1)
    s_lower = stats.beta.ppf(alpha, k_s, n - k_s + 1)
    s_prime_upper = stats.beta.ppf(1 - alpha, k_s_prime + 1, n - k_s_prime)
    assert loss_lower > 0.6  # Pr_D[L > 1] ~ 0.634 against a claimed delta of 0.01
    assert s_lower > math.exp(epsilon) * s_prime_upper + delta  # (1, 0.01)-DP fails on S
    assert math.exp(epsilon) * s_prime_upper + delta < 0.04  # ~0.028: the violation is not marginal


@pytest.mark.parametrize("mode", ["sound", "sound-adapted"])
def test_sound_fsrc_holds_on_the_counterexample(mode):
    control = counterexample_filter_control(mode=mode, **COUNTEREXAMPLE)
    assert not control.positive_control
    (x, x_prime), = control.worst_case_pairs
    result = audit.audit(control, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(9))
    assert not result.violated, result
