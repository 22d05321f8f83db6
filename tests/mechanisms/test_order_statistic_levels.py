"""The order-statistic releases (PLM and INV medians and quantiles, Durfee 2025) build their local bounds up to
the levels where a piece can still have length, not to ``n + 1``: the pieces past them have length 0, mass 0,
and are never drawn. Checked here as the property itself: for every rank, the pieces of positive mass and their
log-masses are the same as with ``n + 1`` levels, on data with ties and data at the domain's ends; and one level
fewer would lose a piece of positive mass (power).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

# Private on purpose: the claim is about the kernel's table of pieces.
from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import _log_masses, _segments
from gpuprivacy.mechanisms._instance_optimal._statistic_bounds import _order_statistic_bounds
from gpuprivacy.mechanisms._instance_optimal._statistics import _levels_that_move

LOWER, UPPER = -1.0, 4.0


@functools.partial(jax.jit, static_argnames=("levels", "mechanism"))
def _table(sorted_x, rank, levels, mechanism, epsilon):
    """The release's table of pieces for ``levels`` levels, as its kernel builds it: one program per data size
    and number of levels, shared by every rank (the rank is an argument of the bounds)."""
    seg = _segments(_order_statistic_bounds(sorted_x, LOWER, UPPER, rank, levels), jnp.float64(0.0))
    return seg, _log_masses(seg, 0.5 * epsilon, mechanism)


def positive_pieces(x, rank, levels, mechanism, epsilon=0.7):
    """The pieces of positive mass: sorted ``(start, sign, length, level, log_mass)`` rows."""
    seg, log_mass = _table(jnp.asarray(np.sort(x)), rank, levels, mechanism, epsilon)
    log_mass = np.asarray(log_mass)
    rows = np.stack([np.asarray(seg.start), np.asarray(seg.sign), np.asarray(seg.length), np.asarray(seg.level),
                     log_mass], axis=1)[np.isfinite(log_mass)]
    return rows[np.lexsort(rows.T[::-1])]


def datasets(rng, n):
    return [rng.uniform(LOWER, UPPER, n), np.round(rng.uniform(LOWER, UPPER, n)),  # ties
            rng.choice([LOWER, UPPER, 1.0], n)]  # at the ends


@pytest.mark.parametrize("mechanism", ["piecewise_laplace", "inverse_sensitivity"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 10, 25])
def test_the_pieces_of_positive_mass_are_those_of_n_plus_one_levels(mechanism, n):
    rng = np.random.default_rng(n)
    lost = 0
    for x in datasets(rng, n):
        for rank in range(1, n + 1):
            levels = _levels_that_move(n, rank)
            assert levels <= n + 1
            np.testing.assert_array_equal(positive_pieces(x, rank, levels, mechanism),
                                          positive_pieces(x, rank, n + 1, mechanism))
            if levels > 2:  # power: one level fewer caps a piece of positive length at the domain's end
                fewer = positive_pieces(x, rank, levels - 2, mechanism)
                lost += not np.array_equal(fewer, positive_pieces(x, rank, n + 1, mechanism))
    assert lost > 0 or n < 3


def test_a_median_has_about_half_the_levels():
    assert _levels_that_move(2001, 1001) == 1002 and _levels_that_move(2000, 1000) == 1002
    assert _levels_that_move(10, 1) == 11 and _levels_that_move(10, 10) == 11  # the extreme ranks: all of them
