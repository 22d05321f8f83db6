"""Auditor entries for the seed-002 mechanisms (black-box estimation over covering designs).

A dataset is a vector of n slots, one row each; NaN marks an empty slot (the
paper's ⊥), so neighbours differ by emptying one slot (add/remove, Sec. 3.2).
The oracle is the mean of the kept rows (an untrusted black box as far as
the mechanism knows) and the design is sample-and-aggregate with one row per
block, so the oracle values are the slot values themselves. The sampler runs
exactly the public pipeline: :func:`blackbox.grid_values` and the exact
order statistics once per dataset (deterministic), then the release kernel
vmapped over keys (``tests/mechanisms/test_blackbox.py`` checks that it
equals the public function key by key). Each entry's claim is the guarantee
that public function's release carries on the worst-case dataset
(:func:`~gpuprivacy.audit._classic.claim_of`, a real call: these estimators are host-routed).

Worst-case pairs (for Algorithm 4.1 of Steinke & Steinke 2025, derived by hand):

* pure DP (epsilon = 1, |Y| = 2, beta = 0.5 so tau = 3, t = C = 6, n = 7):
  three ones vs two ones; the scores move from (0, 0) to (-1, 1), so
  ``P[M = 1]`` drops from 1/2 to ``1/(1 + e)``: loss 0.62.
* zCDP (rho = 0.5, |Y| = 2, beta = 0.1: one Gaussian step with sigma = 1,
  eta = 1.28, C = 3, n = 3): count 3 vs 2, loss ~1.7 on the event M = 0.
* binary (epsilon = 1, beta = 0.25: t = 1, C = 2, threshold 1, n = 2):
  count 1 vs 0, loss exactly epsilon on M = 1.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from gpuprivacy import designs, oracle
from gpuprivacy.audit._classic import ReleaseSampler, claim_of
from gpuprivacy.audit._mechanism import AuditableMechanism, neighbours_empty_slot
from gpuprivacy.audit._registry import register
from gpuprivacy.designs import required_t, zcdp_search_parameters
from gpuprivacy.mechanisms import blackbox


def _slots(x):
    x = np.asarray(x, dtype=np.float64)
    present = ~np.isnan(x)
    return np.where(present, x, 0.0), present


def _order_statistics(x, design, cap, lower, upper, resolution, oracle_fn=oracle.mean):
    data, present = _slots(x)
    values = blackbox.grid_values(data, oracle_fn, design, lower=lower, upper=upper, resolution=resolution,
                                  present=present)
    return blackbox.order_statistics_for(values.indices, design, cap=cap)


def _sampler(kernel, public, design, cap, lower, upper, resolution, oracle_fn=oracle.mean) -> ReleaseSampler:
    """The public release on a slot vector, and its vectorised sampler over the release kernel.

    ``draw(key, x, n)``: F once per dataset, then ``kernel(key_i, F)`` (the released grid index) for n
    split keys, vmapped. ``release(key, x)``: ``public(key, data, present)``, the public estimator on
    the same slots, whose guarantee is the entry's claim.
    """
    @functools.partial(jax.jit, static_argnums=(2,))
    def draw(key, f, num_samples):
        return jax.vmap(lambda k: kernel(k, f))(jax.random.split(key, num_samples))

    def sample(key, x, num_samples):
        f = _order_statistics(x, design, cap, lower, upper, resolution, oracle_fn)
        return draw(key, jax.numpy.asarray(f), int(num_samples))

    def release(key, x):
        data, present = _slots(x)
        return public(key, data, present)

    return ReleaseSampler(release, sample)



def _random_bits(n):
    return lambda key: np.asarray(jax.random.bernoulli(key, 0.5, (n,)), dtype=np.float64)


def _empty_one_slot(key, x):
    x = np.array(x, dtype=np.float64)
    filled = np.flatnonzero(~np.isnan(x))
    if filled.size:
        x[filled[int(jax.random.randint(key, (), 0, filled.size))]] = np.nan
    return x


def blackbox_estimate_entry(epsilon=1.0, beta=0.5, oracle_fn=oracle.mean):
    grid = dict(lower=0.0, upper=1.0, resolution=1.0)
    t, cap = required_t("pure", epsilon=epsilon, num_outputs=2, beta=beta)
    tau, n = cap // 2, t + 1
    design = designs.sample_and_aggregate(n, t)
    # The kernel is the one blackbox_estimate_from_values calls after its checks.
    sample = _sampler(lambda k, f: blackbox.pure_release_kernel(k, f, epsilon, tau, 2),
                      lambda k, data, present: blackbox.blackbox_estimate(
                          k, data, oracle_fn, design=design, epsilon=epsilon, beta=beta, present=present, **grid),
                      design, cap, **grid, oracle_fn=oracle_fn)
    ones = min(tau, n)
    x = np.r_[np.ones(ones), np.zeros(n - ones)]
    x_prime = x.copy()
    x_prime[0] = np.nan
    return AuditableMechanism(
        name="blackbox-estimate", sample=sample, claim=claim_of(sample, x),
        output_kind="discrete", worst_case_pairs=((x, x_prime),), random_dataset=_random_bits(n),
        random_neighbour=_empty_one_slot,
        neighbours=neighbours_empty_slot(), output_range_size=2,
        audits=("blackbox.blackbox_estimate", "blackbox.blackbox_estimate_from_values", "blackbox.pure_release_kernel"),
        description="pure-DP black-box estimator (exponential mechanism on exact covering-design ranks, Thm 4.4)")


def blackbox_zcdp_entry(rho=0.5, beta=0.1):
    grid = dict(lower=0.0, upper=1.0, resolution=1.0)
    steps, sigma, eta = zcdp_search_parameters(rho=rho, num_outputs=2, beta=beta)
    t, cap = required_t("zcdp", rho=rho, num_outputs=2, beta=beta)
    n = t + 1
    design = designs.sample_and_aggregate(n, t)
    sample = _sampler(lambda k, f: blackbox.zcdp_release_kernel(k, f, sigma, eta, steps, 2),
                      lambda k, data, present: blackbox.blackbox_estimate_zcdp(
                          k, data, oracle.mean, design=design, rho=rho, beta=beta, present=present, **grid),
                      design, cap, **grid)
    x = np.ones(n)
    x_prime = x.copy()
    x_prime[0] = np.nan
    return AuditableMechanism(
        name="blackbox-estimate-zcdp", sample=sample, claim=claim_of(sample, x),
        output_kind="discrete", worst_case_pairs=((x, x_prime),), random_dataset=_random_bits(n),
        random_neighbour=_empty_one_slot,
        neighbours=neighbours_empty_slot(), output_range_size=2,
        audits=("blackbox.blackbox_estimate_zcdp", "blackbox.blackbox_estimate_zcdp_from_values",
                "blackbox.zcdp_release_kernel"),
        description="zCDP black-box estimator (noisy binary search on exact covering-design ranks, Thm 4.5)")


def blackbox_binary_entry(epsilon=1.0, beta=0.25):
    grid = dict(lower=0.0, upper=1.0, resolution=1.0)
    t, cap = required_t("binary", epsilon=epsilon, beta=beta)
    n = t + 1
    design = designs.sample_and_aggregate(n, t)
    threshold = (t + 1) / 2.0
    sample = _sampler(lambda k, f: blackbox.binary_release_kernel(k, f, epsilon, threshold),
                      lambda k, data, present: blackbox.blackbox_binary(
                          k, data, oracle.mean, design=design, epsilon=epsilon, beta=beta, present=present),
                      design, cap, **grid)
    ones = min(int(np.ceil(threshold)), n)
    x = np.r_[np.ones(ones), np.zeros(n - ones)]
    x_prime = x.copy()
    x_prime[0] = np.nan
    return AuditableMechanism(
        name="blackbox-binary", sample=sample, claim=claim_of(sample, x),
        output_kind="discrete", worst_case_pairs=((x, x_prime),), random_dataset=_random_bits(n),
        random_neighbour=_empty_one_slot,
        neighbours=neighbours_empty_slot(), output_range_size=2,
        audits=("blackbox.blackbox_binary", "blackbox.blackbox_binary_from_values",
                "blackbox.binary_release_kernel"),
        description="binary-output black-box estimator (Laplace on the exact capped hitting set, "
                    "Steinke & Steinke 2025, Sec. 1.2)")


register("blackbox-estimate", blackbox_estimate_entry, epsilon=1.0, beta=0.5)
register("blackbox-estimate-zcdp", blackbox_zcdp_entry, rho=0.5, beta=0.1)
register("blackbox-binary", blackbox_binary_entry, epsilon=1.0, beta=0.25)
