"""Auditor entries for the private-median mechanisms of Tzamos et al. (2020).

A dataset is a vector of n records; neighbours differ in one record (replacement, fixed n).

* Private median (3.6): n = 48, L = 1/2, r = 1, R = 4, C = 6, epsilon = 1 (K = 2, a wide
  Laplace scale of 3, so the loss is measurable with 10^5 samples). Worst-case pairs follow the
  tie counterexample to Lemma 3.2 of Tzamos et al. 2020 (see docs/errata.md): two clusters of 24 records, and the neighbour
  moves one record from the lower cluster to the upper one, which moves the median across the
  gap. The exact threshold-event loss is about 0.49 of the claim 1 (computed from the pieces).
  The entry also covers :func:`private_median_trials`, which returns exactly the releases of
  :func:`private_median` for the same keys (tested in tests/mechanisms/test_median.py).
* Exponential-mechanism median: rank utility on [-4, 4]. Records spread evenly over [-3, 3] and the
  neighbour moves the smallest record to the top, which shifts the rank of every interval by one
  (utility change 1 everywhere, so the loss approaches the claim).

Each claim is the guarantee the audited release carries (:func:`~gpuprivacy.audit._classic.claim_of`).
"""

from __future__ import annotations

import jax
import numpy as np

from gpuprivacy.audit._classic import _vmapped_sampler, claim_of
from gpuprivacy.audit._mechanism import AuditableMechanism, neighbours_swap
from gpuprivacy.audit._registry import register
from gpuprivacy.mechanisms import median


def cluster_pairs(n=48, lower=0.0, upper=3.0):
    """Two clusters of n/2 records; the neighbour moves one record across."""
    half = n // 2
    x = np.r_[np.full(half, lower), np.full(n - half, upper)]
    x_prime = np.r_[np.full(half - 1, lower), np.full(n - half + 1, upper)]
    y = np.r_[np.full(half, -upper), np.full(n - half, upper)]
    y_prime = np.r_[np.full(half - 1, -upper), np.full(n - half + 1, upper)]
    return (x, x_prime), (y, y_prime)


def spread_pairs(n=48, width=3.0):
    """Evenly spread records; the neighbour moves the smallest one to the top (every rank shifts by one)."""
    x = np.linspace(-width, width, n)
    x_prime = x.copy()
    x_prime[0] = width
    return ((x, x_prime),)


def _random_dataset(n, spread):
    def dataset(key):
        k1, k2 = jax.random.split(key)
        centres = np.where(np.asarray(jax.random.bernoulli(k1, 0.5, (n,))), spread, -spread)
        return centres + np.asarray(jax.random.uniform(k2, (n,), minval=-0.1, maxval=0.1))
    return dataset


def _replace_one(spread):
    def neighbour(key, x):
        x = np.array(x, dtype=np.float64)
        k1, k2 = jax.random.split(key)
        index = int(jax.random.randint(k1, (), 0, x.shape[0]))
        x[index] = float(jax.random.uniform(k2, (), minval=-2 * spread, maxval=2 * spread))
        return x
    return neighbour


def private_median_entry(n=48, epsilon=1.0, min_density=0.5, radius=1.0, median_bound=4.0, constant=6.0):
    params = dict(epsilon=epsilon, min_density=min_density, radius=radius, median_bound=median_bound,
                  constant=constant)
    median.median_parameters(n, **params)  # validate eagerly
    sample = _vmapped_sampler(lambda k, x: median.private_median(k, x, **params))
    pairs = cluster_pairs(n)
    return AuditableMechanism(
        name="private-median", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="real",
        worst_case_pairs=pairs, random_dataset=_random_dataset(n, 3.0),
        random_neighbour=_replace_one(3.0),
        neighbours=neighbours_swap(), audits=("median.private_median", "median.private_median_trials"),
        description="optimal private median, general density (3.6) with the certified fast path (Tzamos et al.)")


def exponential_median_entry(n=48, epsilon=1.0, lower=-4.0, upper=4.0):
    # clip=True: the random neighbours draw records in [-6, 6], outside the domain; clamping is a
    # record-wise map covered by the guarantee (the mechanism's old, implicit behaviour).
    params = dict(epsilon=epsilon, lower=lower, upper=upper, clip=True)
    sample = _vmapped_sampler(lambda k, x: median.exponential_mechanism_median(k, x, **params))
    pairs = spread_pairs(n)
    return AuditableMechanism(
        name="exponential-mechanism-median", sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="real",
        worst_case_pairs=pairs, random_dataset=_random_dataset(n, 3.0),
        random_neighbour=_replace_one(3.0),
        neighbours=neighbours_swap(), audits=("median.exponential_mechanism_median",),
        description="exponential-mechanism median with rank utility (Smith 2011)")


register("private-median", private_median_entry)
register("exponential-mechanism-median", exponential_median_entry)
