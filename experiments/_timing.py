"""Timing helpers shared by the benchmark scripts (run as ``python experiments/bench_*.py``)."""

import os
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


def first_call(fn):
    """``(result, seconds)`` of one call of ``fn``, waiting for JAX results before stopping the clock.

    The result is returned as it is (a device array stays one): convert it with ``np.asarray`` after this
    returns, so that the device-to-host copy is not timed.
    """
    start = time.perf_counter()
    result = jax.block_until_ready(fn())
    return result, time.perf_counter() - start


def load_average():
    """``os.getloadavg()`` as a list of three floats (NaNs where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return [float("nan")] * 3


def mode_sizes(args, modes):
    """``(mode, sizes)``: the sizes of the ``--gpu`` / ``--quick`` / default mode, explicit flags winning."""
    mode = "gpu" if args.gpu else "quick" if args.quick else "default"
    return mode, {name: value if getattr(args, name) is None else getattr(args, name)
                  for name, value in modes[mode].items()}
