"""Data distributions drawn on the device from a PRNG key, with population truths.

A :class:`Distribution` pairs a sampler written with ``jax.random`` only with
the population median, mean and quantile function of its law, computed in
float64 Python off the device. Parameters are real scalars passed by keyword;
their *values* may be JAX tracers, so a grid over a parameter compiles once
(``jax.jit``) or runs as one batch (``jax.vmap``). Ranges are checked eagerly
on concrete values and skipped on tracers (STYLE rule 4): validate a grid
with :meth:`Distribution.check_parameters` before tracing over it.

Simulated data are public test inputs, not releases: these samplers use the
plain ``jax.random`` algorithms and make no claim about floating-point tails.

The registry holds the built-ins listed by :func:`list_distributions` and
anything added with :func:`register_distribution`.
"""

from __future__ import annotations

import dataclasses
import difflib
import keyword
import math
import statistics
import types
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from gpuprivacy._checks import (check_finite_real, check_int, check_key, check_nonnegative, check_positive,
                                check_probability, is_tracer)
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Array, Key

Shape = int | Sequence[int]
Sampler = Callable[..., Array]
Truth = Callable[..., "float | None"]

_RESERVED = frozenset({"key", "shape", "name", "q", "self"})


def _canonical_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r} of type {type(shape).__name__}.")
    return tuple(check_int(f"shape[{i}]", s, minimum=0) for i, s in enumerate(shape))


@dataclasses.dataclass(frozen=True, eq=False)
class Distribution:
    """A data distribution: a keyed ``jax.random`` sampler plus its population truths (final class).

    Attributes:
      name: the registry name, e.g. ``"normal"``.
      parameters: ``{name: default}``, every parameter a real scalar. Read-only.
      sampler: ``sampler(key, shape, **params) -> float64[*shape]``. ``key`` is
        a single typed key, ``shape`` a static tuple of ints, and every
        parameter arrives as a float64 0-d array that may be a tracer, so the
        sampler must not branch in Python on parameter values.
      description: one line: the law and where it is defined.
      population_median, population_mean: ``f(**params) -> float | None``
        from concrete (Python float) parameters; ``None`` (the attribute) or
        a ``None`` result means the quantity does not exist or is not provided.
      population_quantile: ``f(q, **params) -> float | None`` for ``q`` in
        (0, 1): the smallest ``x`` with ``F(x) >= q``.
      check: ``check(**params) -> None``; raises ``ValueError``/``TypeError``
        for out-of-range concrete values and lets tracers through (use the
        ``check_*`` helpers, which skip tracers). Finiteness is checked for
        every parameter before it runs.
      event_ndim: the fewest axes ``shape`` must have (1 for score vectors,
        whose last axis is the candidates).

    Examples:
      >>> import jax
      >>> def sampler(key, shape, *, rate):
      ...     return jax.random.exponential(key, shape, "float64") / rate
      >>> exponential = Distribution(
      ...     "doc-exponential", {"rate": 1.0}, sampler,
      ...     "Exponential(rate), density rate exp(-rate x) on x >= 0.",
      ...     population_median=lambda rate: math.log(2.0) / rate,
      ...     population_mean=lambda rate: 1.0 / rate)
      >>> register_distribution(exponential, replace=True)
      >>> draw(jax.random.key(0), "doc-exponential", (3,), rate=2.0).shape
      (3,)
      >>> distribution("doc-exponential").mean(rate=4.0)
      0.25
    """

    name: str
    parameters: Mapping[str, float]
    sampler: Sampler
    description: str = ""
    population_median: Truth | None = None
    population_mean: Truth | None = None
    population_quantile: Truth | None = None
    check: Callable[..., None] | None = None
    event_ndim: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip():
            raise ValueError(f"a distribution name must be a non-empty string without surrounding spaces, "
                             f"got {self.name!r}.")
        if not isinstance(self.parameters, Mapping):
            raise TypeError(f"parameters of distribution {self.name!r} must be a dict of name -> default, got "
                            f"{type(self.parameters).__name__}.")
        defaults = {}
        for pname, default in self.parameters.items():
            if not isinstance(pname, str) or not pname.isidentifier() or keyword.iskeyword(pname):
                raise ValueError(f"parameter name {pname!r} of distribution {self.name!r} must be a Python "
                                 "identifier (it is passed by keyword).")
            if pname in _RESERVED:
                raise ValueError(f"distribution {self.name!r} may not name a parameter {pname!r}: "
                                 f"{sorted(_RESERVED)} are reserved.")
            if is_tracer(default):
                raise TypeError(f"the default of parameter {pname!r} of distribution {self.name!r} must be a "
                                "concrete real number, got a traced value.")
            defaults[pname] = check_finite_real(f"default of parameter {pname!r} of {self.name!r}", default)
        object.__setattr__(self, "parameters", types.MappingProxyType(defaults))
        if not callable(self.sampler):
            raise TypeError(f"sampler of distribution {self.name!r} must be callable as sampler(key, shape, "
                            f"**params), got {type(self.sampler).__name__}.")
        for field in ("population_median", "population_mean", "population_quantile", "check"):
            value = getattr(self, field)
            if value is not None and not callable(value):
                raise TypeError(f"{field} of distribution {self.name!r} must be callable or None, got "
                                f"{type(value).__name__}.")
        if not isinstance(self.description, str):
            raise TypeError(f"description of distribution {self.name!r} must be a string, got "
                            f"{type(self.description).__name__}.")
        object.__setattr__(self, "event_ndim", check_int("event_ndim", self.event_ndim, minimum=0))

    def check_parameters(self, **params: Any) -> dict[str, Any]:
        """All parameters (defaults filled in), validated where concrete.

        Concrete values come back as Python floats; tracers come back as they
        are (their shape must be ``()``; use ``jax.vmap`` to batch).

        Raises:
          TypeError: for an unknown parameter name, a non-real value or a
            non-scalar one.
          ValueError: for a concrete value out of range.

        Examples:
          >>> distribution("normal").check_parameters(scale=2)
          {'loc': 0.0, 'scale': 2.0}
        """
        unknown = [p for p in params if p not in self.parameters]
        if unknown:
            valid = ", ".join(f"{p}={d!r}" for p, d in self.parameters.items()) or "none"
            hint = difflib.get_close_matches(unknown[0], list(self.parameters), n=1)
            raise TypeError(f"distribution {self.name!r} has no parameter {unknown[0]!r}; its parameters (with "
                            f"defaults) are: {valid}." + (f" Did you mean {hint[0]!r}?" if hint else ""))
        out = {}
        for pname, default in self.parameters.items():
            value = params.get(pname, default)
            if is_tracer(value):
                if value.shape != ():
                    raise TypeError(f"parameter {pname!r} of distribution {self.name!r} must be a scalar, got a "
                                    f"traced array of shape {value.shape}. Use jax.vmap for batching.")
                out[pname] = value
                continue
            if not isinstance(value, (str, bytes)) and getattr(value, "shape", ()) != ():
                raise TypeError(f"parameter {pname!r} of distribution {self.name!r} must be a scalar, got shape "
                                f"{value.shape}. Use jax.vmap over the parameter for a grid.")
            out[pname] = check_finite_real(pname, value)
        if self.check is not None:
            self.check(**out)
        return out

    def draw(self, key: Key, shape: Shape = (), **params: Any) -> Array:
        """Draws ``float64[*shape]`` i.i.d. from this law (see :func:`draw`)."""
        require_x64("gpuprivacy.datasets.draw")
        key = check_key(key)
        shape = _canonical_shape(shape)
        if len(shape) < self.event_ndim:
            raise ValueError(f"distribution {self.name!r} needs a shape with at least {self.event_ndim} axis(es) "
                             f"(for scores, the last axis holds the candidates), got {shape}. Pass e.g. "
                             f"shape={(10,) * self.event_ndim}.")
        resolved = self.check_parameters(**params)
        arrays = {p: jnp.asarray(v, dtype=jnp.float64) for p, v in resolved.items()}
        return _draw_kernel(self.sampler, self.name, key, shape, arrays)

    def median(self, **params: Any) -> float | None:
        """Population median in float64, or None if not provided.

        Examples:
          >>> distribution("laplace").median(loc=3.0)
          3.0
        """
        return self._truth("median", self.population_median, (), params)

    def mean(self, **params: Any) -> float | None:
        """Population mean in float64, or None where it does not exist (Cauchy; Student-t with df <= 1).

        Examples:
          >>> distribution("cauchy").mean() is None
          True
        """
        return self._truth("mean", self.population_mean, (), params)

    def quantile(self, q: float, **params: Any) -> float | None:
        """Population quantile ``inf{x : F(x) >= q}`` for ``q`` in (0, 1), in float64; None if not provided.

        Examples:
          >>> distribution("uniform").quantile(0.25, low=0.0, high=4.0)
          1.0
        """
        if is_tracer(q):
            raise TypeError("q must be a concrete number: population truths are computed in Python float64.")
        q = check_probability("q", q, open_interval=True)
        return self._truth("quantile", self.population_quantile, (q,), params)

    def _truth(self, what: str, fn: Truth | None, args: tuple, params: dict) -> float | None:
        traced = [p for p, v in params.items() if is_tracer(v)]
        if traced:
            raise TypeError(f"the population {what} of {self.name!r} is computed in Python float64 from concrete "
                            f"parameters, but {traced[0]!r} is traced. Compute truths outside jit/vmap, one grid "
                            "value at a time.")
        resolved = self.check_parameters(**params)
        if fn is None:
            return None
        value = fn(*args, **resolved)
        return None if value is None else float(value)


def _draw_impl(sampler: Sampler, name: str, key: Key, shape: tuple[int, ...], params: dict) -> Array:
    # The barrier keeps XLA from folding parameters that are constants of an outer jit into the sampler's
    # arithmetic (reassociation, contraction), so eager, jit and vmap draws agree bitwise.
    params = jax.lax.optimization_barrier(params)
    out = jnp.asarray(sampler(key, shape, **params))
    if out.shape != shape:
        raise ValueError(f"the sampler of distribution {name!r} returned shape {out.shape} for shape={shape}; a "
                         "sampler must return exactly the requested shape.")
    return out.astype(jnp.float64)


# One compilation per (sampler, shape); parameters are float64 0-d arrays, so a grid of values reuses it.
_draw_kernel = jax.jit(_draw_impl, static_argnums=(0, 1, 3))


# --- the registry -----------------------------------------------------------------------------------

_REGISTRY: dict[str, Distribution] = {}


def register_distribution(dist: Distribution, replace: bool = False) -> None:
    """Adds ``dist`` to the registry under ``dist.name``.

    Args:
      dist: a :class:`Distribution` (its fields were validated when it was built).
      replace: allow replacing a registered distribution of the same name.

    Raises:
      TypeError: if ``dist`` is not a :class:`Distribution`.
      ValueError: if the name is taken and ``replace`` is False.
    """
    if not isinstance(dist, Distribution):
        raise TypeError(f"register_distribution takes a Distribution, got {type(dist).__name__}. Build one with "
                        "Distribution(name, parameters, sampler, description, ...).")
    if dist.name in _REGISTRY and not replace:
        raise ValueError(f"a distribution named {dist.name!r} is already registered. Pick another name or pass "
                         "replace=True.")
    _REGISTRY[dist.name] = dist


def distribution(name: str) -> Distribution:
    """The registered :class:`Distribution` called ``name``.

    Raises:
      ValueError: for an unknown name; the message lists the registered ones.

    Examples:
      >>> d = distribution("student-t")
      >>> dict(d.parameters)
      {'df': 3.0, 'loc': 0.0, 'scale': 1.0}
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string such as 'normal', got {name!r} of type {type(name).__name__}.")
    try:
        return _REGISTRY[name]
    except KeyError:
        hint = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        raise ValueError(f"unknown distribution {name!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
                         + f"; the registered ones are: {', '.join(sorted(_REGISTRY))}. Add your own with "
                         "register_distribution(Distribution(...)).") from None


def list_distributions() -> dict[str, str]:
    """Registered distributions, name -> one-line description, sorted by name.

    Examples:
      >>> "lower-bound-mixture" in list_distributions()
      True
    """
    return {name: _REGISTRY[name].description for name in sorted(_REGISTRY)}


def draw(key: Key, name: str, shape: Shape = (), **params: Any) -> Array:
    """Draws ``float64[*shape]`` from the registered distribution ``name``.

    Parameter values may be tracers, so a grid over a parameter compiles once:
    ``jax.jit(lambda key, s: draw(key, "normal", (n,), scale=s))``, or
    ``jax.vmap`` over keys and/or parameter values. Each call is one key;
    use ``jax.vmap`` (or ``jax.random.split``) for several. Ranges are
    checked on concrete values only: check a grid first, value by value,
    with ``distribution(name).check_parameters(...)``.

    Args:
      key: a single typed PRNG key (``jax.random.key(seed)``).
      name: a name from :func:`list_distributions`.
      shape: static output shape; score distributions read the last axis as
        the candidates.
      **params: the distribution's parameters (real scalars); omitted ones
        take their defaults.

    Returns:
      ``float64[*shape]``.

    Raises:
      ValueError, TypeError: unknown name or parameter, a batch of keys, or a
        concrete parameter out of range.

    Examples:
      >>> import jax
      >>> x = draw(jax.random.key(0), "normal", (4,), loc=10.0, scale=0.5)
      >>> x.shape, str(x.dtype)
      ((4,), 'float64')
      >>> grid = jax.numpy.linspace(0.5, 2.0, 5)
      >>> jax.vmap(lambda s: draw(jax.random.key(1), "laplace", (100,), scale=s))(grid).shape
      (5, 100)
    """
    return distribution(name).draw(key, shape, **params)


# --- built-in laws ----------------------------------------------------------------------------------

def _check_scale(**params):
    check_positive("scale", params["scale"])


def _normal_quantile(q, loc, scale):
    return statistics.NormalDist(loc, scale).inv_cdf(q)


def _normal_sampler(key, shape, *, loc, scale):
    return loc + scale * jax.random.normal(key, shape, jnp.float64)


def _check_uniform(*, low, high):
    if not is_tracer(low) and not is_tracer(high):
        if not low < high or not math.isfinite(high - low):
            raise ValueError(f"uniform needs low < high with a finite width, got low={low!r}, high={high!r}.")


def _uniform_sampler(key, shape, *, low, high):
    return low + (high - low) * jax.random.uniform(key, shape, jnp.float64)


def _laplace_sampler(key, shape, *, loc, scale):
    return loc + scale * jax.random.laplace(key, shape, jnp.float64)


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
    return jnp.exp(mu + sigma * jax.random.normal(key, shape, jnp.float64))


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
    key_angle, key_radius = jax.random.split(key)
    angle = jnp.cos(2 * jnp.pi * jax.random.uniform(key_angle, shape, jnp.float64))
    radius2 = 1.0 - jax.random.uniform(key_radius, shape, jnp.float64)  # (0, 1]
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
    key_component, key_normal = jax.random.split(key)
    first = jax.random.uniform(key_component, shape, jnp.float64) < weight
    z = jax.random.normal(key_normal, shape, jnp.float64)
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
    key_side, key_component, key_position = jax.random.split(key, 3)
    atom = radius + median_bound
    atoms = jnp.where(jax.random.uniform(key_side, shape, jnp.float64) < 0.5, -atom, atom)
    central = jax.random.uniform(key_component, shape, jnp.float64) < 2 * min_density * radius
    position = shift - radius + 2 * radius * jax.random.uniform(key_position, shape, jnp.float64)
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
    key_best, key_noise = jax.random.split(key)
    *rows, num_candidates = shape
    best = jax.random.randint(key_best, (*rows, 1), 0, max(num_candidates, 1), jnp.int32)
    planted = jax.lax.broadcasted_iota(jnp.int32, shape, len(shape) - 1) == best
    return jnp.where(planted, gap, 0.0) + noise_scale * jax.random.normal(key_noise, shape, jnp.float64)


def _scores_uniform_sampler(key, shape):
    return jax.random.uniform(key, shape, jnp.float64)


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
