import inspect
import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpuprivacy import ApproxDP, PureDP, ZCDP, audit, mechanisms
from tests.audit._controls import svt_control, too_little_noise_rnm

CONFIDENCE = 1 - 1e-6
SAMPLES = 10**5


def _worst(mechanism, samples=SAMPLES, key=0):
    results = [audit.audit(mechanism, x, x_prime, num_samples=samples, confidence=CONFIDENCE,
                           key=jax.random.key(key + i))
               for i, (x, x_prime) in enumerate(mechanism.worst_case_pairs)]
    return max(results, key=lambda r: r.epsilon_lower)


@pytest.mark.parametrize("name", audit.registered())
def test_every_registered_mechanism_holds_its_claim(name):
    mechanism = audit.get(name)
    assert not mechanism.positive_control
    assert mechanism.worst_case_pairs, f"{name} has no worst-case pairs to audit"
    result = _worst(mechanism)
    assert not result.violated, result
    assert result.epsilon_lower <= result.claimed_epsilon
    # The audit has power: the worst-case pair shows a real part of the claimed loss.
    assert result.epsilon_lower > 0.2 * min(result.claimed_epsilon, 1.0), result


def _public_mechanisms():
    """{function: its public names}, for public functions whose first parameter is ``key``, flat
    (``laplace_mechanism``) or in a family namespace (``wrappers.sens_o_matic``); one function may
    have both names. ``unsafe_*`` functions are positive controls (the tests register and flag them)."""
    names = {}
    namespaces = [("", mechanisms)] + [(f"{name}.", getattr(mechanisms, name)) for name in dir(mechanisms)
                                        if not name.startswith("_") and inspect.ismodule(getattr(mechanisms, name))]
    for prefix, namespace in namespaces:
        for name in dir(namespace):
            fn = getattr(namespace, name)
            if name.startswith(("_", "unsafe_")) or not inspect.isfunction(fn):
                continue
            params = list(inspect.signature(fn).parameters)
            if params[:1] == ["key"]:
                names.setdefault(fn, set()).add(prefix + name)
    return names


def test_every_public_mechanism_is_registered_with_the_auditor():
    public = _public_mechanisms()
    all_names = set().union(*public.values())
    assert "report_noisy_max" in all_names and "laplace_mechanism" in all_names  # the introspection works
    assert "sens_o_matic" in all_names and "wrappers.sens_o_matic" in all_names  # flat face and family namespace
    audited = {target for name in audit.registered() for target in audit.get(name).audits}
    missing = sorted(min(names) for names in public.values() if not names & audited)
    assert not missing, f"public mechanisms without an auditor entry: {missing}; register them in gpuprivacy.audit"


@pytest.mark.parametrize("variant,pair", [
    (3, "halves"), (4, "halves"), (5, "halves"), (6, "halves"), (5, "two"),
])
def test_lyu_su_li_broken_sparse_vector_variants_are_flagged(variant, pair):
    x, x_prime = {
        "halves": (np.r_[np.ones(5), np.zeros(5)], np.r_[np.zeros(5), np.ones(5)]),
        "two": (np.array([0.0, 1.0]), np.array([1.0, 0.0])),
    }[pair]
    control = svt_control(variant)
    result = audit.audit(control, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(1))
    assert result.violated, result
    assert result.epsilon_lower > result.claimed_epsilon


def test_report_noisy_max_with_too_little_noise_is_flagged():
    control = too_little_noise_rnm(num_candidates=10)
    x = np.eye(10)[0]
    x_prime = 1.0 - x
    result = audit.audit(control, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE)
    assert result.violated and result.epsilon_lower > 2.0


def test_a_correct_mechanism_audited_against_a_too_small_claim_is_flagged():
    # The same samples that pass at the true epsilon fail when the claim is halved: the verdict can flip.
    mechanism = audit.get("report-noisy-max-laplace")
    x, x_prime = mechanism.worst_case_pairs[0]
    honest = audit.audit(mechanism, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE)
    lying = audit.audit(mechanism, x, x_prime, claim=PureDP(0.3), num_samples=SAMPLES, confidence=CONFIDENCE)
    assert not honest.violated and lying.violated
    assert honest.epsilon_lower == lying.epsilon_lower


def test_random_neighbour_search_finds_a_violating_pair_and_a_fresh_audit_confirms_it():
    control = svt_control(5)
    control = audit.AuditableMechanism(
        name=control.name, sample=control.sample, claim=control.claim, output_kind="discrete",
        random_dataset=lambda key: np.asarray(jax.random.uniform(key, (4,), minval=-1.0, maxval=1.0)),
        random_neighbour=lambda key, x: x + np.asarray(jax.random.uniform(key, x.shape, minval=-1.0, maxval=1.0)),
        positive_control=True)
    found = audit.search_neighbours(control, jax.random.key(3), num_candidates=12, num_samples=20_000)
    assert found.selection_audit.epsilon_lower > 1.0
    fresh = audit.audit(control, found.dataset, found.neighbour, num_samples=SAMPLES, confidence=CONFIDENCE,
                        key=jax.random.key(99))
    assert fresh.violated


def test_search_on_a_correct_mechanism_stays_within_the_claim():
    mechanism = audit.get("report-noisy-max-gumbel", num_candidates=4)
    found = audit.search_neighbours(mechanism, jax.random.key(4), num_candidates=5, num_samples=20_000)
    fresh = audit.audit(mechanism, found.dataset, found.neighbour, num_samples=SAMPLES, confidence=CONFIDENCE)
    assert not fresh.violated


@pytest.mark.parametrize("n", [1000, 10**7])
def test_clopper_pearson_matches_scipy_beta_quantiles(n):
    k = np.array([0, 1, 5, 7, 500, n // 2, n - 1, n])
    alpha = 2.5e-8
    lower, upper = audit.clopper_pearson(k, n, alpha)
    ref_lower = np.where(k == 0, 0.0, stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1))
    ref_upper = np.where(k == n, 1.0, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)))
    # Never narrower than the exact interval; wider by at most 1e-4 relative (JAX's betainc
    # loses digits at n = 10^7, which the outward margin absorbs).
    assert np.all(lower <= ref_lower) and np.all(upper >= ref_upper)
    np.testing.assert_allclose(lower, ref_lower, rtol=1e-4)
    np.testing.assert_allclose(upper, ref_upper, rtol=1e-4)


def test_claims_are_compared_at_the_right_delta():
    assert audit.claimed_epsilon_at(PureDP(1.0), 0.0) == 1.0
    assert audit.claimed_epsilon_at(ApproxDP(1.0, 1e-5), 1e-5) == 1.0
    assert audit.claimed_epsilon_at(ApproxDP(1.0, 1e-5), 1e-7) == float("inf")
    assert audit.claimed_epsilon_at(ZCDP(0.5), 1e-6) == ZCDP(0.5).to_approx(1e-6).epsilon


def _constant_sampler(shape):
    return lambda key, x, n: jnp.zeros((n,) + shape(x), jnp.int32)


@pytest.mark.parametrize("kwargs,match", [
    ({"num_samples": 0}, "num_samples must be >= 1"),
    ({"confidence": 1.0}, r"confidence must lie in \(0, 1\)"),
    ({"confidence": 0.0}, r"confidence must lie in \(0, 1\)"),
    ({"claim": 1.0}, "must be a privacy guarantee"),
])
def test_bad_audit_arguments_are_clear_errors(kwargs, match):
    mechanism = audit.get("laplace")
    with pytest.raises((ValueError, TypeError), match=match):
        audit.audit(mechanism, np.zeros(1), np.ones(1), **{"num_samples": 100, **kwargs})


def test_mismatched_output_shapes_between_datasets_is_an_error():
    mechanism = audit.AuditableMechanism(name="shape-shifter", sample=_constant_sampler(lambda x: (len(x),)),
                                         claim=PureDP(1.0), output_kind="discrete", output_range_size=4)
    with pytest.raises(ValueError, match="output shapes differ"):
        audit.audit(mechanism, np.zeros(2), np.zeros(3), num_samples=100)


def test_a_sampler_returning_the_wrong_count_is_an_error():
    mechanism = audit.AuditableMechanism(name="short", sample=lambda key, x, n: jnp.zeros((n - 1,), jnp.int32),
                                         claim=PureDP(1.0), output_kind="discrete", output_range_size=2)
    with pytest.raises(ValueError, match=r"returned 1023 outputs for num_samples=1024"):
        audit.audit(mechanism, np.zeros(1), np.zeros(1), num_samples=100)


def test_cli_audit_json_reports_claim_bound_and_verdict():
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", "audit", "report-noisy-max-gumbel", "--samples",
                           "20000", "--epsilon", "0.5", "--epsilon", "2", "--json", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert [r["claim"]["epsilon"] for r in payload["results"]] == [0.5, 2.0]
    assert payload["violated"] is False
    assert all(0 < r["epsilon_lower"] <= r["claimed_epsilon"] for r in payload["results"])


def test_cli_audit_unknown_mechanism_fails_with_a_message():
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", "audit", "no-such-mechanism"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "no mechanism named" in proc.stderr
