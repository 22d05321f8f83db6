"""Shared test helpers (no assertions hidden here)."""

import numpy as np

TEST_FAILURE_RATE = 1e-6


def split_keys(key, num):
    import jax
    return jax.random.split(key, num)


def as_numpy(x):
    return np.asarray(x)
