"""Registries of sweep mechanisms and sweep datasets.

A *sweep mechanism* turns one grid cell into a few numbers::

    fn(key, queries, params, num_trials) -> dict[str, float]

``key`` is the cell's own typed PRNG key (derived from the sweep seed and the
cell id, so the numbers do not depend on the order of the cells or on
resuming), ``queries`` is the dataset's ``float64[d]`` query vector as a JAX
array, ``params`` holds the cell's mechanism parameters (defaults filled in)
plus two constants the dataset declares -- ``sensitivity`` (per-query
sensitivity) and ``query_max`` (upper end of the query range, the
:math:`q_{\\max}` of accuracy eq. (39) of Lebensold et al. 2024) -- and
``num_trials`` is the number of independent runs to batch (with
``jax.vmap``) and summarise.

A *sweep dataset* maps its parameters to a :class:`SweepData`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import jax
import numpy as np


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Marks a :class:`SweepParameter` that every config must set."""

RESERVED_PARAMETERS = ("sensitivity", "query_max")


class SweepParameter(NamedTuple):
    """One parameter of a sweep mechanism or dataset.

    Attributes:
      check: validates one concrete value and returns its canonical form
        (e.g. ``1`` -> ``1.0`` for epsilon); raises ``ValueError`` or
        ``TypeError`` naming the problem. Runs before any cell is computed.
      default: value used when a config omits the key; :data:`REQUIRED` if
        there is none.
      example: a TOML snippet shown in error messages, e.g. ``"epsilon = [0.1, 1.0]"``.
    """

    check: Callable[[Any], Any]
    default: Any = REQUIRED
    example: str = ""


class SweepData(NamedTuple):
    """A dataset as a sweep mechanism sees it.

    Attributes:
      queries: ``float64[d]`` query values.
      sensitivity: per-query sensitivity :math:`\\Delta` declared for them.
      query_max: upper end of the query range (1 for queries in [0, 1]).
    """

    queries: np.ndarray
    sensitivity: float
    query_max: float


SweepMechanismFn = Callable[[jax.Array, jax.Array, dict, int], Mapping[str, float]]
SweepDatasetFn = Callable[[dict], SweepData]


class _Entry(NamedTuple):
    fn: Callable
    parameters: Mapping[str, SweepParameter] | None
    description: str


_MECHANISMS: dict[str, _Entry] = {}
_DATASETS: dict[str, _Entry] = {}


def _register(kind: str, registry: dict, name, fn, parameters, description, replace) -> None:
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"a sweep {kind} name must be a non-empty string without surrounding spaces, got {name!r}.")
    if not callable(fn):
        raise TypeError(f"fn for sweep {kind} {name!r} must be callable, got {type(fn).__name__}.")
    if parameters is not None:
        parameters = dict(parameters)
        for pname, spec in parameters.items():
            if not isinstance(spec, SweepParameter):
                raise TypeError(f"parameter {pname!r} of sweep {kind} {name!r} must be a SweepParameter, "
                                f"got {type(spec).__name__}.")
            if pname == "name" or (kind == "mechanism" and pname in RESERVED_PARAMETERS):
                raise ValueError(f"sweep {kind} {name!r} may not declare a parameter named {pname!r}: "
                                 f"'name' and {RESERVED_PARAMETERS} are reserved.")
    if name in registry and not replace:
        raise ValueError(f"a sweep {kind} named {name!r} is already registered. Pick another name or pass "
                         "replace=True.")
    registry[name] = _Entry(fn, parameters, str(description))


def register_sweep_mechanism(name: str, fn: SweepMechanismFn, *,
                             parameters: Mapping[str, SweepParameter] | None = None,
                             description: str = "", replace: bool = False) -> None:
    """Makes ``fn`` available to sweep configs as ``[mechanism] name = "<name>"``.

    Args:
      name: the name configs use.
      fn: ``fn(key, queries, params, num_trials) -> dict[str, float]`` (see
        the module docstring). It must be deterministic given its arguments.
      parameters: the parameters a config may set, each a
        :class:`SweepParameter`. With None any key is accepted and passed
        through unchecked (then ``fn`` must validate them itself).
      description: one line for listings.
      replace: allow replacing an existing registration.

    Examples:
      >>> def constant(key, queries, params, num_trials):
      ...     return {"value": params["value"]}
      >>> register_sweep_mechanism("doc-constant", constant,
      ...                          parameters={"value": SweepParameter(float, default=0.0)},
      ...                          replace=True)
      >>> "doc-constant" in list_sweep_mechanisms()
      True
    """
    _register("mechanism", _MECHANISMS, name, fn, parameters, description, replace)


def register_sweep_dataset(name: str, fn: SweepDatasetFn, *,
                           parameters: Mapping[str, SweepParameter] | None = None,
                           description: str = "", replace: bool = False) -> None:
    """Makes ``fn(params) -> SweepData`` available as ``[dataset] name = "<name>"``."""
    _register("dataset", _DATASETS, name, fn, parameters, description, replace)


def list_sweep_mechanisms() -> dict[str, str]:
    """Registered sweep mechanisms, name -> description, sorted by name."""
    return {name: _MECHANISMS[name].description for name in sorted(_MECHANISMS)}


def list_sweep_datasets() -> dict[str, str]:
    """Registered sweep datasets, name -> description, sorted by name."""
    return {name: _DATASETS[name].description for name in sorted(_DATASETS)}


def get_mechanism(name: str) -> _Entry | None:
    return _MECHANISMS.get(name)


def get_dataset(name: str) -> _Entry | None:
    return _DATASETS.get(name)
