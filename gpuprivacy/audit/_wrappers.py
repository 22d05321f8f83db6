"""Auditor entries for the seed-000 privacy wrappers (Linder, Raskhodnikova, Smith & Steinke).

Neighbours are add/remove (Linder et al. 2025, Sec. 2): a dataset is a 1-D array of rows
and the neighbour adds one row. Each sampler runs the public wrapper through
:func:`gpuprivacy.mechanisms.run_trials` on a fixed batch of
``SAMPLES_PER_CALL`` keys (one compile per dataset size) and maps every
release to the audited output:

* Sens-o-Matic: the released pair (level l, grid index) as one integer.
* Shifted Inverse: the grid index, on the monotone count oracle (its promise).
* Subset-Extension: (released level l, test bit, sign of value - f(x)) as
  one integer; TAHOE: its released real level l (a post-processing of the
  release, so any loss it shows is a lower bound on the release's).
* Small-Diameter, Double-Monotonization, Cummings-Durfee, white-box Laplace:
  the real value. Worst case: the count oracle, whose value moves by the
  full c between neighbours (for Double-Monotonization also w).

Each claim is the guarantee the wrapper's release carries on the worst-case
dataset (:func:`~gpuprivacy.audit._classic.claim_of`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import mechanisms
from gpuprivacy.audit._classic import ReleaseSampler, claim_of
from gpuprivacy.audit._mechanism import AuditableMechanism, neighbours_add_remove
from gpuprivacy.audit._streams import SAMPLES_PER_CALL
from gpuprivacy.audit._registry import register
from gpuprivacy.mechanisms import wrappers
from gpuprivacy.oracle import count, trusted


def _sampler(mechanism, output, **params) -> ReleaseSampler:
    """``mechanism(key, x, **params)``, and ``output`` of its releases over a fixed batch of keys (run_trials)."""
    def sample(key, x, num_samples):
        release = mechanisms.run_trials(mechanism, key, SAMPLES_PER_CALL, np.asarray(x, np.float64), **params)
        return output(release)[:num_samples]

    return ReleaseSampler(lambda key, x: mechanism(key, np.asarray(x, np.float64), **params), sample)


def _ones_pair(size):
    # One pair: the auditor already bounds the loss in both directions (x over x' and x' over x).
    return ((np.ones(size), np.ones(size + 1)),)


def _random_dataset(size):
    return lambda key: np.asarray(jax.random.uniform(key, (size,)))


def _add_row(key, x):
    return np.concatenate([np.asarray(x, np.float64), np.asarray(jax.random.uniform(key, (1,)))])


@trusted  # package code: runs in-process like the library oracles
def _parity(rows, valid):
    """An adversarial, non-monotone, non-Lipschitz oracle: |z| mod 2 times 3."""
    del rows
    return (valid.sum() % 2).astype(jnp.float64) * 3.0


def sens_o_matic_entry(epsilon=2.0, beta=0.5, grid_size=4, oracle_fn=_parity, capacity=None):
    """Sens-o-Matic's claim holds for EVERY oracle: audited on the parity oracle, or on any ``oracle_fn``
    (e.g. an analyst's attack oracle, which the engine sandboxes) with a public ``capacity``."""
    params = dict(oracle_fn=oracle_fn, grid=np.arange(float(grid_size)), epsilon=epsilon, beta=beta,
                  capacity=capacity)
    output = lambda r: (r.info.level * (grid_size + 1) + r.info.index.astype(jnp.int64)).astype(jnp.int32)
    sample, pairs = _sampler(wrappers.sens_o_matic, output, **params), _ones_pair(2)
    return AuditableMechanism(
        name="sens-o-matic", sample=sample, claim=claim_of(sample, pairs[0][0]),
        output_kind="discrete", worst_case_pairs=pairs, random_dataset=_random_dataset(2),
        random_neighbour=_add_row,
        neighbours=neighbours_add_remove(), audits=("wrappers.sens_o_matic",),
        description="Sens-o-Matic on an adversarial parity oracle (released level and value)")


def shifted_inverse_entry(epsilon=2.0, beta=0.5, grid_size=5):
    params = dict(oracle_fn=count, grid=np.arange(float(grid_size)), epsilon=epsilon, beta=beta, depth=3)
    sample, pairs = _sampler(wrappers.shifted_inverse, lambda r: r.info.index, **params), _ones_pair(1)
    return AuditableMechanism(
        name="shifted-inverse", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="discrete",
        worst_case_pairs=pairs, random_dataset=_random_dataset(2), random_neighbour=_add_row,
        neighbours=neighbours_add_remove(),
        output_range_size=grid_size, audits=("wrappers.shifted_inverse",),
        description="Shifted Inverse on the monotone count oracle (its promise)")


def subset_extension_entry(epsilon=3.0, delta=1e-6):
    params = dict(oracle_fn=count, c=1.0, epsilon=epsilon, delta=delta)

    def output(r):
        bucket = jnp.where(r.info.nonresponse, 2, (r.value > 2.5).astype(jnp.int64)).astype(jnp.int64)
        return (r.info.level * 3 + bucket).astype(jnp.int32)

    sample, pairs = _sampler(wrappers.subset_extension, output, **params), _ones_pair(2)
    return AuditableMechanism(
        name="subset-extension", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="discrete",
        worst_case_pairs=pairs, random_dataset=_random_dataset(2), random_neighbour=_add_row,
        neighbours=neighbours_add_remove(),
        audits=("wrappers.subset_extension",),
        description="Subset-Extension: released level, test bit and side of the value")


def tahoe_entry(epsilon=3.0, delta=1e-6):
    params = dict(oracle_fn=count, c=1.0, epsilon=epsilon, delta=delta)
    sample, pairs = _sampler(wrappers.tahoe, lambda r: r.info.level, **params), _ones_pair(2)
    return AuditableMechanism(
        name="tahoe", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="real",
        worst_case_pairs=pairs, random_dataset=_random_dataset(2), random_neighbour=_add_row,
        neighbours=neighbours_add_remove(),
        audits=("wrappers.tahoe",), description="modified TAHOE: the released real level")


def small_diameter_entry(epsilon=8.0, r=2.0, c=1.0):
    params = dict(oracle_fn=count, r=r, c=c, epsilon=epsilon)
    sample, pairs = _sampler(wrappers.small_diameter_subset_extension, lambda r_: r_.value, **params), _ones_pair(1)
    return AuditableMechanism(
        name="small-diameter-subset-extension", sample=sample, claim=claim_of(sample, pairs[0][0]),
        output_kind="real", worst_case_pairs=pairs, random_dataset=_random_dataset(2), random_neighbour=_add_row,
        neighbours=neighbours_add_remove(),
        audits=("wrappers.small_diameter_subset_extension",),
        description="Small-Diameter Subset Extension, count clamped to [0, 2]")


def double_monotonization_entry(epsilon=8.0, r=2000.0, c=1.0, beta=0.05):
    params = dict(oracle_fn=count, r=r, c=c, epsilon=epsilon, beta=beta)
    sample, pairs = _sampler(wrappers.double_monotonization, lambda r_: r_.value, **params), _ones_pair(2)
    return AuditableMechanism(
        name="double-monotonization", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="real",
        worst_case_pairs=pairs, random_dataset=_random_dataset(2), random_neighbour=_add_row,
        neighbours=neighbours_add_remove(),
        audits=("wrappers.double_monotonization",), description="Double-Monotonization on the count oracle")


def cummings_durfee_entry(epsilon=1.0, c=1.0):
    params = dict(oracle_fn=count, c=c, epsilon=epsilon)
    sample, pairs = _sampler(wrappers.cummings_durfee, lambda r_: r_.value, **params), _ones_pair(2)
    return AuditableMechanism(
        name="cummings-durfee", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="real",
        worst_case_pairs=pairs, random_dataset=_random_dataset(2), random_neighbour=_add_row,
        neighbours=neighbours_add_remove(),
        audits=("wrappers.cummings_durfee",), description="Cummings-Durfee extension + Laplace, count oracle")


def white_box_laplace_entry(epsilon=1.0):
    params = dict(oracle_fn=count, sensitivity=1.0, epsilon=epsilon)
    sample, pairs = _sampler(wrappers.white_box_laplace, lambda r_: r_.value, **params), _ones_pair(2)
    return AuditableMechanism(
        name="white-box-laplace", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="real",
        worst_case_pairs=pairs, random_dataset=_random_dataset(2), random_neighbour=_add_row,
        neighbours=neighbours_add_remove(),
        audits=("wrappers.white_box_laplace",), description="white-box Laplace on the count oracle")


register("sens-o-matic", sens_o_matic_entry)
register("shifted-inverse", shifted_inverse_entry)
register("subset-extension", subset_extension_entry)
register("tahoe", tahoe_entry)
register("small-diameter-subset-extension", small_diameter_entry)
register("double-monotonization", double_monotonization_entry)
register("cummings-durfee", cummings_durfee_entry)
register("white-box-laplace", white_box_laplace_entry)
