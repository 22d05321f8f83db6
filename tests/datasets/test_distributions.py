"""On-device data distributions: goodness of fit, traced parameters, batching, population truths, errors.

Goodness of fit uses the Dvoretzky-Kiefer-Wolfowitz inequality with Massart's
constant (Massart 1990, Ann. Probab. 18(3), Thm 1): for n i.i.d. draws from F,
P(sup |F_n - F| > t) <= 2 exp(-2 n t^2) for every F (atoms included), so
rejecting when the Kolmogorov-Smirnov distance exceeds
t = sqrt(log(2 / TEST_FAILURE_RATE) / (2 n)) fails with probability at most
TEST_FAILURE_RATE when the sampler is right. Each law is also tested against a
deliberately wrong one (a shifted location) at the same n, which must be
rejected: the power check. The CDFs below are written out here, independently
of the package (no scipy).
"""

import functools
import math
import statistics

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import datasets
from tests.conftest import TEST_FAILURE_RATE

NUM_SAMPLES = 20_000
KS_THRESHOLD = math.sqrt(math.log(2 / TEST_FAILURE_RATE) / (2 * NUM_SAMPLES))  # ~0.019


# --- independent CDFs (vectorised over x; `shift` moves the law for the power check) --------------------

def _phi(z):
    return 0.5 * np.vectorize(math.erfc)(-np.asarray(z) / math.sqrt(2))


def _cdf_normal(x, loc, scale):
    return _phi((x - loc) / scale)


def _cdf_uniform(x, low, high):
    return np.clip((x - low) / (high - low), 0.0, 1.0)


def _cdf_laplace(x, loc, scale):
    z = (x - loc) / scale
    return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))


def _cdf_cauchy(x, loc, scale):
    return 0.5 + np.arctan((x - loc) / scale) / math.pi


def _cdf_lognormal(x, mu, sigma):
    # P(exp(mu + sigma Z) <= x) = Phi((log x - mu) / sigma) for x > 0, and 0 for x <= 0.
    x = np.asarray(x, np.float64)
    positive = x > 0
    return np.where(positive, _phi((np.log(np.where(positive, x, 1.0)) - mu) / sigma), 0.0)


def _cdf_t3(x, df, loc, scale):
    # Student-t with 3 degrees of freedom in closed form (Johnson, Kotz & Balakrishnan 1995, Ch. 28).
    t = (x - loc) / scale
    return 0.5 + (t / (math.sqrt(3) * (1 + t * t / 3)) + np.arctan(t / math.sqrt(3))) / math.pi


def _cdf_mixture(x, weight, loc1, scale1, loc2, scale2):
    return weight * _cdf_normal(x, loc1, scale1) + (1 - weight) * _cdf_normal(x, loc2, scale2)


def _cdf_lower_bound(x, min_density, radius, median_bound, shift, *, left=False):
    """F(x), or F(x-) with left=True: atoms 1/2 - L r at -(r + R) and r + R, 2 L r Uniform[shift -+ r]."""
    atom, mass = radius + median_bound, 0.5 - min_density * radius
    below = (x > -atom) if left else (x >= -atom)
    above = (x > atom) if left else (x >= atom)
    central = 2 * min_density * radius * _cdf_uniform(x, shift - radius, shift + radius)
    return mass * below + central + mass * above


class Case:
    def __init__(self, name, params, cdf, location, sweep, shape=(NUM_SAMPLES,), cdf_left=None):
        self.name, self.params, self.cdf, self.location, self.sweep = name, params, cdf, location, sweep
        self.shape, self.cdf_left = shape, cdf_left

    def __repr__(self):
        return self.name


# One registry of cases drives every test below (STYLE rule 22). `location` is the parameter shifted for the
# power check; `sweep` the parameter swept over a grid in the compile-once check.
LB = dict(min_density=0.15, radius=1.0, median_bound=10.0, shift=0.5)
CASES = [
    Case("normal", dict(loc=1.5, scale=2.0), _cdf_normal, "loc", "scale"),
    Case("uniform", dict(low=-1.0, high=3.0), _cdf_uniform, "low", "high"),
    Case("laplace", dict(loc=-2.0, scale=0.5), _cdf_laplace, "loc", "scale"),
    Case("cauchy", dict(loc=0.5, scale=1.5), _cdf_cauchy, "loc", "scale"),
    Case("lognormal", dict(mu=0.5, sigma=0.75), _cdf_lognormal, "mu", "sigma"),
    Case("student-t", dict(df=3.0, loc=1.0, scale=2.0), _cdf_t3, "loc", "df"),  # df = 3: closed-form CDF
    Case("normal-mixture", dict(weight=0.3, loc1=-2.0, scale1=0.5, loc2=1.0, scale2=2.0), _cdf_mixture, "loc2",
         "weight"),
    Case("lower-bound-mixture", LB, _cdf_lower_bound, "shift", "shift",
         cdf_left=lambda x, **p: _cdf_lower_bound(x, **p, left=True)),
    Case("scores-uniform", {}, lambda x: _cdf_uniform(x, 0.0, 1.0), None, None, shape=(200, 100)),
    Case("scores-gap", dict(gap=2.0, noise_scale=0.5), None, None, "gap", shape=(2500, 8)),
]
FIT_CASES = [c for c in CASES if c.cdf is not None]


def ks_distance(x, cdf, cdf_left=None):
    """sup_x |F_n(x) - F(x)|, exact also where F has atoms (then F(x-) is needed at the sample points)."""
    values, counts = np.unique(np.asarray(x).ravel(), return_counts=True)
    n = counts.sum()
    upper = np.cumsum(counts) / n
    lower = upper - counts / n
    left = cdf(values) if cdf_left is None else cdf_left(values)
    return float(max(np.max(np.abs(upper - cdf(values))), np.max(np.abs(lower - left))))


def _sample(case, key, value=None):
    """An eager draw of the case's shape (one compilation per case, shared by the tests below)."""
    params = case.params if value is None or case.sweep is None else {**case.params, case.sweep: value}
    return np.asarray(datasets.draw(key, case.name, case.shape, **params))


@functools.cache
def _fit_sample(name):
    (case,) = [c for c in CASES if c.name == name]
    return _sample(case, jax.random.key(20261123))


def _shifted(case, by):
    params = dict(case.params)
    if case.location is not None:
        params[case.location] += by
    return params


# --- goodness of fit --------------------------------------------------------------------------------

@pytest.mark.parametrize("case", FIT_CASES, ids=repr)
def test_sampler_fits_its_law_and_rejects_a_shifted_one(case):
    x = _fit_sample(case.name)
    assert x.shape == case.shape and x.dtype == np.float64 and np.isfinite(x).all()
    left = None if case.cdf_left is None else (lambda v: case.cdf_left(v, **case.params))
    assert ks_distance(x, lambda v: case.cdf(v, **case.params), left) < KS_THRESHOLD
    if case.location is None:  # scores-uniform: the wrong law is Uniform[0.05, 1.05)
        assert ks_distance(x, lambda v: _cdf_uniform(v, 0.05, 1.05)) > KS_THRESHOLD
        return
    wrong = _shifted(case, 0.5)
    left = None if case.cdf_left is None else (lambda v: case.cdf_left(v, **wrong))
    assert ks_distance(x, lambda v: case.cdf(v, **wrong), left) > KS_THRESHOLD


def test_lower_bound_mixture_is_the_prop_3_8_construction(key):
    # Tzamos et al. 2020, App. C (proof of Prop. 3.8): atoms of mass 1/2 - L r at exactly -(r + R) and r + R.
    params = dict(min_density=0.2, radius=1.5, median_bound=4.0, shift=-1.0)
    x = np.asarray(datasets.draw(key, "lower-bound-mixture", (NUM_SAMPLES,), **params))
    central = (x >= -2.5) & (x < 0.5)
    assert set(np.unique(x[~central])) == {-5.5, 5.5}
    assert abs(np.mean(x == 5.5) - 0.2) < KS_THRESHOLD and abs(np.mean(central) - 0.6) < KS_THRESHOLD
    # The default is the private-median study's model (L, r, R) = (0.15, 1, 10) with D_1 (shift 0).
    assert dict(datasets.distribution("lower-bound-mixture").parameters) == dict(
        min_density=0.15, radius=1.0, median_bound=10.0, shift=0.0)


def test_scores_gap_plants_one_winner_per_row(key):
    num_rows, d = 2500, 8  # the case's shape: the eager kernel is compiled once
    clean = np.asarray(datasets.draw(key, "scores-gap", (num_rows, d), gap=0.7))
    assert ((clean == 0.0) | (clean == 0.7)).all() and ((clean == 0.7).sum(axis=1) == 1).all()
    # The winner's index is uniform on 0..d-1 (each count within a DKW-style Hoeffding band).
    counts = np.bincount(clean.argmax(axis=1), minlength=d) / num_rows
    band = math.sqrt(math.log(2 * d / TEST_FAILURE_RATE) / (2 * num_rows))
    assert np.all(np.abs(counts - 1 / d) < band)
    # With noise, the same key plants the same winners and adds N(0, noise_scale^2).
    noisy = np.asarray(datasets.draw(key, "scores-gap", (num_rows, d), gap=0.7, noise_scale=0.3))
    noise = (noisy - clean).ravel()[:NUM_SAMPLES]
    assert ks_distance(noise, lambda v: _cdf_normal(v, 0.0, 0.3)) < math.sqrt(
        math.log(2 / TEST_FAILURE_RATE) / (2 * noise.size))
    assert ks_distance(noise, lambda v: _cdf_normal(v, 0.0, 0.4)) > math.sqrt(
        math.log(2 / TEST_FAILURE_RATE) / (2 * noise.size))


# --- batching, tracing, determinism -----------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=repr)
def test_jit_and_vmap_over_keys_and_a_parameter_grid(case, key):
    """One compilation for a 20-value grid; jit == eager and vmap == loop, bitwise; same key, same draw.

    Shapes are those of the goodness-of-fit draws, so the eager kernel is compiled once per case.
    """
    traces = []

    def sample(k, value):
        traces.append(1)  # runs once per trace (compilation), not per call
        params = case.params if case.sweep is None else {**case.params, case.sweep: value}
        return datasets.draw(k, case.name, case.shape, **params)

    base = 0.0 if case.sweep is None else case.params[case.sweep]
    grid = base + np.linspace(0.0, 0.1, 20)
    keys = jax.random.split(key, grid.size)
    jitted = jax.jit(sample)
    outs = [jitted(k, float(v)) for k, v in zip(keys, grid)]
    assert len(traces) == 1
    eager = _sample(case, keys[7], float(grid[7]))
    np.testing.assert_array_equal(outs[7], eager)
    np.testing.assert_array_equal(eager, _sample(case, keys[7], float(grid[7])))
    assert not np.array_equal(outs[7], outs[8])
    batched = jax.vmap(jitted)(keys, jnp.asarray(grid))
    assert batched.shape == (grid.size, *case.shape) and batched.dtype == jnp.float64
    np.testing.assert_array_equal(batched, np.stack(outs))


def test_eager_calls_over_a_grid_reuse_one_compilation(key):
    traces = []

    def sampler(k, shape, *, scale):
        traces.append(1)
        return scale * jax.random.normal(k, shape, jnp.float64)

    datasets.register_distribution(datasets.Distribution("test-counting-normal", {"scale": 1.0}, sampler),
                                   replace=True)
    for scale in np.linspace(0.5, 2.0, 20):
        datasets.draw(key, "test-counting-normal", (8,), scale=float(scale))
    assert len(traces) == 1


# --- population truths (no scipy: closed forms, independent CDFs and large samples) -----------------

@pytest.mark.parametrize("case", FIT_CASES, ids=repr)
def test_quantile_inverts_the_independent_cdf(case):
    dist = datasets.distribution(case.name)
    for q in (1e-6, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99):
        x = dist.quantile(q, **case.params)
        if case.name == "lower-bound-mixture":  # F jumps at the atoms: check inf{x : F(x) >= q}
            assert case.cdf(x, **case.params) >= q - 1e-15 and case.cdf_left(x, **case.params) <= q + 1e-15
        else:
            assert case.cdf(np.asarray([x]), **case.params)[0] == pytest.approx(q, rel=1e-9, abs=1e-15)
    assert dist.median(**case.params) == pytest.approx(dist.quantile(0.5, **case.params), abs=1e-14)


@pytest.mark.parametrize("case", FIT_CASES, ids=repr)
def test_truths_agree_with_a_large_sample(case):
    dist = datasets.distribution(case.name)
    x = _fit_sample(case.name).ravel()
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        # DKW: F_n(x_q) >= F(x_q) - t >= q - t and F_n(x_q-) <= F(x_q-) + t <= q + t (atoms included).
        x_q = dist.quantile(q, **case.params)
        assert np.mean(x <= x_q) > q - KS_THRESHOLD and np.mean(x < x_q) < q + KS_THRESHOLD
    mean = dist.mean(**case.params)
    if case.name == "cauchy":
        assert mean is None
        return
    # Every law here but Cauchy has a finite variance: by the CLT the sample mean is within 5 standard errors
    # (two-sided normal tail 5.7e-7 < TEST_FAILURE_RATE).
    assert abs(x.mean() - mean) < 5 * x.std() / math.sqrt(x.size)


def test_closed_form_truths():
    normal, laplace, cauchy, t = (datasets.distribution(n) for n in ("normal", "laplace", "cauchy", "student-t"))
    assert normal.median(loc=2.0, scale=3.0) == 2.0 and normal.mean(loc=2.0) == 2.0
    assert normal.quantile(0.975) == pytest.approx(1.959963984540054, rel=1e-15)
    assert laplace.quantile(0.75, loc=1.0, scale=2.0) == pytest.approx(1.0 + 2.0 * math.log(2.0), rel=1e-15)
    assert laplace.quantile(1e-12) == pytest.approx(math.log(2e-12), rel=1e-12)
    assert cauchy.quantile(0.75, loc=1.0, scale=2.0) == pytest.approx(3.0, rel=1e-15)
    assert cauchy.quantile(1e-12) == pytest.approx(-1 / math.tan(math.pi * 1e-12), rel=1e-12)
    # Student-t: df = 1 is Cauchy, df = 2 has q -> (2q - 1) / sqrt(2 q (1 - q)); the mean exists iff df > 1.
    for q in (1e-10, 0.02, 0.4, 0.6, 0.999):
        assert t.quantile(q, df=1.0) == pytest.approx(cauchy.quantile(q), rel=1e-13)
        assert t.quantile(q, df=2.0) == pytest.approx((2 * q - 1) / math.sqrt(2 * q * (1 - q)), rel=1e-13)
    assert t.mean(df=1.0) is None and t.mean(df=1.5, loc=4.0) == 4.0 and t.median(df=0.5, loc=-1.0) == -1.0
    uniform = datasets.distribution("uniform")
    assert (uniform.median(low=2.0, high=4.0), uniform.mean(low=2.0, high=4.0)) == (3.0, 3.0)
    # Lognormal (Johnson, Kotz & Balakrishnan 1994, Ch. 14): median e^mu, mean e^(mu + sigma^2/2).
    lognormal = datasets.distribution("lognormal")
    assert lognormal.median(mu=1.0, sigma=2.0) == pytest.approx(math.e, rel=1e-15)
    assert lognormal.mean(mu=1.0, sigma=2.0) == pytest.approx(math.exp(3.0), rel=1e-15)
    assert lognormal.quantile(0.975, sigma=0.5) == pytest.approx(math.exp(0.5 * 1.959963984540054), rel=1e-15)
    assert dict(lognormal.parameters) == {"mu": 0.0, "sigma": 1.0}
    scores = datasets.distribution("scores-uniform")
    assert (scores.median(), scores.mean(), scores.quantile(0.3)) == (0.5, 0.5, 0.3)
    gap = datasets.distribution("scores-gap")
    assert gap.median() is None and gap.mean() is None and gap.quantile(0.5) is None


def test_mixture_truths():
    mixture = datasets.distribution("normal-mixture")
    params = dict(weight=0.3, loc1=-2.0, scale1=0.5, loc2=1.0, scale2=2.0)
    median = mixture.median(**params)
    assert _cdf_mixture(np.asarray([median]), **params)[0] == pytest.approx(0.5, abs=1e-15)
    assert mixture.mean(**params) == pytest.approx(0.3 * -2.0 + 0.7 * 1.0, rel=1e-15)
    assert abs(mixture.median()) < 1e-15  # symmetric default
    # weight 1 is a single normal
    assert mixture.quantile(0.9, weight=1.0, loc1=3.0, scale1=2.0) == pytest.approx(
        statistics.NormalDist(3.0, 2.0).inv_cdf(0.9), rel=1e-14)
    # the upper tail keeps relative accuracy (survival function): 1 - F(x) = 1e-12
    x = mixture.quantile(1 - 1e-12, **params)
    survival = 0.3 * 0.5 * math.erfc((x + 2.0) / (0.5 * math.sqrt(2))) + 0.7 * 0.5 * math.erfc(
        (x - 1.0) / (2.0 * math.sqrt(2)))
    assert survival == pytest.approx(1 - (1 - 1e-12), rel=1e-9)


def test_lower_bound_mixture_truths():
    dist = datasets.distribution("lower-bound-mixture")
    params = dict(min_density=0.2, radius=1.5, median_bound=4.0, shift=-1.0)  # L r = 0.3
    assert dist.median(**params) == -1.0
    assert dist.mean(**params) == pytest.approx(2 * 0.3 * -1.0, rel=1e-15)
    assert dist.quantile(0.1, **params) == -5.5 and dist.quantile(0.81, **params) == 5.5
    assert dist.quantile(0.5, **params) == pytest.approx(-1.0, abs=1e-15)
    assert dist.quantile(0.35, **params) == pytest.approx(-1.0 - 0.15 / 0.2, rel=1e-14)


# --- validation -------------------------------------------------------------------------------------

def test_registry_lists_every_builtin_with_a_citing_description():
    listing = datasets.list_distributions()
    for name in ("normal", "uniform", "laplace", "cauchy", "lognormal", "student-t", "normal-mixture",
                 "lower-bound-mixture", "scores-gap", "scores-uniform"):
        assert name in listing and "\n" not in listing[name]
        assert any(str(year) in listing[name] for year in range(1990, 2030)), listing[name]
    assert list(listing) == sorted(listing)


def test_unknown_names_are_clear_errors(key):
    with pytest.raises(ValueError, match=r"unknown distribution 'normall' \(did you mean 'normal'\?\).*cauchy, .*"
                                         r"laplace.*register_distribution"):
        datasets.distribution("normall")
    with pytest.raises(TypeError, match=r"'normal' has no parameter 'sigma'; its parameters .* loc=0.0, scale=1.0"):
        datasets.draw(key, "normal", (3,), sigma=1.0)
    with pytest.raises(TypeError, match=r"no parameter 'scal'.*Did you mean 'scale'"):
        datasets.distribution("laplace").median(scal=1.0)


@pytest.mark.parametrize("name, params, match", [
    ("normal", dict(scale=0.0), r"scale must be finite and > 0, got 0.0"),
    ("normal", dict(loc=float("nan")), r"loc must be finite"),
    ("uniform", dict(low=1.0, high=1.0), r"low < high.*low=1.0, high=1.0"),
    ("lognormal", dict(sigma=0.0), r"sigma must be finite and > 0, got 0.0"),
    ("student-t", dict(df=-1.0), r"df must be finite and > 0"),
    ("normal-mixture", dict(weight=1.5), r"weight must lie in \[0, 1\]"),
    ("lower-bound-mixture", dict(min_density=0.6), r"min_density \* radius <= 1/2.*0.6"),
    ("lower-bound-mixture", dict(shift=10.0), r"\|shift\| < median_bound.*shift=10.0"),
    ("scores-gap", dict(noise_scale=-1.0), r"noise_scale must be finite and >= 0"),
    ("normal", dict(scale="big"), r"scale must be a real number"),
])
def test_bad_parameter_values_are_named(name, params, match, key):
    with pytest.raises((ValueError, TypeError), match=match):
        datasets.draw(key, name, (3,), **params)
    with pytest.raises((ValueError, TypeError), match=match):
        datasets.distribution(name).check_parameters(**params)


def test_bad_calls_say_how_to_fix_them(key):
    with pytest.raises(ValueError, match="Use jax.vmap for batching"):
        datasets.draw(jax.random.split(key, 2), "normal", (3,))
    with pytest.raises(TypeError, match="Use jax.vmap over the parameter"):
        datasets.draw(key, "normal", (3,), scale=np.ones(3))
    with pytest.raises(TypeError, match="Use jax.vmap for batching"):
        jax.jit(lambda s: datasets.draw(key, "normal", (3,), scale=s))(jnp.ones(3))
    with pytest.raises(ValueError, match=r"at least 1 axis.*got \(\)"):
        datasets.draw(key, "scores-uniform", ())
    with pytest.raises(ValueError, match=r"shape\[0\] must be >= 0"):
        datasets.draw(key, "normal", (-1,))
    with pytest.raises(ValueError, match=r"q must lie in \(0, 1\), got 1.0"):
        datasets.distribution("normal").quantile(1.0)
    with pytest.raises(TypeError, match=r"computed in Python float64.*'scale' is traced"):
        jax.jit(lambda s: datasets.distribution("normal").median(scale=s))(1.0)


def test_register_distribution_validates(key):
    def sampler(k, shape, *, rate):
        return jax.random.exponential(k, shape, jnp.float64) / rate

    dist = datasets.Distribution("test-exponential", {"rate": 1}, sampler, "Exponential(rate).",
                                 population_mean=lambda rate: 1 / rate,
                                 check=lambda rate: None)
    datasets.register_distribution(dist, replace=True)
    assert datasets.distribution("test-exponential").mean(rate=4) == 0.25
    assert datasets.distribution("test-exponential").median() is None  # not provided
    assert dict(dist.parameters) == {"rate": 1.0}
    with pytest.raises(ValueError, match="already registered.*replace=True"):
        datasets.register_distribution(dist)
    with pytest.raises(TypeError, match="takes a Distribution"):
        datasets.register_distribution("normal")
    with pytest.raises(ValueError, match="'shape' are reserved|reserved"):
        datasets.Distribution("test-bad", {"shape": 1.0}, sampler)
    with pytest.raises(ValueError, match="must be finite"):
        datasets.Distribution("test-bad", {"rate": float("inf")}, sampler)
    with pytest.raises(TypeError, match="sampler .* must be callable"):
        datasets.Distribution("test-bad", {}, None)
    wrong = datasets.Distribution("test-wrong-shape", {}, lambda k, shape: jnp.zeros(3))
    datasets.register_distribution(wrong, replace=True)
    with pytest.raises(ValueError, match=r"returned shape \(3,\) for shape=\(4,\)"):
        datasets.draw(key, "test-wrong-shape", (4,))
