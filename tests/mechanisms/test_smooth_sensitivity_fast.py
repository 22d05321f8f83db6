"""The divide-and-conquer smooth sensitivity of the median against the quadratic definition.

Nissim, Raskhodnikova & Smith (STOC 2007, §3.1) define, for the median at rank m with
:math:`x_{(0)} = \\ell`, :math:`x_{(n+1)} = u`,

.. math::
    S^*_\\beta(x) = \\max\\Big(\\max_{k \\le K} e^{-k\\beta} A^{(k)}(x),\\ e^{-(K+1)\\beta}(u - \\ell)\\Big),
    \\qquad A^{(k)}(x) = \\max_{t = 0..k+1} \\big(x_{(m+t)} - x_{(m+t-k-1)}\\big),

computed in O(n K) by ``smooth_sensitivity_by_definition`` (the package's computation before
it moved to the O(n log n) divide and conquer, kept verbatim as the reference).

Two claims:

* **bitwise**: the divide and conquer (``_divide_and_conquer``, accelerators), the largest gap at each
  distance (``_by_largest_gaps``, which the kernel takes on CPU up to ``_LARGEST_GAPS_PAIRS`` pairs) and
  the blocked search (``_blocked_search``, CPU past that) each return the max of the products
  ``w[j - i - 1] * (x_(j) - x_(i))`` over all allowed pairs, for the same weights ``w``, checked against
  a NumPy brute force over every pair (``assert_array_equal``). All are tested at every size, though the
  kernel takes one of them by size and backend;
* **2 ulps**: end to end, the public function against the quadratic definition's program, one
  dataset at a time. The weights ``exp(-k beta)`` are computed by two XLA programs, and XLA's float64
  ``exp`` is not the same function in every program (fusion, vectorization); the kernel's agree with
  a standalone ``jnp.exp``, the definition's program fuses ``exp`` with its product. Here (jax 0.10.2,
  CPU) all test datasets agree bitwise but one: dataset 1 (ties on a grid) of
  ``test_large_n_equals_the_definition[4097-None]`` (beta = 0.05), maximized at k = 405, where the
  definition's program gives exp(-20.25) one ulp away from NumPy's ``exp`` and ours, which agree.
  The definition's program is not stable itself: on dataset 8 (Cauchy) of ``[1000-None]`` it gives
  0.028667986709186438 alone and 2 ulps less when vmapped over the 14 datasets of the test; and
  in experiments/bench_smooth_sensitivity.py (normal data, n = 10^4, beta = 1/6) 13 of 100 trials
  differ by 1 or 2 ulps, the maximizing product at k = 6 where XLA's standalone exp(-1) is one ulp
  below NumPy's. (Those observations are XLA:CPU's fusion emitters'; with the loop emitters gpuprivacy asks
  for (gpuprivacy/_config.py), and in a standalone rerun with either, the datasets of
  ``test_large_n_equals_the_definition`` all agree bitwise, 2026-11-30: which exp a program gets is XLA's.)
"""

from __future__ import annotations

import functools

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import mechanisms
from gpuprivacy.mechanisms import instance_optimal as io
# Private on purpose: the bitwise claim is about the searches given their weights (module docstring).
from gpuprivacy.mechanisms._instance_optimal import _smooth_kernel, _smooth_pairs, _smooth_sensitivity
from gpuprivacy.mechanisms._instance_optimal._smooth_sensitivity import (_blocked_search, _by_largest_gaps,
                                                                        _divide_and_conquer,
                                                                        smooth_sensitivity_by_definition)

SEARCHES = (_divide_and_conquer, _by_largest_gaps, _blocked_search)
SPAN_SEARCHES = (_divide_and_conquer, _blocked_search)  # those that pass near-tied spans on

LOWER, UPPER = 0.0, 10.0
BETAS = np.array([1e-3, 0.05, 1 / 6, 0.25, np.log(2.0), 1.0, 3.0])  # ln 2: exact ratios of gaps 1 : 2


quadratic_smooth_sensitivity = jax.jit(smooth_sensitivity_by_definition, static_argnames=("rank", "max_distance"))


def reference(datasets, betas, lower=LOWER, upper=UPPER, max_distance=None):
    """The quadratic definition on each row of ``datasets`` ([B, n]) with its own beta ([B]), one at a time."""
    n = datasets.shape[1]
    K = n if max_distance is None else max_distance
    return np.array([float(quadratic_smooth_sensitivity(jnp.asarray(np.sort(row)), jnp.float64(beta), lower, upper,
                                                        (n + 1) // 2, K)) for row, beta in zip(datasets, betas)])


def weights(betas, size):
    """``exp(-k beta)``, ``k < size``, for each beta ([B, size]); any such table serves the bitwise check."""
    return np.exp(-np.arange(size, dtype=np.float64)[None, :] * np.asarray(betas, np.float64)[:, None])


def brute_force(padded, w, rank, max_distance):
    """NumPy max of ``w[j - i - 1] * (padded[j] - padded[i])`` over every pair the definition allows."""
    n = padded.shape[0] - 2
    i = np.arange(max(0, rank - max_distance - 1), rank + 1)[:, None]
    j = np.arange(rank, min(n + 1, rank + max_distance + 1) + 1)[None, :]
    k = j - i - 1
    allowed = (k >= 0) & (k <= max_distance)
    return np.max(np.where(allowed, w[np.clip(k, 0, w.shape[0] - 1)] * (padded[j] - padded[i]), 0.0))


def check(x, b, lower=LOWER, upper=UPPER, max_distance=None):
    """Both claims of the module docstring on the datasets ``x`` ([B, n]) with betas ``b`` ([B])."""
    n = x.shape[1]
    K = n if max_distance is None else max_distance
    rank = (n + 1) // 2
    padded = np.concatenate([np.full((x.shape[0], 1), lower), np.sort(x, axis=1),
                             np.full((x.shape[0], 1), upper)], axis=1)
    w = weights(b, min(K, n) + 1)
    want = np.array([brute_force(p, v, rank, K) for p, v in zip(padded, w)])
    # One dataset per call, as a single release runs them (the batched kernel is checked against single calls in
    # test_vmap_computes_each_trial_as_alone): XLA:CPU compiles a search vmapped over the 35 datasets in about 1.6
    # times the time (n = 37: 0.72 s against 0.47 s for the divide and conquer), at each of 40 sizes. The three
    # searches share one program per size (one compile instead of three): each is a max of exact products,
    # w * (x_j - x_i), which no program boundary can round differently.
    searches = jax.jit(lambda p, v: [search(p, v, rank=rank, max_distance=K) for search in SEARCHES])
    got = np.array([[float(value) for value in searches(p, v)] for p, v in zip(padded, w)])
    for column, search in enumerate(SEARCHES):
        np.testing.assert_array_equal(got[:, column], want, err_msg=search.__name__)
    ours = [float(io.median_smooth_sensitivity(row, beta=beta, lower=lower, upper=upper, max_distance=max_distance))
            for row, beta in zip(x, b)]
    np.testing.assert_array_max_ulp(np.array(ours), reference(x, b, lower, upper, max_distance), maxulp=2)


def datasets(rng, batch, n, lower=LOWER, upper=UPPER, clip=True):
    """``[batch, n]`` rows cycling over: uniform, few distinct values (ties), mass at the bounds, Cauchy."""
    width = upper - lower
    kinds = [
        lambda: rng.uniform(lower, upper, n),
        lambda: lower + width / 4 * rng.integers(0, 5, n),  # ties on a grid
        lambda: rng.choice([lower, upper, lower + width / 2], n, p=[0.4, 0.4, 0.2]),  # data at the bounds
        lambda: np.clip(lower + width / 2 + rng.standard_cauchy(n), lower, upper),  # heavy tails, clipped
        lambda: np.clip(np.round(lower + width / 2 + 0.3 * rng.standard_cauchy(n)), lower, upper),  # both
    ]
    return np.stack([kinds[i % len(kinds)]() for i in range(batch)])


def betas_for(batch):
    return BETAS[np.arange(batch) % BETAS.shape[0]]


@pytest.mark.parametrize("n", range(1, 41))
def test_small_n_equals_the_definition(n):
    rng = np.random.default_rng(n)
    x = datasets(rng, 35, n)  # 5 kinds x 7 betas: every pair
    b = betas_for(35)
    check(x, b)


@pytest.mark.parametrize("n,max_distance", [(1, 0), (2, 0), (5, 1), (9, 3), (16, 0), (17, 5), (23, 23),
                                            (30, 31), (31, 40), (40, 12)])
def test_explicit_max_distance_equals_the_definition(n, max_distance):
    rng = np.random.default_rng(1000 + n)
    x = datasets(rng, 35, n)
    b = betas_for(35)
    check(x, b, max_distance=max_distance)


@pytest.mark.parametrize("n,max_distance", [(1000, None), (4097, None), (4097, 100)])
def test_large_n_equals_the_definition(n, max_distance):
    rng = np.random.default_rng(n)
    x = np.concatenate([datasets(rng, 10, n), rng.normal(5.0, 1.0, (4, n)).clip(LOWER, UPPER)])
    b = BETAS[np.arange(14) % BETAS.shape[0]]
    check(x, b, max_distance=max_distance)


def test_another_domain_equals_the_definition():
    rng = np.random.default_rng(7)
    x = datasets(rng, 35, 26, lower=-3.0, upper=2.5)
    b = betas_for(35)
    check(x, b, lower=-3.0, upper=2.5)


def grid_datasets(rng, batch, n):
    """``[batch, n]`` rows on grids where products of different k tie up to rounding when e^beta is rational."""
    kinds = [
        lambda: 1.0 * rng.integers(0, 9, n),
        lambda: 2.0 ** rng.integers(-3, 4, n),
        lambda: rng.choice([0.0, 1.0, 2.0, 4.0, 6.0, 8.0], n),
        lambda: np.round(rng.standard_cauchy(n)).clip(-8, 8) + 8,
    ]
    return np.stack([kinds[i % len(kinds)]() for i in range(batch)])


def largest_weighted_gaps(x, b, lower, upper, max_distance, search=_divide_and_conquer):
    """``(search, brute force)`` on each row of ``x`` with the same weights (the search itself: at these
    sizes the kernel would take the largest gaps on CPU)."""
    n = x.shape[1]
    rank = (n + 1) // 2
    padded = np.concatenate([np.full((x.shape[0], 1), lower), np.sort(x, axis=1),
                             np.full((x.shape[0], 1), upper)], axis=1)
    w = weights(b, min(max_distance, n) + 1)
    got = np.asarray(jax.jit(jax.vmap(functools.partial(search, rank=rank, max_distance=max_distance)))(
        jnp.asarray(padded), jnp.asarray(w)))
    return got, np.array([brute_force(p, v, rank, max_distance) for p, v in zip(padded, w)])


NEAR_TIE_CASES = [(12, 4), (12, 12), (17, 17), (20, 6), (25, 8), (31, 10)]


@pytest.mark.parametrize("search", SPAN_SEARCHES, ids=lambda s: s.__name__)
@pytest.mark.parametrize("n,max_distance", NEAR_TIE_CASES)
def test_near_ties_on_a_grid_are_bitwise(n, max_distance, search):
    """Grid data with beta = log of a rational: products of a row agree to the last bits (module docstring)."""
    rng = np.random.default_rng(n * 100 + max_distance)
    b = rng.choice(np.log([2.0, 1.5, 4 / 3, np.sqrt(2.0), 3.0]), 2000)
    got, want = largest_weighted_gaps(grid_datasets(rng, 2000, n), b, -1.0, 17.0, max_distance, search)
    np.testing.assert_array_equal(got, want)


def test_near_ties_need_the_spans(monkeypatch):
    """Power of the test above: passing on the argmax alone (no near-tie span) misses by an ulp there."""
    monkeypatch.setattr(_smooth_pairs, "_NEAR_TIE", 0.0)  # read by both searches' row summaries
    missed = 0
    for n, max_distance in NEAR_TIE_CASES:
        rng = np.random.default_rng(n * 100 + max_distance)
        b = rng.choice(np.log([2.0, 1.5, 4 / 3, np.sqrt(2.0), 3.0]), 2000)
        got, want = largest_weighted_gaps(grid_datasets(rng, 2000, n), b, -1.0, 17.0, max_distance)
        assert np.all(got <= want)
        missed += int(np.sum(got < want))
    assert missed > 0


def test_the_release_uses_the_definition_and_clips():
    """``smooth_sensitivity_median`` (clip=True, both noises) reports the definition's value, batched by run_trials."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-5.0, 15.0, (6, 101))  # outside [0, 10]: clipped
    clipped = np.clip(x, LOWER, UPPER)
    for noise, delta, beta in [("cauchy", None, 1.0 / 6), ("laplace", 1e-6, 1.0 / (2 * np.log(2 / 1e-6)))]:
        out = mechanisms.run_trials(io.smooth_sensitivity_median, jax.random.key(0), 6, x, batched_args=True,
                                    epsilon=1.0, lower=LOWER, upper=UPPER, clip=True, noise=noise, delta=delta)
        np.testing.assert_array_max_ulp(np.asarray(out.info.nonprivate_smooth_sensitivity),
                                        reference(clipped, np.full(6, beta)), maxulp=2)


@pytest.mark.parametrize("n", [801, 5793])  # on CPU: the largest gaps, the blocked search
def test_vmap_computes_each_trial_as_alone(n):
    """Batched over data, over beta or both (nested), each entry is bitwise the unbatched call's."""
    rng = np.random.default_rng(11)
    x, b = rng.uniform(LOWER, UPPER, (5, n)), np.array([0.05, 1 / 6, 0.3, 1.0, 3.0])

    def one(d, beta):
        return io.median_smooth_sensitivity(d, beta=beta, lower=LOWER, upper=UPPER, clip=True)

    alone = np.array([[float(one(d, beta)) for beta in b] for d in x])
    np.testing.assert_array_equal(jax.vmap(lambda d: jax.vmap(lambda beta: one(d, beta))(b))(x), alone)
    np.testing.assert_array_equal(jax.jit(jax.vmap(lambda d: one(d, b[1])))(x), alone[:, 1])
    np.testing.assert_array_equal(jax.vmap(lambda beta: one(x[2], beta))(b), alone[2])


def _equations(closed_jaxpr):
    """Every equation of the jaxpr, those of its sub-jaxprs (loops, jit calls) included."""
    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            yield eqn
            for param in eqn.params.values():
                for sub in param if isinstance(param, (tuple, list)) else (param,):
                    if isinstance(sub, jax.extend.core.ClosedJaxpr):
                        yield from visit(sub.jaxpr)
                    elif isinstance(sub, jax.extend.core.Jaxpr):
                        yield from visit(sub)

    return visit(closed_jaxpr.jaxpr)


def _count(closed_jaxpr, primitive):
    """How many equations of ``primitive`` the jaxpr holds, sub-jaxprs included."""
    return sum(eqn.primitive.name == primitive for eqn in _equations(closed_jaxpr))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the chunked loop is the CPU path")
def test_cpu_chunks_of_a_batch_they_do_not_divide(monkeypatch):
    """On CPU a batch runs in equal chunks: 7 trials in chunks of at most 3 (3 steps of 3, 2 padding trials
    dropped) equal the trials alone, and the program holds the kernel's level loops once, as for 6 trials
    (``lax.map(batch_size=3)`` traced a second copy for the remainder: 7 loops instead of 4, compiled twice)."""
    n = 800  # the largest gaps (on CPU), whose loop shows
    monkeypatch.setattr(_smooth_kernel, "_CPU_CHUNK_VALUES", 3 * n)
    x = np.sort(np.random.default_rng(5).uniform(LOWER, UPPER, (7, n)), axis=1)

    def batched(d):
        return jax.vmap(lambda row: io.median_smooth_sensitivity(row, beta=0.2, lower=LOWER, upper=UPPER,
                                                                 clip=True))(d)

    alone = [float(io.median_smooth_sensitivity(row, beta=0.2, lower=LOWER, upper=UPPER, clip=True)) for row in x]
    np.testing.assert_array_equal(jax.jit(batched)(x), alone)
    # Loops (fori_loop with static bounds and lax.map are both scans): the kernel's level phases, plus the map.
    single = _count(jax.make_jaxpr(lambda row: io.median_smooth_sensitivity(row, beta=0.2, lower=LOWER,
                                                                            upper=UPPER, clip=True))(x[0]), "scan")
    assert _count(jax.make_jaxpr(batched)(x), "scan") == _count(jax.make_jaxpr(batched)(x[:6]), "scan") == single + 1


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the largest gaps are the CPU path")
@pytest.mark.parametrize("n,max_distance,largest_gaps", [(5789, None, True), (5790, None, False),
                                                         (8000, 2894, True), (8000, 2895, False)])
def test_largest_gaps_up_to_its_budget_then_the_blocked_search(n, max_distance, largest_gaps):
    """The kernel's choice on CPU: at most 2^23 pairs (n = 5789: 2896 x 2896 pairs; a truncation K = 2894:
    2896 x 2896) by the largest gaps (a loop that updates a table in place, no segment reduction); one
    more column (n = 5790: 2896 x 2897) or both, the blocked search's segment reductions (scatters)."""
    assert _smooth_sensitivity._LARGEST_GAPS_PAIRS == 2**23
    jaxpr = jax.make_jaxpr(lambda d: io.median_smooth_sensitivity(d, beta=0.1, lower=LOWER, upper=UPPER, clip=True,
                                                                  max_distance=max_distance))(jnp.zeros(n))
    assert (_count(jaxpr, "dynamic_update_slice") > 0) == largest_gaps
    assert (_count(jaxpr, "scatter-add") + _count(jaxpr, "scatter_max") + _count(jaxpr, "scatter-max") > 0) == (
        not largest_gaps)


def test_nan_reaching_the_kernel_gives_nan_as_the_definition_does():
    # The kernel itself, on NaN that no public path lets through (eager calls raise, traced ones need clip=True,
    # which maps NaN to lower).
    x = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    got = jax.jit(lambda d: _smooth_sensitivity._median_smooth_sensitivity(
        _smooth_sensitivity.sort_rows(d), jnp.float64(0.1), LOWER, UPPER, 3, 5)[0])(x)
    assert np.isnan(float(got)) and np.isnan(reference(x[None], np.array([0.1]))[0])


def _largest_intermediate(closed_jaxpr):
    """The most elements of any value in the jaxpr, sub-jaxprs (loops, jit calls) included."""
    return max(int(np.prod(getattr(var.aval, "shape", ()), dtype=np.int64))
               for eqn in _equations(closed_jaxpr) for var in eqn.outvars)


@pytest.mark.parametrize("n", [4097, 20000])
def test_no_quadratic_intermediate(n):
    """Structural sub-quadratic check (not a timing): no value has more than 4 (n + 2) elements per trial.

    The definition builds [batch, n + 2] gap blocks over all k (here batch = 256), so the same check
    flags it: the power of the test.
    """
    x = jnp.zeros(n)
    ours = jax.make_jaxpr(lambda d: io.median_smooth_sensitivity(d, beta=0.1, lower=LOWER, upper=UPPER,
                                                                 clip=True))(x)
    assert _largest_intermediate(ours) <= 4 * (n + 2)
    batched = jax.make_jaxpr(jax.vmap(lambda d: io.median_smooth_sensitivity(d, beta=0.1, lower=LOWER, clip=True,
                                                                             upper=UPPER)))(jnp.zeros((8, n)))
    assert _largest_intermediate(batched) <= 8 * 4 * (n + 2)
    definition = jax.make_jaxpr(lambda d: quadratic_smooth_sensitivity(d, 0.1, LOWER, UPPER, (n + 1) // 2, n))(x)
    assert _largest_intermediate(definition) > 4 * (n + 2)
