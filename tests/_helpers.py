"""Shared test helpers (no assertions hidden here)."""

import numpy as np

TEST_FAILURE_RATE = 1e-6


def split_keys(key, num):
    import jax
    return jax.random.split(key, num)


def as_numpy(x):
    return np.asarray(x)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a jax.distributed coordinator in a multi-process test)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
