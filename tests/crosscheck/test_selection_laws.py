"""The laws of the exponential mechanism, report noisy max and permute-and-flip against OpenDP's samplers.

OpenDP 0.16's ``make_noisy_max`` adds Gumbel noise under zCDP (the exponential mechanism's law) and
exponential noise under pure DP (permute-and-flip's law, Ding et al. 2021), to the scores as given,
with ``scale`` the noise scale: the same parametrisation as ours, b = 2 Delta / epsilon. The exact laws
are computed here independently (softmax; the permute-and-flip integral with NumPy polynomials).
"""

import functools

import jax
import numpy as np
import pytest

from tests.crosscheck import _common as c

REASON = "the crosscheck extra is not installed (pip install -e '.[crosscheck]')"
dp = pytest.importorskip("opendp.prelude", reason=REASON)
pytest.importorskip("diffprivlib", reason=REASON)

from diffprivlib.mechanisms import Exponential  # noqa: E402

from gpuprivacy import mechanisms  # noqa: E402

dp.enable_features("contrib")

SCORES = np.array([0.0, 1.0, 2.0, 0.5, 1.5, -1.0, 3.0])
EPSILON, SENSITIVITY = 2.0, 1.0
SCALE = 2 * SENSITIVITY / EPSILON
WRONG = 1.1  # the power checks use the law at 1.1 x the scale, i.e. epsilon / 1.1
NUM_OURS = 100_000
NUM_PEER = 20_000  # OpenDP draws one selection per call (~0.1 ms each)
PARAMS = {"scores": SCORES.tolist(), "epsilon": EPSILON, "sensitivity": SENSITIVITY}
SELECTIONS = np.arange(len(SCORES) + 1) - 0.5  # category edges: one category per candidate


def exponential_law(scores, scale):
    logits = (scores - scores.max()) / scale
    p = np.exp(logits)
    return p / p.sum()


def permute_and_flip_law(scores, scale):
    """p_r = q_r * int_0^1 prod_{j != r} (1 - t q_j) dt, q_j = exp((s_j - max s) / b), by exact polynomial algebra."""
    q = np.exp((scores - scores.max()) / scale)
    law = np.empty_like(q)
    for r in range(len(q)):
        poly = functools.reduce(np.polynomial.polynomial.polymul, [[1.0, -q[j]] for j in range(len(q)) if j != r],
                                np.array([1.0]))
        law[r] = q[r] * np.sum(poly / np.arange(1, len(poly) + 1))
    return law


def _ours(mechanism, epsilon, seed, **kwargs):
    keys = jax.random.split(jax.random.key(seed), NUM_OURS)
    run = jax.vmap(lambda k: mechanism(k, SCORES, epsilon=epsilon, sensitivity=SENSITIVITY, **kwargs).value)
    return np.asarray(run(keys))


@functools.lru_cache(maxsize=None)
def _opendp_samples(measure_name):
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float))
    measure = {"max_divergence": dp.max_divergence(), "zero_concentrated_divergence":
               dp.zero_concentrated_divergence()}[measure_name]
    measurement = dp.m.make_noisy_max(*space, measure, scale=SCALE)
    scores = SCORES.tolist()
    return np.array([measurement(scores) for _ in range(NUM_PEER)])


def _opendp_call(measure_name):
    return (f"m.make_noisy_max(vector_domain(atom_domain(T=float, nan=False)), linf_distance(T=float), "
            f"{measure_name}(), scale={SCALE})(scores), {NUM_PEER} draws")


def _check(comparison, *, topic, quantity, ours_call, ours, ours_wrong, measure_name, law, wrong_law):
    c.check_law(comparison, topic=topic, quantity=quantity, parameters=PARAMS, ours_call=ours_call,
                library="OpenDP", peer_call=_opendp_call(measure_name), law=law, wrong_law=wrong_law,
                ours_counts=c.counts(ours, SELECTIONS), peer_counts=c.counts(_opendp_samples(measure_name), SELECTIONS),
                ours_wrong_counts=c.counts(ours_wrong, SELECTIONS), wrong_description=f"scale x {WRONG}")


def test_exponential_mechanism_law(comparison):
    law, wrong_law = exponential_law(SCORES, SCALE), exponential_law(SCORES, SCALE * WRONG)
    np.testing.assert_allclose(
        mechanisms.exponential_mechanism_probabilities(SCORES, epsilon=EPSILON, sensitivity=SENSITIVITY), law,
        rtol=1e-13)
    ours = _ours(mechanisms.exponential_mechanism, EPSILON, 31)
    ours_wrong = _ours(mechanisms.exponential_mechanism, EPSILON / WRONG, 32)
    _check(comparison, topic="exponential-mechanism-law", quantity="law of exponential_mechanism",
           ours_call=f"mechanisms.exponential_mechanism(key, scores, epsilon={EPSILON}), {NUM_OURS} keys",
           ours=ours, ours_wrong=ours_wrong, measure_name="zero_concentrated_divergence", law=law,
           wrong_law=wrong_law)

    # diffprivlib's Exponential computes the law in closed form: compare it with ours, candidate by candidate.
    mechanism = c.peer(Exponential, epsilon=EPSILON, sensitivity=SENSITIVITY, utility=SCORES.tolist())
    theirs = np.diff(np.concatenate([[0.0], mechanism._probabilities]))
    mine = np.asarray(mechanisms.exponential_mechanism_probabilities(SCORES, epsilon=EPSILON,
                                                                     sensitivity=SENSITIVITY))
    worst = int(np.argmax(np.abs(mine - theirs) / theirs))
    # Both exponentiate shifted utilities in float64 (diffprivlib then differences a cumulative sum).
    c.compare(comparison, topic="exponential-mechanism-law", quantity="probability, worst candidate",
              parameters={**PARAMS, "candidate": worst}, ours=float(mine[worst]),
              ours_call=f"mechanisms.exponential_mechanism_probabilities(scores, epsilon={EPSILON})[{worst}]",
              library="diffprivlib", peer_value=float(theirs[worst]),
              peer_call=f"diff(mechanisms.Exponential(epsilon={EPSILON}, sensitivity={SENSITIVITY}, "
                        f"utility=scores)._probabilities)[{worst}]",
              tol=1e-12, exact=float(law[worst]), ours_safe=abs(mine[worst] - law[worst]) <= 1e-13 * law[worst])


def test_report_noisy_max_law(comparison):
    # Gumbel noise: bit-identical to the exponential mechanism with the same keys.
    gumbel = _ours(mechanisms.report_noisy_max, EPSILON, 31, noise="gumbel")
    np.testing.assert_array_equal(gumbel, _ours(mechanisms.exponential_mechanism, EPSILON, 31))
    gumbel_wrong = _ours(mechanisms.report_noisy_max, EPSILON / WRONG, 32, noise="gumbel")
    _check(comparison, topic="report-noisy-max-law", quantity="law of report_noisy_max(noise='gumbel')",
           ours_call=f"mechanisms.report_noisy_max(key, scores, epsilon={EPSILON}, noise='gumbel'), {NUM_OURS} keys",
           ours=gumbel, ours_wrong=gumbel_wrong, measure_name="zero_concentrated_divergence",
           law=exponential_law(SCORES, SCALE), wrong_law=exponential_law(SCORES, SCALE * WRONG))
    # Exponential noise: permute-and-flip's law.
    ours = _ours(mechanisms.report_noisy_max, EPSILON, 33, noise="exponential")
    ours_wrong = _ours(mechanisms.report_noisy_max, EPSILON / WRONG, 34, noise="exponential")
    _check(comparison, topic="report-noisy-max-law", quantity="law of report_noisy_max(noise='exponential')",
           ours_call=f"mechanisms.report_noisy_max(key, scores, epsilon={EPSILON}, noise='exponential'), "
                     f"{NUM_OURS} keys",
           ours=ours, ours_wrong=ours_wrong, measure_name="max_divergence",
           law=permute_and_flip_law(SCORES, SCALE), wrong_law=permute_and_flip_law(SCORES, SCALE * WRONG))


def test_permute_and_flip_law(comparison):
    law, wrong_law = permute_and_flip_law(SCORES, SCALE), permute_and_flip_law(SCORES, SCALE * WRONG)
    np.testing.assert_allclose(
        mechanisms.permute_and_flip_probabilities(SCORES, epsilon=EPSILON, sensitivity=SENSITIVITY), law,
        rtol=1e-12)
    ours = _ours(mechanisms.permute_and_flip, EPSILON, 35)
    ours_wrong = _ours(mechanisms.permute_and_flip, EPSILON / WRONG, 36)
    _check(comparison, topic="permute-and-flip-law", quantity="law of permute_and_flip",
           ours_call=f"mechanisms.permute_and_flip(key, scores, epsilon={EPSILON}), {NUM_OURS} keys",
           ours=ours, ours_wrong=ours_wrong, measure_name="max_divergence", law=law, wrong_law=wrong_law)
