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
from gpuprivacy._chunked_vmap import in_cpu_chunks
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


# Values per chunk under vmap (gpuprivacy/_chunked_vmap.py): about this many candidates (all trials of a chunk
# together), so that a chunk's random words and noise stay in the CPU caches. Measured on a 2-core CPU
# (run_trials, T = 200 and 1000): at n = 10^4 chunks of 2^16 or 2^17 candidates were 2.5x faster per trial
# than one vmap (permute-and-flip 1.2x), at n = 10^3 and T = 1000 1.7x; 2^15 was slower.
_CHUNK_CANDIDATES = 2 ** 17


def _batched_in_chunks(kernel):
    """``kernel(key, scores, scale)`` whose ``jax.vmap`` runs over chunks of trials on CPU (same values)."""
    return in_cpu_chunks(kernel, lambda args: args[1].shape[-1], _CHUNK_CANDIDATES)


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
