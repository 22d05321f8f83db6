"""Auditor entries for the classic mechanisms (issue 2's ``gpuprivacy.mechanisms``).

For these mechanisms a "dataset" is the vector of exact query answers, and
neighbouring datasets are answer vectors that differ by at most the
sensitivity in every coordinate (the standard abstraction of Dwork & Roth
2014, Sec. 3.3). Worst-case pairs:

* additive noise: a shift by exactly the sensitivity (Laplace: every output
  event has ratio at most e^epsilon, attained by the tail events);
* selection: one candidate up by Delta and all others down by Delta, with
  many candidates, which pushes the exponential mechanism's ratio towards
  e^epsilon;
* AboveThreshold / sparse vector: all queries at the threshold on one side
  and shifted by Delta on the other (Lyu, Su & Li 2017, Sec. 3).

Every entry's claim is read off the release it audits (:func:`claim_of`),
never recomputed from a ``*_guarantee`` function: the auditor checks exactly
the guarantee the mechanism states on its :class:`~gpuprivacy.mechanisms.Release`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import caller_checks_data, data_checked_by_caller, is_tracer
from gpuprivacy import mechanisms
from gpuprivacy.audit._mechanism import AuditableMechanism, neighbours_within
from gpuprivacy.audit._registry import register


@dataclasses.dataclass(frozen=True)
class ReleaseSampler:
    """The auditor's ``sample(key, x, num_samples)``, kept next to the public release it samples.

    Attributes:
      release: ``release(key, x) -> Release``, the public mechanism call the entry audits on one
        dataset ``x`` with one key. The entry's claim is the guarantee this release carries
        (:func:`claim_of`).
      draw: ``draw(key, x, num_samples) -> outputs[num_samples, ...]``, the audited output (the
        release's value or a post-processing of it) for ``num_samples`` keys, batched on the device.
    """

    release: Callable[[Any, Any], mechanisms.Release]
    draw: Callable[[Any, Any, int], Any]

    def __call__(self, key, x, num_samples):
        return self.draw(key, x, num_samples)


def claim_of(sampler: ReleaseSampler, example) -> Any:
    """The guarantee ``sampler.release(key, example)`` states, read off the release without drawing noise.

    :func:`gpuprivacy.mechanisms.guarantee_of` traces the call abstractly (or calls it once for a
    host-routed mechanism) and returns :attr:`Release.guarantee`. ``example`` is a dataset of the
    entry (its first worst-case dataset): the guarantee depends on public parameters and shapes only.
    """
    return mechanisms.guarantee_of(sampler.release, jax.random.key(0), example)


def _value(release):
    return release.value


def _vmapped_sampler(release, output=_value) -> ReleaseSampler:
    """``draw(key, x, n)`` = ``output(release(key_i, x))`` for n split keys, jitted per (x shape, n)."""
    @functools.partial(jax.jit, static_argnums=2)
    def run(key, x, num_samples):
        return jax.vmap(lambda k: output(release(k, x)))(jax.random.split(key, num_samples))

    def draw(key, x, num_samples):
        if not caller_checks_data() and not is_tracer(x):
            release(key, x)  # the mechanism's own data checks on this concrete dataset, before it is traced
        with data_checked_by_caller():
            return run(key, jnp.asarray(x, jnp.float64), int(num_samples))

    return ReleaseSampler(release, draw)


def _shift_neighbour(sensitivity):
    def neighbour(key, x):
        x = np.asarray(x, dtype=np.float64)
        return x + np.asarray(jax.random.uniform(key, x.shape, minval=-sensitivity, maxval=sensitivity))
    return neighbour


def _random_scores(size, spread=3.0):
    return lambda key: np.asarray(jax.random.uniform(key, (size,), minval=0.0, maxval=spread))


def _shift_pairs(sensitivity):
    return ((np.array([0.0]), np.array([sensitivity])),)


def laplace_entry(epsilon=1.0, sensitivity=1.0, secure=False):
    sample = _vmapped_sampler(lambda k, x: mechanisms.laplace_mechanism(
        k, x[0], epsilon=epsilon, sensitivity=sensitivity, secure=secure))
    pairs = _shift_pairs(sensitivity)
    return AuditableMechanism(
        name="laplace-mechanism[secure=true]" if secure else "laplace-mechanism", sample=sample,
        claim=claim_of(sample, pairs[0][0]),
        output_kind="real", worst_case_pairs=pairs,
        random_dataset=_random_scores(1), random_neighbour=_shift_neighbour(sensitivity),
        neighbours=neighbours_within(sensitivity),
        audits=("laplace_mechanism",), description="Laplace mechanism on a scalar query")


def gaussian_entry(epsilon=1.0, delta=1e-5, sensitivity=1.0, calibration="analytic"):
    sample = _vmapped_sampler(lambda k, x: mechanisms.gaussian_mechanism(
        k, x[0], epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration))
    pairs = _shift_pairs(sensitivity)
    return AuditableMechanism(
        name=f"gaussian-mechanism[calibration={calibration}]", sample=sample,
        claim=claim_of(sample, pairs[0][0]),
        output_kind="real", worst_case_pairs=pairs,
        random_dataset=_random_scores(1), random_neighbour=_shift_neighbour(sensitivity),
        neighbours=neighbours_within(sensitivity),
        audits=("gaussian_mechanism",), description="Gaussian mechanism (approximate DP)")


def gaussian_zcdp_entry(rho=0.5, sensitivity=1.0):
    sample = _vmapped_sampler(lambda k, x: mechanisms.gaussian_mechanism_zcdp(
        k, x[0], rho=rho, sensitivity=sensitivity))
    pairs = _shift_pairs(sensitivity)
    return AuditableMechanism(
        name="gaussian-mechanism-zcdp", sample=sample, claim=claim_of(sample, pairs[0][0]),
        output_kind="real", worst_case_pairs=pairs,
        random_dataset=_random_scores(1), random_neighbour=_shift_neighbour(sensitivity),
        neighbours=neighbours_within(sensitivity),
        audits=("gaussian_mechanism_zcdp",), description="Gaussian mechanism calibrated to rho-zCDP")


def _selection_pairs(num_candidates, sensitivity):
    x = np.zeros(num_candidates)
    x[0] = sensitivity
    x_prime = np.full(num_candidates, sensitivity)
    x_prime[0] = 0.0
    return ((x, x_prime), (np.zeros(num_candidates), np.eye(num_candidates)[0] * sensitivity))


def selection_entry(noise="gumbel", epsilon=1.0, sensitivity=1.0, num_candidates=10, literal_pf=False):
    if literal_pf:
        release = lambda k, x: mechanisms.permute_and_flip(k, x, epsilon=epsilon, sensitivity=sensitivity)
        name, audits = "permute-and-flip", ("permute_and_flip",)
    elif noise == "em":
        release = lambda k, x: mechanisms.exponential_mechanism(k, x, epsilon=epsilon, sensitivity=sensitivity)
        name, audits = "exponential-mechanism", ("exponential_mechanism",)
    else:
        release = lambda k, x: mechanisms.report_noisy_max(k, x, epsilon=epsilon, sensitivity=sensitivity,
                                                           noise=noise)
        name, audits = f"report-noisy-max[noise={noise}]", ("report_noisy_max",)
    sample = _vmapped_sampler(release)
    pairs = _selection_pairs(num_candidates, sensitivity)
    return AuditableMechanism(
        name=name, sample=sample, claim=claim_of(sample, pairs[0][0]), output_kind="discrete",
        worst_case_pairs=pairs,
        random_dataset=_random_scores(num_candidates), random_neighbour=_shift_neighbour(sensitivity),
        neighbours=neighbours_within(sensitivity),
        output_range_size=num_candidates, audits=audits, description=f"private selection ({name})")


def _threshold_pairs(num_queries, threshold, sensitivity):
    at = np.full(num_queries, threshold)
    return ((at, at - sensitivity), (at - sensitivity, at),
            (np.r_[at[:-1] - sensitivity, threshold], np.r_[at[:-1], threshold - sensitivity]))


def above_threshold_entry(epsilon=1.0, sensitivity=1.0, threshold=0.0, num_queries=5):
    sample = _vmapped_sampler(lambda k, x: mechanisms.above_threshold(k, x, threshold=threshold, epsilon=epsilon,
                                                                      sensitivity=sensitivity))
    pairs = _threshold_pairs(num_queries, threshold, sensitivity)
    return AuditableMechanism(
        name="above-threshold", sample=sample, claim=claim_of(sample, pairs[0][0]),
        output_kind="discrete", worst_case_pairs=pairs,
        random_dataset=lambda key: np.asarray(jax.random.uniform(key, (num_queries,), minval=-2.0, maxval=2.0)),
        random_neighbour=_shift_neighbour(sensitivity),
        neighbours=neighbours_within(sensitivity), output_range_size=num_queries + 1,
        audits=("above_threshold",), description="Laplace AboveThreshold (Lyu-Su-Li Alg. 1, c = 1)")


def sparse_vector_entry(epsilon=1.0, sensitivity=1.0, threshold=0.0, num_queries=5, max_positives=2):
    sample = _vmapped_sampler(lambda k, x: mechanisms.sparse_vector(
        k, x, threshold=threshold, epsilon=epsilon, max_positives=max_positives, sensitivity=sensitivity))
    pairs = _threshold_pairs(num_queries, threshold, sensitivity)
    return AuditableMechanism(
        name="sparse-vector", sample=sample, claim=claim_of(sample, pairs[0][0]),
        output_kind="discrete", worst_case_pairs=pairs,
        random_dataset=lambda key: np.asarray(jax.random.uniform(key, (num_queries,), minval=-2.0, maxval=2.0)),
        random_neighbour=_shift_neighbour(sensitivity),
        neighbours=neighbours_within(sensitivity), output_range_size=2**num_queries,
        audits=("sparse_vector",), description="Laplace sparse vector (Lyu-Su-Li Alg. 1)")


register("laplace-mechanism", laplace_entry, epsilon=1.0)
register("laplace-mechanism[secure=true]", laplace_entry, epsilon=1.0)
register("gaussian-mechanism[calibration=analytic]", gaussian_entry, epsilon=1.0, delta=1e-3)
register("gaussian-mechanism[calibration=classic]", gaussian_entry, epsilon=0.9, delta=1e-3)
register("gaussian-mechanism-zcdp", gaussian_zcdp_entry, rho=0.5)
register("exponential-mechanism", functools.partial(selection_entry, noise="em"), epsilon=1.0)
for _noise in mechanisms.NOISE_NAMES:
    register(f"report-noisy-max[noise={_noise}]", selection_entry, epsilon=1.0)
register("permute-and-flip", functools.partial(selection_entry, literal_pf=True), epsilon=1.0)
register("above-threshold", above_threshold_entry, epsilon=1.0)
register("sparse-vector", sparse_vector_entry, epsilon=1.0)
