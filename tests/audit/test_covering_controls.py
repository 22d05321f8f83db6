"""Positive control for spec 002 §4.3 / §8 pitfall 3: a GREEDY hitting set breaks sensitivity 1, and the auditor flags it.

The control is the binary-output estimator (Laplace on the capped hitting-set
count ``l(x, 0)``, claimed epsilon-DP) with the exact minimum hitting set
replaced by the greedy one (most-hitting row first, lowest index on ties).
On the instance below the greedy count drops from 3 to 1 when one slot is
emptied (the exact count drops from 2 to 1), so the privacy loss on the
event ``M = 1`` is ``2 epsilon``. The same samples audited for the exact
aggregator stay within the claim.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import audit, designs, noise, subsets
from gpuprivacy.accounting import PureDP

CONFIDENCE = 1 - 1e-6
SAMPLES = 10**5
EPSILON = 1.0
THRESHOLD = 3.0
# Found by random search over 8-slot families (spec §4.3 reports 36 greedy violations in 9600 instances).
KEEP = np.array([[1, 0, 0, 0, 0, 1, 1, 0],
                 [0, 0, 0, 1, 0, 0, 1, 1],
                 [1, 0, 0, 1, 1, 0, 0, 0],
                 [1, 0, 1, 1, 0, 1, 1, 0],
                 [0, 0, 1, 0, 1, 1, 0, 0]], dtype=bool)
EMPTIED = 3


def greedy_hitting_set_size(keep):
    remaining = [set(np.flatnonzero(row).tolist()) for row in keep]
    size = 0
    while remaining:
        scores = [sum(j in s for s in remaining) for j in range(keep.shape[1])]
        j = int(np.argmax(scores))
        remaining = [s for s in remaining if j not in s]
        size += 1
    return size


def _counts(x, aggregator):
    """l(x, 0) for slot values x in {0, 1, NaN}: evaluations that keep an empty slot are left out."""
    present = ~np.isnan(x)
    value = np.array([1 if (present[row].all() and (x[row] == 1).all()) else 0 for row in KEEP])
    if aggregator == "greedy":
        return float(greedy_hitting_set_size(KEEP[value == 1]))
    family = subsets.from_keep_masks(KEEP)
    f = designs.robust_order_statistics(value, family, cap=KEEP.shape[1])
    return float((f > 0).sum())


def binary_control(aggregator):
    @functools.partial(jax.jit, static_argnums=2)
    def draw(key, count, num_samples):
        keys = jax.random.split(key, num_samples)
        z = jax.vmap(lambda k: noise.laplace(k, (), jnp.float64))(keys)
        return (count + z / EPSILON > THRESHOLD).astype(jnp.int32)

    def sample(key, x, num_samples):
        return draw(key, jnp.float64(_counts(np.asarray(x, dtype=np.float64), aggregator)), int(num_samples))

    x = np.ones(KEEP.shape[1])
    x_prime = x.copy()
    x_prime[EMPTIED] = np.nan
    return audit.AuditableMechanism(
        name=f"blackbox-binary-{aggregator}-hitting-set", sample=sample, claim=PureDP(EPSILON), output_kind="discrete",
        worst_case_pairs=((x, x_prime),), output_range_size=2, positive_control=aggregator == "greedy",
        description=f"binary black-box estimator with a {aggregator} hitting set")


def test_the_instance_breaks_greedy_but_not_exact_sensitivity():
    x = np.ones(KEEP.shape[1])
    x_prime = x.copy()
    x_prime[EMPTIED] = np.nan
    assert (_counts(x, "greedy"), _counts(x_prime, "greedy")) == (3.0, 1.0)
    assert (_counts(x, "exact"), _counts(x_prime, "exact")) == (2.0, 1.0)


def test_greedy_hitting_set_is_flagged_and_exact_is_not():
    greedy = binary_control("greedy")
    (x, x_prime), = greedy.worst_case_pairs
    flagged = audit.audit(greedy, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(21))
    assert flagged.violated, flagged
    assert flagged.epsilon_lower > 1.5 * EPSILON
    exact = binary_control("exact")
    honest = audit.audit(exact, x, x_prime, num_samples=SAMPLES, confidence=CONFIDENCE, key=jax.random.key(21))
    assert not honest.violated, honest
    assert honest.epsilon_lower > 0.7 * EPSILON  # the exact pair is tight at epsilon


def test_greedy_violates_sensitivity_on_random_instances_exact_never_does():
    rng = np.random.default_rng(1)
    greedy_violations = exact_violations = 0
    for _ in range(1500):
        keep = rng.random((int(rng.integers(3, 10)), 8)) < rng.uniform(0.2, 0.5)
        keep[np.arange(keep.shape[0]), rng.integers(0, 8, keep.shape[0])] = True
        family = subsets.from_keep_masks(keep)
        plan = designs.aggregation_plan(family, 9, method="branching")
        ones = np.ones(keep.shape[0], dtype=np.int64)
        exact = int((designs.robust_order_statistics(ones, family, cap=9, plan=plan) > 0).sum())
        greedy = greedy_hitting_set_size(keep)
        for j in range(8):
            left = ~keep[:, j]
            exact_j = int((designs.robust_order_statistics(left.astype(np.int64), family, cap=9, plan=plan) > 0).sum())
            greedy_j = greedy_hitting_set_size(keep[left])
            exact_violations += abs(exact - exact_j) > 1
            greedy_violations += abs(greedy - greedy_j) > 1
    assert exact_violations == 0
    assert greedy_violations > 0
