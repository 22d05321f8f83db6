"""The exact discrete Laplace and discrete Gaussian samplers against OpenDP's.

OpenDP's ``make_laplace`` / ``make_gaussian`` on an integer domain add exact discrete Laplace /
discrete Gaussian noise (CKS 2020), so their outputs on zeros are samples of the same laws. Four
chi-square tests at alpha = 1e-6 per law (``_common.check_law``): ours and OpenDP's against the exact
pmf, ours against OpenDP's, and two power checks against the law at 1.1 x the scale.
"""

import jax
import numpy as np
import pytest

from tests.crosscheck import _common as c

REASON = "the crosscheck extra is not installed (pip install -e '.[crosscheck]')"
dp = pytest.importorskip("opendp.prelude", reason=REASON)

from gpuprivacy import noise  # noqa: E402

dp.enable_features("contrib")

NUM_OURS = 100_000
NUM_PEER = 100_000  # OpenDP samples a vector in one call: 1e5 samples take about a second
WRONG = 1.1


def _laplace_log_pmf(scale):
    return lambda z: -np.abs(z) / scale


def _gaussian_log_pmf(sigma):
    return lambda z: -(z.astype(np.float64) ** 2) / (2 * sigma**2)


def _run(comparison, *, topic, name, parameter, value, sampler, opendp_measurement, log_pmf, seed, peer_call):
    edges, law = c.integer_categories(log_pmf(value), num_samples=NUM_PEER)
    support = np.arange(-10_000, 10_001)
    wrong_p = np.exp(log_pmf(value * WRONG)(support))
    wrong_law = c.category_probabilities(support, wrong_p / wrong_p.sum(), edges)
    key = jax.random.key(seed)
    ours = np.asarray(sampler(jax.random.fold_in(key, 0), value, (NUM_OURS,)))
    ours_wrong = np.asarray(sampler(jax.random.fold_in(key, 1), value * WRONG, (NUM_OURS,)))
    measurement = opendp_measurement(value)
    theirs = np.asarray(c.peer(measurement, [0] * NUM_PEER))
    c.check_law(comparison, topic=topic, quantity=f"law of {name}", parameters={parameter: value},
                ours_call=f"noise.{name}(key, {value!r}, ({NUM_OURS},))", library="OpenDP", peer_call=peer_call,
                law=law, wrong_law=wrong_law, ours_counts=c.counts(ours, edges), peer_counts=c.counts(theirs, edges),
                ours_wrong_counts=c.counts(ours_wrong, edges), wrong_description=f"{parameter} x {WRONG}")


def test_discrete_laplace_sampler(comparison):
    scale = 10.0 / 3.0  # not dyadic: both read the float64 exactly
    space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int))
    _run(comparison, topic="discrete-laplace-sampler", name="discrete_laplace", parameter="scale", value=scale,
         sampler=noise.discrete_laplace, opendp_measurement=lambda s: dp.m.make_laplace(*space, scale=s),
         log_pmf=_laplace_log_pmf, seed=20261201,
         peer_call=f"m.make_laplace(vector_domain(atom_domain(T=int)), l1_distance(T=int), scale={scale!r})"
                   f"([0] * {NUM_PEER})")


def test_discrete_gaussian_sampler(comparison):
    sigma = 3.7
    space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=float))
    _run(comparison, topic="discrete-gaussian-sampler", name="discrete_gaussian", parameter="sigma", value=sigma,
         sampler=noise.discrete_gaussian, opendp_measurement=lambda s: dp.m.make_gaussian(*space, scale=s),
         log_pmf=_gaussian_log_pmf, seed=20261202,
         peer_call=f"m.make_gaussian(vector_domain(atom_domain(T=int)), l2_distance(T=float), scale={sigma!r})"
                   f"([0] * {NUM_PEER})")
