"""The shared piece chooser: the inverse CDF of the masses shifted by their maximum.

``choose_piece`` draws index ``j`` with probability ``exp(log_mass[j]) / sum(exp(log_mass))``. It
replaced a log-space inverse CDF (``lax.cumlogsumexp``), and must draw the same law: checked here
against the exact probabilities (chi-square, alpha 1e-6, with a power check against a slightly wrong
law), against the log-space inverse CDF uniform by uniform, at log-masses far outside ``exp``'s range,
and for the properties the mechanisms rely on (zero-mass pieces never chosen, padding never changes a
draw), over one block of pieces and over many (the chooser searches blocks of ``_BLOCK`` pieces, then a
piece inside the block).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from gpuprivacy.mechanisms._piecewise_sampler import _BLOCK, choose_piece  # private: the chooser's block size

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


def test_frequencies_over_many_blocks_with_power():
    """The two-level search (blocks of ``_BLOCK`` pieces, then a piece) draws the law over 300 pieces, zero-mass
    pieces included; the same draws reject masses 10% off on 30 of the pieces (power)."""
    rng = np.random.default_rng(4)
    log_mass = rng.normal(0.0, 1.0, 300)
    log_mass[rng.random(300) < 0.3] = -np.inf
    chosen = draws(log_mass, 600_000, seed=4)
    p = np.exp(log_mass) / np.exp(log_mass).sum()
    counts = np.bincount(chosen, minlength=p.size)
    assert np.all(counts[p == 0] == 0)
    keep = p > 0
    assert chi_square_p(counts[keep], p[keep]) > ALPHA
    wrong = np.exp(log_mass)
    wrong[np.flatnonzero(keep)[:30]] *= 1.1
    wrong /= wrong.sum()
    assert chi_square_p(counts[keep], wrong[keep]) < ALPHA


def test_zero_mass_pieces_at_block_boundaries_and_padding():
    """Uniforms aimed at every cumulative boundary (where a zero-mass piece would be chosen if a sum after it
    rounded above the one before) choose only pieces of positive mass, in every block and with the table
    padded past more blocks. Random uniforms choose the same pieces with and without the padding (aimed ones
    may not: the two programs may round a sum differently in its last bit, and an aimed uniform sits on it)."""
    rng = np.random.default_rng(5)
    log_mass = rng.normal(0.0, 2.0, 1000)
    log_mass[rng.random(1000) < 0.5] = -np.inf
    log_mass[::64] = -np.inf  # a zero mass first in every block
    mass = np.exp(log_mass - np.max(log_mass))
    cdf = np.cumsum(mass) / mass.sum()
    aims = np.concatenate([cdf, np.nextafter(cdf, 0.0), np.nextafter(cdf, 1.0)])
    choose = jax.jit(jax.vmap(choose_piece, in_axes=(0, None)))
    padded = jnp.concatenate([jnp.asarray(log_mass), jnp.full(300, -jnp.inf)])
    for table in (jnp.asarray(log_mass), padded):
        chosen = np.asarray(choose(jnp.asarray(np.clip(aims, 2.0**-60, 1.0 - 2.0**-53)), table))
        assert np.all(np.isfinite(log_mass[chosen]))
    uniforms = jax.random.uniform(jax.random.key(5), (20_000,), jnp.float64, minval=2.0**-60, maxval=1.0)
    np.testing.assert_array_equal(choose(uniforms, jnp.asarray(log_mass)), choose(uniforms, padded))


def test_zero_mass_blocks_never_chosen_where_xla_cumsum_is_not_monotone():
    """A table of 2000 blocks, 40% of them empty, their totals over 16 orders of magnitude: uniforms aimed at every
    block boundary (and an ulp either side) choose only pieces of positive mass. Power: XLA's ``cumsum`` of these
    block totals (a tree of partial sums), the chooser's first level, is not monotone or rises after a zero
    total somewhere, so a search over its sums alone could land on an empty block."""
    rng = np.random.default_rng(6)
    num_blocks = 2000
    totals = rng.exponential(1.0, num_blocks) * 10.0 ** rng.integers(-8, 8, num_blocks)
    totals[rng.random(num_blocks) < 0.4] = 0.0
    totals[np.argmax(totals)] = 1.0e9  # the maximum piece, so the chooser's shift leaves the masses as they are
    with np.errstate(divide="ignore"):
        log_totals = np.log(totals)  # -inf for the empty blocks
    log_mass = np.full((num_blocks, _BLOCK), -np.inf)
    log_mass[:, 7] = log_totals  # one piece of each block carries its total
    log_mass = log_mass.reshape(-1)
    plain = np.asarray(jax.jit(jnp.cumsum)(jnp.exp(jnp.asarray(log_totals) - np.log(1.0e9))))
    zero = totals[1:] == 0.0
    assert np.any(plain[1:] < plain[:-1]) or np.any(plain[1:][zero] != plain[:-1][zero])
    cdf = np.cumsum(totals) / totals.sum()
    aims = np.clip(np.concatenate([cdf, np.nextafter(cdf, 0.0), np.nextafter(cdf, 1.0)]), 2.0**-60, 1.0 - 2.0**-53)
    chosen = np.asarray(jax.jit(jax.vmap(choose_piece, in_axes=(0, None)))(jnp.asarray(aims), jnp.asarray(log_mass)))
    assert np.all(np.isfinite(log_mass[chosen]))
