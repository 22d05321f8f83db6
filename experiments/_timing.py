"""Timing helper shared by the benchmark scripts (run as ``python experiments/bench_*.py``)."""

import time

import jax


def best_of(fn, repeats):
    """The fastest of ``repeats`` calls of ``fn``, waiting for JAX results: steady-state wall seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times)
