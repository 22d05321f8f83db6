"""Batched selection (run_trials, jax.vmap): chunked over trials, one-operand sorts, same values as single calls.

The vmapped kernels of report-noisy-max / exponential mechanism (``_noisy_argmax``) and permute-and-flip run
their trials in chunks that fit the CPU caches (``gpuprivacy._chunked_vmap.in_cpu_chunks``), and
permute-and-flip draws its permutation with one-operand sorts (``_uniform_permutation``). Neither may change a
value: each trial must equal the single call with its key, and the permutation must equal
``jax.random.permutation``'s. No timings here: experiments/bench_sweepables.py measures the speed.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import mechanisms
from gpuprivacy._chunked_vmap import trials_per_chunk
from gpuprivacy.mechanisms._selection._common import _CHUNK_CANDIDATES, _noisy_argmax
from gpuprivacy.mechanisms._selection._permute_and_flip import _permute_and_flip, _uniform_permutation

N_LARGE = 10_000  # several chunks of trials (13 trials a chunk)
KERNELS = {
    "permute_and_flip": _permute_and_flip,
    "gumbel": lambda key, scores, scale: _noisy_argmax(key, scores, scale, noise="gumbel"),
    "laplace": lambda key, scores, scale: _noisy_argmax(key, scores, scale, noise="laplace"),
    "exponential": lambda key, scores, scale: _noisy_argmax(key, scores, scale, noise="exponential"),
}


def _scores(seed, shape):
    return jax.random.uniform(jax.random.key(seed), shape, jnp.float64, 0.0, 10.0)


def _eqns(jaxpr):
    """Every equation of ``jaxpr`` and of the jaxprs in its parameters (scan, while, pjit, custom_vmap bodies)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _eqns(inner)


@pytest.mark.parametrize("n", [1, 2, 3, 100, 1625, 1626, N_LARGE])
def test_uniform_permutation_is_jax_permutation(n):
    # 1625 -> 1626 is where JAX's shuffle goes from one round of sort keys to two.
    for seed in range(4):
        key = jax.random.key(seed)
        np.testing.assert_array_equal(np.asarray(_uniform_permutation(key, n)),
                                      np.asarray(jax.random.permutation(key, n)))


def test_uniform_permutation_is_jax_permutation_vmapped():
    keys = jax.random.split(jax.random.key(3), 5)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda k: _uniform_permutation(k, 2000))(keys)),
                                  np.asarray(jax.vmap(lambda k: jax.random.permutation(k, 2000))(keys)))


def test_trials_per_chunk_covers_every_trial_with_little_padding():
    for trials in (1, 5, 6, 7, 13, 200, 1001):
        for n in (1, 100, 1000, N_LARGE, 10 ** 6):
            chunks, size = trials_per_chunk(trials, n, _CHUNK_CANDIDATES)
            assert chunks * size >= trials and chunks * size - trials < chunks
            assert size == 1 or size * n <= _CHUNK_CANDIDATES


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_vmapped_kernel_equals_single_calls(name):
    # 29 trials at n = 10^4: 3 chunks of 10, the last one padded; scores per trial, scale shared.
    kernel = KERNELS[name]
    keys = jax.random.split(jax.random.key(11), 29)
    scores = _scores(1, (29, N_LARGE))
    scale = jnp.asarray(2.0)
    selected, info = jax.jit(jax.vmap(kernel, in_axes=(0, 0, None)))(keys, scores, scale)
    for i in range(29):
        single, single_info = kernel(keys[i], scores[i], scale)
        assert int(selected[i]) == int(single)
        assert int(info.nonprivate_true_argmax[i]) == int(single_info.nonprivate_true_argmax)
        assert float(info.nonprivate_selected_score[i]) == float(single_info.nonprivate_selected_score)


@pytest.mark.parametrize("name", ["permute_and_flip", "laplace"])
def test_nested_vmap_with_shared_scores_and_batched_scale_equals_single_calls(name):
    # The sweeps' shape: cells (a traced scale each) over trials, the same scores for every trial.
    kernel = KERNELS[name]
    keys = jax.random.split(jax.random.key(5), 34).reshape(2, 17)
    scores = _scores(2, (N_LARGE,))
    scales = jnp.asarray([0.5, 4.0])
    over_trials = jax.vmap(kernel, in_axes=(0, None, None))
    selected, _ = jax.jit(jax.vmap(over_trials, in_axes=(0, None, 0)))(keys, scores, scales)
    for cell in range(2):
        for trial in range(17):
            assert int(selected[cell, trial]) == int(kernel(keys[cell, trial], scores, scales[cell])[0])


@pytest.mark.parametrize("mechanism, params", [
    (mechanisms.permute_and_flip, {}),
    (mechanisms.report_noisy_max, {"noise": "laplace"}),
    (mechanisms.laplace_report_noisy_max, {}),
    (mechanisms.exponential_mechanism, {}),
])
def test_run_trials_equals_the_loop_at_ten_thousand_candidates(mechanism, params):
    key, trials = jax.random.key(7), 16
    scores = _scores(3, (trials, N_LARGE))
    batched = mechanisms.run_trials(mechanism, key, trials, scores, batched_args=True, epsilon=1.0, clip=True,
                                    **params)
    keys = jax.random.split(key, trials)
    loop = [int(mechanism(keys[i], scores[i], epsilon=1.0, **params).value) for i in range(trials)]
    assert np.asarray(batched.value).tolist() == loop


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_batched_cpu_program_draws_its_noise_in_chunks(name):
    # The old program drew [T, 2, n] random words at once (memory-bound on CPU) and sorted permutations with
    # a two-operand (key, value) sort. The CPU program now holds no integer array (words, sort keys, indices)
    # of a whole batch's size, and every sort has one operand.
    trials = 40
    vmapped = jax.jit(jax.vmap(KERNELS[name], in_axes=(0, 0, None)))
    args = (jax.random.split(jax.random.key(0), trials), jnp.zeros((trials, N_LARGE)), jnp.asarray(1.0))
    hlo = vmapped.lower(*args).compile().as_text()
    integer_shapes = re.findall(r"\b[us]\d+\[([\d,]+)\]", hlo)
    assert integer_shapes and max(int(np.prod([int(d) for d in dims.split(",")])) for dims in integer_shapes) \
        < trials * N_LARGE
    sorts = [eqn for eqn in _eqns(jax.make_jaxpr(vmapped)(*args).jaxpr) if eqn.primitive.name == "sort"]
    assert all(len(eqn.invars) == 1 for eqn in sorts)
    assert bool(sorts) == (name == "permute_and_flip")
