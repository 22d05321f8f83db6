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
import types
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_finite_real, check_int, check_key, check_probability, is_tracer
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
