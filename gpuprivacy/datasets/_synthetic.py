"""Seeded synthetic query vectors for sweeps and tests."""

from __future__ import annotations

import numpy as np

from gpuprivacy._checks import check_int


def synthetic_uniform_queries(d: int, *, seed: int = 0) -> np.ndarray:
    """``d`` queries drawn independently and uniformly from [0, 1).

    The values come from NumPy's ``PCG64`` bit generator seeded with ``seed``
    (``np.random.default_rng(seed).random(d)``), whose stream NumPy keeps
    stable across releases, so a seed names the same vector everywhere. The
    vector is public test data: it is not a privacy-relevant release.

    Args:
      d: number of queries, >= 1.
      seed: a non-negative integer.

    Returns:
      ``float64[d]``.

    Examples:
      >>> q = synthetic_uniform_queries(5, seed=1)
      >>> q.shape, bool(((0 <= q) & (q < 1)).all())
      ((5,), True)
    """
    d = check_int("d", d, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    return np.random.default_rng(seed).random(d)
