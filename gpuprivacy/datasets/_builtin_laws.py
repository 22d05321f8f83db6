"""The built-in data laws of :func:`gpuprivacy.datasets.draw`: samplers, population quantities and checks, each
with its reference, registered at import."""

from __future__ import annotations

import math
import statistics

import jax
import jax.numpy as jnp
import mpmath

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import check_nonnegative, check_positive, check_probability, is_tracer
from gpuprivacy.datasets._distributions import Distribution, register_distribution


# --- built-in laws ----------------------------------------------------------------------------------

def _check_scale(**params):
    check_positive("scale", params["scale"])


def _normal_quantile(q, loc, scale):
    return statistics.NormalDist(loc, scale).inv_cdf(q)


def _normal_sampler(key, shape, *, loc, scale):
    return loc + scale * threefry.normal(key, shape, jnp.float64)


def _check_uniform(*, low, high):
    if not is_tracer(low) and not is_tracer(high):
        if not low < high or not math.isfinite(high - low):
            raise ValueError(f"uniform needs low < high with a finite width, got low={low!r}, high={high!r}.")


def _uniform_sampler(key, shape, *, low, high):
    return low + (high - low) * threefry.uniform(key, shape, jnp.float64)


def _laplace_sampler(key, shape, *, loc, scale):
    return loc + scale * threefry.laplace(key, shape, jnp.float64)


def _laplace_quantile(q, loc, scale):
    # Inverse of F(x) = exp((x - loc)/scale)/2 for x < loc, 1 - exp(-(x - loc)/scale)/2 above; 1 - q is exact.
    return loc + scale * math.log(2.0 * q) if q < 0.5 else loc - scale * math.log(2.0 * (1.0 - q))


def _cauchy_sampler(key, shape, *, loc, scale):
    return loc + scale * jax.random.cauchy(key, shape, jnp.float64)


def _cauchy_quantile(q, loc, scale):
    # loc + scale tan(pi (q - 1/2)), written as -cot so each tail keeps its relative accuracy (1 - q is exact).
    if q == 0.5:
        return loc
    return loc - scale / math.tan(math.pi * q) if q < 0.5 else loc + scale / math.tan(math.pi * (1.0 - q))


def _check_lognormal(*, mu, sigma):
    check_positive("sigma", sigma)


def _lognormal_sampler(key, shape, *, mu, sigma):
    return jnp.exp(mu + sigma * threefry.normal(key, shape, jnp.float64))


def _lognormal_quantile(q, mu, sigma):
    # exp is increasing, so the q-quantile is exp of the normal one (Johnson, Kotz & Balakrishnan 1994, Ch. 14).
    return math.exp(mu + sigma * statistics.NormalDist().inv_cdf(q))


def _check_student_t(*, df, loc, scale):
    check_positive("df", df)
    check_positive("scale", scale)


def _student_t_sampler(key, shape, *, df, loc, scale):
    # Bailey's polar method (Bailey 1994, Math. Comp. 62(206), 779-781) with the point uniform on the unit disc
    # drawn directly: radius^2 W ~ U(0, 1] and angle 2 pi U, so T = cos(2 pi U) sqrt(df (W^(-2/df) - 1)) exactly.
    # Loop-free (jax.random.t goes through a rejection gamma sampler that is slow to compile); sqrt(df) e^(L/2)
    # sqrt(-expm1(-L)) with L = -(2/df) log W is the same value, accurate as W -> 1 and finite up to L = 1418.
    key_angle, key_radius = threefry.split(key)
    angle = jnp.cos(2 * jnp.pi * threefry.uniform(key_angle, shape, jnp.float64))
    radius2 = 1.0 - threefry.uniform(key_radius, shape, jnp.float64)  # (0, 1]
    power = -(2.0 / df) * jnp.log(radius2)
    t = angle * jnp.sqrt(df) * jnp.exp(0.5 * power) * jnp.sqrt(-jnp.expm1(-power))
    return loc + scale * t


def _student_t_quantile(q, df, loc, scale):
    """Inverts 2 P(T > x) = I_{df/(df + x^2)}(df/2, 1/2) (Johnson, Kotz & Balakrishnan 1995, Ch. 28) in mpmath."""
    if q == 0.5:
        return loc
    p = q if q < 0.5 else 1.0 - q  # exact for q >= 1/2 (Sterbenz)
    with mpmath.workdps(40):
        target, a, half, nu = 2 * mpmath.mpf(p), mpmath.mpf(df) / 2, mpmath.mpf(1) / 2, mpmath.mpf(df)

        def two_tail(x):  # decreasing in x >= 0
            return mpmath.betainc(a, half, 0, nu / (nu + x * x), regularized=True)

        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        while two_tail(hi) > target:
            if hi > 2 ** 1025:  # the quantile is beyond the float64 range
                return loc + scale * (math.inf if q > 0.5 else -math.inf)
            lo, hi = hi, 2 * hi
        for _ in range(4000):  # stops at a relative width of 2^-70, well below float64 resolution
            if hi - lo <= hi * mpmath.mpf(2) ** -70:
                break
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if two_tail(mid) > target else (lo, mid)
        x = float((lo + hi) / 2)
    return loc + scale * (x if q > 0.5 else -x)


def _check_mixture(*, weight, loc1, scale1, loc2, scale2):
    check_probability("weight", weight, open_interval=False)
    check_positive("scale1", scale1)
    check_positive("scale2", scale2)


def _mixture_sampler(key, shape, *, weight, loc1, scale1, loc2, scale2):
    key_component, key_normal = threefry.split(key)
    first = threefry.uniform(key_component, shape, jnp.float64) < weight
    z = threefry.normal(key_normal, shape, jnp.float64)
    return jnp.where(first, loc1 + scale1 * z, loc2 + scale2 * z)


def _mixture_quantile(q, weight, loc1, scale1, loc2, scale2):
    """Bisection in float64 on the mixture CDF; q > 1/2 works on the survival function to keep the upper tail."""
    a, b = _normal_quantile(q, loc1, scale1), _normal_quantile(q, loc2, scale2)
    lo, hi = min(a, b), max(a, b)  # F(lo) <= q <= F(hi): each component CDF is <= q at lo and >= q at hi
    upper = q > 0.5
    target = 1.0 - q if upper else q  # exact (Sterbenz)

    def below(x):  # F(x) < q
        z1, z2 = (x - loc1) / (scale1 * math.sqrt(2.0)), (x - loc2) / (scale2 * math.sqrt(2.0))
        if upper:
            return 0.5 * (weight * math.erfc(z1) + (1.0 - weight) * math.erfc(z2)) > target
        return 0.5 * (weight * math.erfc(-z1) + (1.0 - weight) * math.erfc(-z2)) < target

    while True:
        mid = lo + 0.5 * (hi - lo)
        if not lo < mid < hi:
            return hi
        lo, hi = (mid, hi) if below(mid) else (lo, mid)


def _check_lower_bound(*, min_density, radius, median_bound, shift):
    check_positive("min_density", min_density)
    check_positive("radius", radius)
    check_positive("median_bound", median_bound)
    if not is_tracer(min_density) and not is_tracer(radius) and min_density * radius > 0.5:
        raise ValueError(f"lower-bound-mixture needs min_density * radius <= 1/2 (Tzamos et al. 2020, Prop. 3.8), "
                         f"got {min_density!r} * {radius!r} = {min_density * radius!r}. Lower one of them.")
    if not is_tracer(shift) and not is_tracer(median_bound) and not abs(shift) < median_bound:
        raise ValueError(f"lower-bound-mixture needs |shift| < median_bound so that the median is shift "
                         f"(Tzamos et al. 2020, Prop. 3.8 takes shift = 2 alpha + eta < R), got shift={shift!r}, "
                         f"median_bound={median_bound!r}.")


def _lower_bound_sampler(key, shape, *, min_density, radius, median_bound, shift):
    # The same three uniforms, in the same roles, as gpuprivacy.reproduce's sample_data: side, component, position.
    key_side, key_component, key_position = threefry.split(key, 3)
    atom = radius + median_bound
    atoms = jnp.where(threefry.uniform(key_side, shape, jnp.float64) < 0.5, -atom, atom)
    central = threefry.uniform(key_component, shape, jnp.float64) < 2 * min_density * radius
    position = shift - radius + 2 * radius * threefry.uniform(key_position, shape, jnp.float64)
    return jnp.where(central, position, atoms)


def _lower_bound_quantile(q, min_density, radius, median_bound, shift):
    atom_mass = 0.5 - min_density * radius
    if q <= atom_mass:
        return -(radius + median_bound)
    if q <= atom_mass + 2 * min_density * radius:
        return shift - radius + (q - atom_mass) / min_density
    return radius + median_bound


def _check_scores_gap(*, gap, noise_scale):
    check_nonnegative("gap", gap)
    check_nonnegative("noise_scale", noise_scale)


def _scores_gap_sampler(key, shape, *, gap, noise_scale):
    key_best, key_noise = threefry.split(key)
    *rows, num_candidates = shape
    best = jax.random.randint(key_best, (*rows, 1), 0, max(num_candidates, 1), jnp.int32)
    planted = jax.lax.broadcasted_iota(jnp.int32, shape, len(shape) - 1) == best
    return jnp.where(planted, gap, 0.0) + noise_scale * threefry.normal(key_noise, shape, jnp.float64)


def _scores_uniform_sampler(key, shape):
    return threefry.uniform(key, shape, jnp.float64)


_JKB1 = "Johnson, Kotz & Balakrishnan 1994, Continuous Univariate Distributions Vol. 1"
_JKB2 = "Johnson, Kotz & Balakrishnan 1995, Continuous Univariate Distributions Vol. 2"

_BUILTINS = (
    Distribution(
        "normal", {"loc": 0.0, "scale": 1.0}, _normal_sampler,
        f"Normal N(loc, scale^2), density exp(-(x-loc)^2/(2 scale^2))/(scale sqrt(2 pi)) ({_JKB1}, Ch. 13).",
        population_median=lambda loc, scale: loc, population_mean=lambda loc, scale: loc,
        population_quantile=_normal_quantile, check=_check_scale),
    Distribution(
        "uniform", {"low": 0.0, "high": 1.0}, _uniform_sampler,
        f"Uniform on [low, high), density 1/(high - low) ({_JKB2}, Ch. 26).",
        population_median=lambda low, high: 0.5 * low + 0.5 * high,
        population_mean=lambda low, high: 0.5 * low + 0.5 * high,
        population_quantile=lambda q, low, high: low + q * (high - low), check=_check_uniform),
    Distribution(
        "laplace", {"loc": 0.0, "scale": 1.0}, _laplace_sampler,
        f"Laplace(loc, scale), density exp(-|x-loc|/scale)/(2 scale) ({_JKB2}, Ch. 24).",
        population_median=lambda loc, scale: loc, population_mean=lambda loc, scale: loc,
        population_quantile=_laplace_quantile, check=_check_scale),
    Distribution(
        "cauchy", {"loc": 0.0, "scale": 1.0}, _cauchy_sampler,
        f"Cauchy(loc, scale), density 1/(pi scale (1 + ((x-loc)/scale)^2)); no mean ({_JKB1}, Ch. 16).",
        population_median=lambda loc, scale: loc, population_mean=lambda loc, scale: None,
        population_quantile=_cauchy_quantile, check=_check_scale),
    Distribution(
        "lognormal", {"mu": 0.0, "sigma": 1.0}, _lognormal_sampler,
        "Lognormal: exp(mu + sigma Z), Z ~ N(0, 1), on x > 0; median exp(mu), mean exp(mu + sigma^2/2) "
        f"({_JKB1}, Ch. 14).",
        population_median=lambda mu, sigma: math.exp(mu),
        population_mean=lambda mu, sigma: math.exp(mu + 0.5 * sigma**2),
        population_quantile=_lognormal_quantile, check=_check_lognormal),
    Distribution(
        "student-t", {"df": 3.0, "loc": 0.0, "scale": 1.0}, _student_t_sampler,
        f"loc + scale T with T Student-t on df degrees of freedom; mean loc iff df > 1 ({_JKB2}, Ch. 28).",
        population_median=lambda df, loc, scale: loc,
        population_mean=lambda df, loc, scale: loc if df > 1 else None,
        population_quantile=_student_t_quantile, check=_check_student_t),
    Distribution(
        "normal-mixture", {"weight": 0.5, "loc1": -1.0, "scale1": 1.0, "loc2": 1.0, "scale2": 1.0},
        _mixture_sampler,
        "weight N(loc1, scale1^2) + (1 - weight) N(loc2, scale2^2), a two-component normal mixture "
        "(McLachlan & Peel 2000, Finite Mixture Models, Ch. 1); median by float64 bisection.",
        population_median=lambda **p: _mixture_quantile(0.5, **p),
        population_mean=lambda weight, loc1, scale1, loc2, scale2: weight * loc1 + (1.0 - weight) * loc2,
        population_quantile=_mixture_quantile, check=_check_mixture),
    Distribution(
        "lower-bound-mixture", {"min_density": 0.15, "radius": 1.0, "median_bound": 10.0, "shift": 0.0},
        _lower_bound_sampler,
        "Mass 1/2 - L r at each of -(r + R) and r + R, and 2 L r Uniform[shift - r, shift + r]; median shift "
        "(Tzamos, Vlatakis-Gkaragkounis & Zadik 2020, App. C, proof of Prop. 3.8: D_1 at shift 0, "
        "D_2 at shift 2 alpha + eta).",
        population_median=lambda min_density, radius, median_bound, shift: shift,
        population_mean=lambda min_density, radius, median_bound, shift: 2 * min_density * radius * shift,
        population_quantile=_lower_bound_quantile, check=_check_lower_bound),
    Distribution(
        "scores-gap", {"gap": 1.0, "noise_scale": 0.0}, _scores_gap_sampler,
        "Scores [..., d]: one candidate per row (uniform index) at gap, the rest at 0, plus N(0, noise_scale^2) "
        "i.i.d.; the planted-winner instance for report noisy max (Dwork & Roth 2014, Sec. 3.3).",
        check=_check_scores_gap, event_ndim=1),
    Distribution(
        "scores-uniform", {}, _scores_uniform_sampler,
        "Scores [..., d] i.i.d. Uniform[0, 1); truths are those of one score (Dwork & Roth 2014, Sec. 3.3 "
        "report noisy max inputs).",
        population_median=lambda: 0.5, population_mean=lambda: 0.5, population_quantile=lambda q: q,
        event_ndim=1),
)

for _dist in _BUILTINS:
    register_distribution(_dist)
del _dist
