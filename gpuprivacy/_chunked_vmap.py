"""``vmap`` in cache-sized chunks of trials on a CPU: one implementation for every kernel that needs it.

Vmapped over T trials, a kernel's intermediates grow to ``[T, ...]``; on a CPU, once they outgrow the
caches, every pass over them streams main memory and the batch runs no faster per trial than a loop of
single calls (JAX's threefry on CPU makes 5 such passes over ``[T, 2, n]`` words; the smooth sensitivity's
searches one per level). :func:`in_cpu_chunks` keeps ``kernel`` as is unbatched and gives it a ``vmap`` rule
that runs the trials in equal chunks in sequence (``lax.map``), each chunk exactly ``jax.vmap(kernel)``:
every trial computes what it computes alone, and the chunk size depends only on the shapes (public).
Accelerators keep the plain ``vmap``. Nested ``vmap`` chunks the innermost axis.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


def trials_per_chunk(num_trials: int, trial_values: int, chunk_values: int) -> tuple[int, int]:
    """``(chunks, trials per chunk)``: at most ``chunk_values`` values a chunk (at least one trial), equal
    chunks with the least padding (fewer than ``chunks`` padded trials)."""
    most = max(1, chunk_values // max(1, trial_values))
    chunks = max(1, -(-num_trials // most))
    return chunks, -(-num_trials // chunks)


def _vmap_in_chunks(kernel, axis_size: int, in_batched, args, trial_values: int, chunk_values: int):
    """``jax.vmap(kernel)`` over the batched ``args``, run as ``lax.map`` over equal chunks of trials.

    The last chunk is padded with copies of the first trials, whose results are dropped: ``lax.map``'s own
    ``batch_size`` would run a remainder in a second copy of the body, doubling the compile time.
    """
    in_axes = tuple(0 if batched else None for batched in in_batched)
    mapped = [arg for arg, batched in zip(args, in_batched) if batched]

    def run_chunk(chunk):
        rows = iter(chunk)
        return jax.vmap(kernel, in_axes=in_axes)(*[next(rows) if batched else arg
                                                  for arg, batched in zip(args, in_batched)])

    chunks, size = trials_per_chunk(axis_size, trial_values, chunk_values)
    if chunks == 1:
        return run_chunk(mapped)
    padding = chunks * size - axis_size
    padded = [jnp.concatenate([arg, arg[:padding]]) if padding else arg for arg in mapped]
    out = jax.lax.map(run_chunk, [arg.reshape(chunks, size, *arg.shape[1:]) for arg in padded])
    return jax.tree_util.tree_map(lambda leaf: leaf.reshape(chunks * size, *leaf.shape[2:])[:axis_size], out)


def in_cpu_chunks(kernel: Callable, trial_values: Callable[[tuple], int], chunk_values: int) -> Callable:
    """``kernel`` whose ``jax.vmap`` runs, on the CPU backend, chunks of about ``chunk_values`` values.

    Args:
      kernel: a function of arrays, traceable and vmappable.
      trial_values: the values one trial holds, from the (unbatched-shape or batched) arguments; read at
        trace time, so from shapes only.
      chunk_values: values a chunk holds (all its trials together); at least one trial a chunk.
    """
    chunked = jax.custom_batching.custom_vmap(kernel)

    @chunked.def_vmap
    def _rule(axis_size, in_batched, *args):
        if jax.default_backend() == "cpu":
            out = _vmap_in_chunks(kernel, axis_size, in_batched, args, trial_values(args), chunk_values)
        else:
            out = jax.vmap(kernel, in_axes=tuple(0 if batched else None for batched in in_batched))(*args)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return chunked
