"""The shared piece chooser: the inverse CDF of the masses shifted by their maximum.

``choose_piece`` draws index ``j`` with probability ``exp(log_mass[j]) / sum(exp(log_mass))``. It
replaced a log-space inverse CDF (``lax.cumlogsumexp``), and must draw the same law: checked here
against the exact probabilities (chi-square, alpha 1e-6, with a power check against a slightly wrong
law), against the log-space inverse CDF uniform by uniform, at log-masses far outside ``exp``'s range,
and for the properties the mechanisms rely on (zero-mass pieces never chosen, padding never changes a
draw).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from gpuprivacy.mechanisms._piecewise_sampler import choose_piece

ALPHA = 1e-6


def log_space_choice(uniform, log_mass):
    """The log-space inverse CDF the chooser replaced (reference)."""
    log_cdf = jax.lax.cumlogsumexp(log_mass)
    index = jnp.searchsorted(log_cdf, jnp.log(uniform) + log_cdf[-1], side="left")
    return jnp.minimum(index, log_mass.shape[0] - 1)


def draws(log_mass, num, seed=0):
    uniforms = jax.random.uniform(jax.random.key(seed), (num,), jnp.float64, minval=2.0**-60, maxval=1.0)
    return np.asarray(jax.jit(jax.vmap(choose_piece, in_axes=(0, None)))(uniforms, jnp.asarray(log_mass)))


def chi_square_p(counts, probabilities):
    expected = probabilities * counts.sum()
    return stats.chisquare(counts, expected).pvalue


def test_frequencies_match_the_masses_with_power():
    log_mass = np.log(np.array([0.5, 3.0, 1.0, 1.0, 2.0, 0.25, 4.0]))
    log_mass[3] = -np.inf  # one zero-mass piece
    chosen = draws(log_mass, 200_000)
    p = np.exp(log_mass) / np.exp(log_mass).sum()
    counts = np.bincount(chosen, minlength=p.size)
    assert counts[3] == 0
    keep = p > 0
    assert chi_square_p(counts[keep], p[keep]) > ALPHA
    # Power: the same draws against masses 10% off on one piece are rejected.
    wrong = np.exp(log_mass).copy()
    wrong[1] *= 1.1
    wrong /= wrong.sum()
    assert chi_square_p(counts[keep], wrong[keep]) < ALPHA


def test_same_choice_as_the_log_space_inverse_cdf():
    rng = np.random.default_rng(0)
    mismatches = 0
    for _ in range(20):
        log_mass = rng.normal(0.0, 30.0, 500)
        log_mass[rng.random(500) < 0.2] = -np.inf
        uniforms = jnp.asarray(rng.uniform(2.0**-60, 1.0, 2000))
        ours = jax.vmap(choose_piece, in_axes=(0, None))(uniforms, jnp.asarray(log_mass))
        reference = jax.vmap(log_space_choice, in_axes=(0, None))(uniforms, jnp.asarray(log_mass))
        mismatches += int(np.sum(np.asarray(ours) != np.asarray(reference)))
    # Both are float64 inverse CDFs of the same law: they may differ only where a uniform lands within
    # rounding of a piece boundary (probability ~1e-13 per draw here).
    assert mismatches == 0


def test_log_masses_beyond_the_exponent_range():
    # exp(-2000) and exp(+2000) are 0 and inf in float64; the shift keeps the law.
    for offset in (-2000.0, 0.0, 2000.0):
        log_mass = offset + np.log(np.array([1.0, 2.0, 1.0]))
        chosen = draws(log_mass, 40_000)
        counts = np.bincount(chosen, minlength=3)
        assert chi_square_p(counts, np.array([0.25, 0.5, 0.25])) > ALPHA
    # A piece e^-800 lighter than the heaviest is never chosen (as in log space: below 2^-64).
    assert set(draws(np.array([-800.0, 0.0, -800.0]), 10_000)) == {1}


def test_zero_mass_pieces_and_padding():
    log_mass = jnp.asarray([-jnp.inf, 0.5, -jnp.inf, -1.0, -jnp.inf])
    uniforms = jnp.linspace(2.0**-60, 1.0 - 2.0**-53, 1001)
    chosen = np.asarray(jax.vmap(choose_piece, in_axes=(0, None))(uniforms, log_mass))
    assert set(chosen) <= {1, 3}
    padded = jnp.concatenate([log_mass, jnp.full(37, -jnp.inf)])
    np.testing.assert_array_equal(chosen, jax.vmap(choose_piece, in_axes=(0, None))(uniforms, padded))
    # One piece with mass: always it, at the extremes of the uniform too.
    single = jnp.asarray([-jnp.inf, -jnp.inf, 3.0, -jnp.inf])
    assert set(np.asarray(jax.vmap(choose_piece, in_axes=(0, None))(uniforms, single))) == {2}
