"""Positive controls for spec 001: invalid local-bound families break PLM's privacy and the auditor sees it.

(a) Removal-only bounds (spec 001 §4.3, §7 pitfall 2): for the maximum, the sup over datasets with at most
    l rows *removed* never exceeds max(x), so the support of PLM ends at max(x); a neighbour with a larger
    maximum releases values x's mechanism never produces. The exact (swap) bounds, U_l = upper, pass.
(b) Truncation at K without a range bound or tail (spec §2.7 "INVALID", pitfall 2): the median's bounds
    cut at K = 1 give supports [x_(m-1), x_(m+1)] that differ between neighbours. The capped family
    (max_pieces=1, level 1 jumps to the domain end, spec §2.7 (a)) passes.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import audit
from gpuprivacy.audit import AuditableMechanism
from gpuprivacy.mechanisms import instance_optimal as io

CONFIDENCE = 1 - 1e-6
SAMPLES = 10**5
EPSILON = 1.0


def _control(bounds_fn, name, positive):
    @functools.partial(jax.jit, static_argnums=2)
    def run(key, x, num_samples):
        bounds = bounds_fn(x)
        return jax.vmap(lambda k: io.piecewise_laplace(k, bounds, epsilon=EPSILON).value)(
            jax.random.split(key, num_samples))

    return AuditableMechanism(name=name, sample=lambda k, x, n: run(k, jnp.asarray(x, jnp.float64), int(n)),
                              claim=io.piecewise_laplace_guarantee(epsilon=EPSILON), output_kind="real",
                              positive_control=positive)


def _zero():
    return jnp.zeros((), jnp.float64)


def removal_only_max_bounds(x):
    xs = jnp.sort(x)
    n = xs.shape[0]
    upper = jnp.full(n + 1, xs[-1])  # removing rows never raises the max: NOT the sup over the swap ball
    lower = jnp.concatenate([xs[-1:], jnp.flip(xs)[1:], xs[:1]])
    return io.LocalBounds(upper, lower, _zero(), _zero(), jnp.asarray(10.0), jnp.asarray(0.0))


def exact_max_bounds(x):
    xs = jnp.sort(x)
    n = xs.shape[0]
    # Swap ball on [0, 10]: one swap can raise the max to 10; l swaps lower it to x_(n-l) (or 0).
    upper = jnp.concatenate([xs[-1:], jnp.full(n, 10.0)])
    lower = jnp.concatenate([jnp.flip(xs), jnp.zeros(1)])
    return io.LocalBounds(upper, lower, _zero(), _zero(), jnp.asarray(10.0), jnp.asarray(0.0))


def truncated_median_bounds(x):
    b = io.median_bounds(x, lower=0.0, upper=10.0)
    m = 2  # keep U_0, U_1: plain truncation, no range cap and no tail
    return io.LocalBounds(b.upper[:m], b.lower[:m], _zero(), _zero(), b.upper[m - 1], b.lower[m - 1])


def test_removal_only_bounds_are_flagged_and_exact_bounds_are_not():
    x, x_prime = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 9.0])
    broken = _control(removal_only_max_bounds, "plm-max-removal-only", True)
    flagged = audit.audit(broken, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(1))
    assert flagged.violated and flagged.epsilon_lower > 2 * EPSILON, flagged
    # The property test of (V2) catches it too, without sampling.
    violations = io.check_local_bounds_neighbours(
        lambda d: removal_only_max_bounds(jnp.asarray(d, jnp.float64)), [(x, x_prime)])
    assert violations
    exact = _control(exact_max_bounds, "plm-max-exact", False)
    assert io.check_local_bounds_neighbours(lambda d: exact_max_bounds(jnp.asarray(d, jnp.float64)),
                                            [(x, x_prime)]) == []
    honest = audit.audit(exact, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(1))
    assert not honest.violated, honest


def test_truncation_without_range_cap_is_flagged_and_the_cap_is_not():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    x_prime = np.array([1.0, 2.0, 3.0, 4.0, 4.5, 6.0, 7.0])
    broken = _control(truncated_median_bounds, "plm-median-truncated", True)
    flagged = audit.audit(broken, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(2))
    assert flagged.violated, flagged
    capped = _control(lambda d: io.median_bounds(d, lower=0.0, upper=10.0, max_pieces=1), "plm-median-capped",
                      False)
    honest = audit.audit(capped, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(2))
    assert not honest.violated, honest
