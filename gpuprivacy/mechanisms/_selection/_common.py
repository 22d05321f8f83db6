"""Shared parts of private selection: the info type, the checks and the noisy argmax kernel.

Used by :mod:`._exponential`, :mod:`._report_noisy_max` and :mod:`._permute_and_flip`.

All of them pick an index from a score vector ``[num_candidates]``. The
noise scale is

.. math:: b = \\frac{2\\Delta}{\\varepsilon}
          \\quad\\text{or}\\quad b = \\frac{\\Delta}{\\varepsilon}\\ \\text{(monotonic scores)},

rounded up to a float64, where :math:`\\Delta` bounds
:math:`|q_i(x) - q_i(x')|` for every candidate and neighbour, and
"monotonic" means that for each pair of neighbours all scores move in the
same direction.

Ties: ``nonprivate_true_argmax`` and any exact tie among noisy scores
(probability zero for continuous noise) resolve to the first index.

Totality: kernels map NaN scores to the lowest score ``-finfo(float64).max/4``
and clamp infinities to ``+-finfo(float64).max/4``; the public functions reject
non-finite scores before that.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpuprivacy import noise as _noise
from gpuprivacy._checks import all_ok, check_epsilon, check_scale_not_flushed, check_key, check_positive, epsilon_ok, fail_closed, positive_ok
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key
from gpuprivacy._rounding import divide_up
from gpuprivacy.mechanisms._common import check_bool, check_scores, sanitize, unit_noise
from gpuprivacy.mechanisms._release import Release


NOISE_NAMES = ("gumbel", "laplace", "exponential")
_SAMPLERS = {"gumbel": _noise.gumbel, "laplace": _noise.laplace, "exponential": _noise.exponential}


class SelectionInfo(NamedTuple):
    """Side information of the selection mechanisms (one type for all of them).

    Attributes:
      scale: the noise scale :math:`b` (public).
      nonprivate_true_argmax: int32 index of the largest score, first on ties (NOT private).
      nonprivate_true_max: the largest score (NOT private).
      nonprivate_selected_score: the score of the selected candidate (NOT private).
      valid: False when a traced privacy parameter was invalid; the release is then -1, whatever the
        scores (fail closed, docs/fail_closed.md). Always True eagerly, where invalid parameters raise.
    """

    scale: Array
    nonprivate_true_argmax: Array
    nonprivate_true_max: Array
    nonprivate_selected_score: Array
    valid: Array = True


def _selection_scale(epsilon, sensitivity, monotonic):
    multiplier = 1 if monotonic else 2
    scale = divide_up(sensitivity, epsilon, multiplier=multiplier,
                      what=f"the noise scale {multiplier} * sensitivity / epsilon = {multiplier} * {sensitivity!r} / {epsilon!r}")
    check_scale_not_flushed(scale, epsilon, what="private selection")
    return scale


def _check_selection(key, scores, epsilon, sensitivity, monotonic, name="scores", clip=False):
    """The validated ``(key, scores, epsilon, sensitivity, monotonic, scale)``."""
    require_x64("private selection")
    key = check_key(key)
    scores = check_scores(scores, name, clip=clip)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    monotonic = check_bool("monotonic", monotonic)
    scale = jnp.asarray(_selection_scale(epsilon, sensitivity, monotonic), jnp.float64)
    return key, scores, epsilon, sensitivity, monotonic, scale


def _selection_release(selected, info, epsilon, sensitivity, guarantee):
    """The selection's Release stating ``guarantee``, failed closed when a traced epsilon or sensitivity is invalid."""
    ok = all_ok(epsilon_ok(epsilon), positive_ok("sensitivity", sensitivity))
    return Release(fail_closed(selected, ok), info._replace(valid=jnp.asarray(ok)), guarantee)


def _selection_info(scores, selected, scale):
    true_argmax = jnp.argmax(scores).astype(jnp.int32)
    return SelectionInfo(scale=scale, nonprivate_true_argmax=true_argmax, nonprivate_true_max=scores[true_argmax],
                         nonprivate_selected_score=scores[selected])


# Trials per chunk under vmap: about this many candidates (all trials of a chunk together), so that a chunk's
# random words and noise stay in the CPU caches. On CPU, JAX lowers threefry as a loop of 5 steps over the whole
# batch of counters; vmapped over T trials of n = 10^4 candidates, each step reads and writes [T, 2, n] words
# from main memory, and the batched release was no faster per trial than a loop of single calls. Measured on
# a 2-core CPU (run_trials, T = 200 and 1000): at n = 10^4 chunks of 2^16 or 2^17 candidates were 2.5x faster
# per trial than one vmap (permute-and-flip 1.2x), at n = 10^3 and T = 1000 1.7x; 2^15 was slower.
_CHUNK_CANDIDATES = 2 ** 17


def _trials_per_chunk(num_trials: int, num_candidates: int) -> tuple[int, int]:
    """``(chunks, trials per chunk)``: at most :data:`_CHUNK_CANDIDATES` candidates a chunk, the least padding."""
    most = max(1, _CHUNK_CANDIDATES // max(1, num_candidates))
    chunks = max(1, -(-num_trials // most))
    return chunks, -(-num_trials // chunks)


def _vmap_in_chunks(kernel, axis_size: int, in_batched, args):
    """``jax.vmap(kernel)`` over the batched ``args``, run as a loop over chunks of trials (same values).

    Trial ``i`` gets exactly the computation ``jax.vmap`` would give it (each chunk IS a ``jax.vmap`` of
    ``kernel``); only the number of trials computed together changes. The last chunk is padded with copies
    of the first trials, whose results are dropped. The chunk size depends only on the shapes.
    """
    in_axes = tuple(0 if batched else None for batched in in_batched)
    mapped = [arg for arg, batched in zip(args, in_batched) if batched]

    def run_chunk(chunk):
        rows = iter(chunk)
        return jax.vmap(kernel, in_axes=in_axes)(*[next(rows) if batched else arg
                                                  for arg, batched in zip(args, in_batched)])

    num_candidates = args[1].shape[-1]  # the scores: [n], or [trials, n] when batched
    chunks, size = _trials_per_chunk(axis_size, num_candidates)
    if chunks == 1:
        return run_chunk(mapped)
    padding = chunks * size - axis_size  # < chunks <= axis_size
    padded = [jnp.concatenate([arg, arg[:padding]]) if padding else arg for arg in mapped]
    out = jax.lax.map(run_chunk, [arg.reshape(chunks, size, *arg.shape[1:]) for arg in padded])
    return jax.tree_util.tree_map(lambda leaf: leaf.reshape(chunks * size, *leaf.shape[2:])[:axis_size], out)


def _batched_in_chunks(kernel):
    """``kernel(key, scores, scale)`` whose ``jax.vmap`` runs over chunks of trials on CPU (:func:`_vmap_in_chunks`).

    Unbatched it is ``kernel`` itself; batched, every trial's value is the one ``jax.vmap(kernel)`` gives, so
    ``run_trials`` still equals the loop of single releases. Nested ``vmap`` (the sweeps' cells over trials)
    chunks the innermost axis.
    """
    chunked = jax.custom_batching.custom_vmap(kernel)

    @chunked.def_vmap
    def _rule(axis_size, in_batched, *args):
        in_axes = tuple(0 if batched else None for batched in in_batched)
        # Only the CPU gains: an accelerator wants every trial at once, and a loop of small chunks would
        # leave it idle. The branch is chosen when the program is lowered for its device.
        out = jax.lax.platform_dependent(
            *args, cpu=lambda *a: _vmap_in_chunks(kernel, axis_size, in_batched, a),
            default=lambda *a: jax.vmap(kernel, in_axes=in_axes)(*a))
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return chunked


def _noisy_argmax_kernel(key: Key, scores: Array, scale: Array, *, noise: str) -> tuple[Array, SelectionInfo]:
    scores = sanitize(scores)
    noisy = scores + scale * unit_noise(_SAMPLERS[noise], key, scores.shape)
    selected = jnp.argmax(noisy).astype(jnp.int32)
    return selected, _selection_info(scores, selected, scale)


_NOISY_ARGMAX = {name: _batched_in_chunks(functools.partial(_noisy_argmax_kernel, noise=name))
                 for name in NOISE_NAMES}


@functools.partial(jax.jit, static_argnames=("noise",))
def _noisy_argmax(key: Key, scores: Array, scale: Array, noise: str) -> tuple[Array, SelectionInfo]:
    return _NOISY_ARGMAX[noise](key, scores, scale)
