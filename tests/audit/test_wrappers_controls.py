"""Positive controls for spec 000: the auditor must flag the two unsound uses the spec warns about.

(a) P4 / B3: the Shifted Inverse mechanism run on a non-monotone oracle (it is private only under the
    monotonicity promise). Sens-o-Matic on the same oracle passes (it monotonizes first).
(b) P6: Sens-o-Matic with a depth cap but still claiming pure DP. The released level l = n - max_depth
    has positive probability under x and none under x + {i}, so no finite epsilon holds; the exact
    (epsilon, e^epsilon P(D > cap)) accounting of the library passes on the same samples.
"""

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import PureDP, audit, oracle
from gpuprivacy.mechanisms import run_trials, wrappers

CONFIDENCE = 1 - 1e-6
SAMPLES = 10**5


@oracle.trusted
def _drops_f_when_zero_is_present(rows, valid):
    # Adding the row 0.0 lowers f from 2 to 0: a non-monotone oracle.
    return jnp.where((valid & (rows == 0.0)).any(), 0.0, 2.0)


def _control(mechanism, output, claim, **params):
    def sample(key, x, num_samples):
        release = run_trials(mechanism, key, audit.SAMPLES_PER_CALL, np.asarray(x, np.float64), **params)
        return output(release)[:num_samples]

    return audit.AuditableMechanism(name="control", sample=sample, claim=claim, output_kind="discrete",
                                    positive_control=True)


def test_shifted_inverse_on_a_non_monotone_oracle_is_flagged_and_sens_o_matic_is_not():
    x, x_prime = np.array([1.0]), np.array([1.0, 0.0])
    params = dict(oracle_fn=_drops_f_when_zero_is_present, grid=np.arange(3.0), epsilon=2.0, beta=0.5)
    control = _control(wrappers.shifted_inverse, lambda r: r.info.index, wrappers.shifted_inverse_guarantee(
        epsilon=2.0), depth=2, **params)
    flagged = audit.audit(control, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(1))
    assert flagged.violated and flagged.epsilon_lower > 2.5, flagged  # exact loss: (eps/2)(lam + 1) = 3
    wrapped = _control(wrappers.sens_o_matic, lambda r: (r.info.level * 4 + r.info.index.astype(jnp.int64)
                                                         ).astype(jnp.int32),
                       wrappers.sens_o_matic_guarantee(epsilon=2.0, beta=0.5, grid_size=3), **params)
    honest = audit.audit(wrapped, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(2))
    assert not honest.violated, honest


def test_a_depth_cap_claimed_as_pure_dp_is_flagged_and_the_exact_delta_is_not():
    # eps = 2, k = 4, beta = 0.5: lam = 22, D = ceil(16.5 - Lap(1)); P(D = 18) = (e^-0.5 - e^-1.5)/2 = 0.19 and
    # P(D > 18) = e^-1.5/2, so the exact delta is e^2 e^-1.5/2 = 0.82. The audited output is the released level
    # (a post-processing of the release), BOT as -1000.
    assert wrappers.sens_o_matic_depths(epsilon=2.0, beta=0.5, grid_size=4) == (11, 22)
    params = dict(oracle_fn=wrappers.average_oracle(), grid=np.arange(4.0), epsilon=2.0, beta=0.5, max_depth=18)
    x, x_prime = np.ones(3), np.ones(4)
    output = lambda r: jnp.where(r.info.nonresponse, -1000, r.info.level).astype(jnp.int32)
    control = _control(wrappers.sens_o_matic, output, PureDP(epsilon=2.0), **params)
    flagged = audit.audit(control, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(3))
    assert flagged.violated and flagged.epsilon_lower > 4.0, flagged
    exact = wrappers.sens_o_matic_guarantee(epsilon=2.0, beta=0.5, grid_size=4, max_depth=18)
    assert 0.8 < exact.delta < 0.85
    honest = audit.audit(control, x, x_prime, claim=exact, num_samples=SAMPLES, confidence=CONFIDENCE,
                         key=jax.random.key(3))
    assert not honest.violated, honest
