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

from gpuprivacy.sweeps._parameters import REQUIRED, UNSET, SweepParameter

RESERVED_PARAMETERS = ("sensitivity", "query_max")


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
    fn: Callable | None
    parameters: Mapping[str, SweepParameter] | None
    description: str
    # "cell": fn(key, queries, params, num_trials) -> metrics; "release": a public mechanism run by the
    # study engine (payload: SweepableMechanism). Datasets: "fixed": fn(params) -> SweepData; "drawn": a
    # distribution drawn on the device per trial (payload: the Distribution).
    kind: str = "cell"
    payload: Any = None


_MECHANISMS: dict[str, _Entry] = {}
_DATASETS: dict[str, _Entry] = {}


def _register(kind: str, registry: dict, name, fn, parameters, description, replace,
              reserved: tuple = RESERVED_PARAMETERS) -> None:
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
            if pname == "name" or (kind == "mechanism" and pname in reserved):
                raise ValueError(f"sweep {kind} {name!r} may not declare a parameter named {pname!r}: "
                                 f"'name' and {reserved} are reserved.")
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
    _DATASETS[name] = _DATASETS[name]._replace(kind="fixed")


def register_mechanism(release: Callable, *, target: str, name: str | None = None, description: str = "",
                       replace: bool = False, order_invariant: bool = False, neighbours: str = "unstated") -> str:
    """Makes a mechanism ``release(key, data, **params) -> Release`` sweepable, in one call.

    Its keyword-only parameters (typed by their annotations) become the config's keys and are
    checked before any cell runs; the study engine draws each trial's data, runs the mechanism
    batched on the devices and reports the metrics of :mod:`gpuprivacy.sweeps` against ``target``
    (``"median"``, ``"quantile"``, ``"clipped-mean"``, ``"argmax"`` or ``"identity"``).
    Returns the name configs use (default: the function's name in kebab case).

    ``order_invariant=True`` says that ``release(key, x)`` equals ``release(key, sort(x))`` bitwise
    for every dataset (it sorts first and sums nothing in data order) and the target is an order
    statistic: the engine then sorts each dataset once for all such mechanisms of a block (see
    :func:`gpuprivacy.sweeps.make_sweepable`). A wrong claim changes the results, not the guarantee.

    Examples:
      >>> import jax.numpy as jnp
      >>> from gpuprivacy import mechanisms
      >>> def noisy_mean(key, data, *, epsilon: float, lower: float, upper: float):
      ...     mean = jnp.mean(jnp.clip(data, lower, upper))
      ...     return mechanisms.laplace_mechanism(key, mean, epsilon=epsilon,
      ...                                         sensitivity=(upper - lower) / data.shape[0])
      >>> register_mechanism(noisy_mean, target="identity", replace=True)
      'noisy-mean'
    """
    from gpuprivacy.sweeps._mechanisms import make_sweepable

    sweepable = make_sweepable(release, target=target, name=name, description=description,
                               order_invariant=order_invariant, neighbours=neighbours)
    # A mechanism run per trial takes its own sensitivity (no dataset-declared constants): nothing reserved.
    _register("mechanism", _MECHANISMS, sweepable.name, release, sweepable.parameters, sweepable.description,
              replace, reserved=())
    _MECHANISMS[sweepable.name] = _MECHANISMS[sweepable.name]._replace(kind="release", payload=sweepable)
    return sweepable.name


def _builtin_mechanisms() -> dict[str, _Entry]:
    from gpuprivacy.sweeps._mechanisms import builtin_sweepables

    return {name: _Entry(m.release, m.parameters, m.description, "release", m)
            for name, m in builtin_sweepables().items()}


def _distribution_entry(name: str) -> _Entry | None:
    from gpuprivacy import datasets
    from gpuprivacy._checks import check_int

    try:
        dist = datasets.distribution(name)
    except (ValueError, KeyError):
        return None
    parameters = {
        "n": SweepParameter(lambda v: check_int("n", v, minimum=1), example="n = [100, 1000, 10000]"),
        "fresh": SweepParameter(_check_fresh, default=True, example="fresh = true"),
    }
    for pname, default in dist.parameters.items():
        parameters[pname] = SweepParameter(_real_checker(pname), default=float(default),
                                           example=f"{pname} = {float(default)!r}")
    return _Entry(dist.draw, parameters, dist.description, "drawn", dist)


def _check_fresh(value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"fresh must be true (a new dataset per trial) or false (one per cell), got {value!r}.")
    return bool(value)


def _real_checker(name):
    def check(value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a real number, got {value!r}.")
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}.")
        return value
    return check


def list_sweep_mechanisms() -> dict[str, str]:
    """Sweepable mechanisms, name -> description, sorted by name: registered ones and every built-in."""
    entries = {**_builtin_mechanisms(), **_MECHANISMS}
    return {name: entries[name].description for name in sorted(entries)}


def list_sweep_datasets() -> dict[str, str]:
    """Sweep datasets, name -> description, sorted by name: registered ones and every distribution."""
    from gpuprivacy import datasets

    entries = {name: description for name, description in datasets.list_distributions().items()}
    entries.update({name: entry.description for name, entry in _DATASETS.items()})
    return {name: entries[name] for name in sorted(entries)}


def get_mechanism(name: str) -> _Entry | None:
    if name in _MECHANISMS:
        return _MECHANISMS[name]
    return _builtin_mechanisms().get(name)


def get_dataset(name: str) -> _Entry | None:
    if name in _DATASETS:
        return _DATASETS[name]
    return _distribution_entry(name)


def _default_text(spec: SweepParameter) -> str:
    if spec.default is REQUIRED:
        return "REQUIRED"
    return spec.example.split("= ", 1)[-1] if spec.default is UNSET else repr(spec.default)


def describe_sweepables() -> dict:
    """Everything a config can name, for ``gpuprivacy sweep --list [--json]``.

    ``{"mechanisms": {name: {"description", "parameters": {p: default}, "target", "private"}}, "datasets": {...},
    "metrics": {name: {"description"}}, "not_sweepable": {name: reason}}``; a parameter's default is
    ``"REQUIRED"`` when a config must set it.
    """
    from gpuprivacy.sweeps._mechanisms import NOT_SWEEPABLE
    from gpuprivacy.sweeps._metrics import list_metrics

    mechanisms = {}
    for name, description in list_sweep_mechanisms().items():
        entry = get_mechanism(name)
        item = {"description": description,
                "parameters": {p: _default_text(s) for p, s in (entry.parameters or {}).items()}}
        if entry.kind == "release":
            item["target"] = entry.payload.target
            item["private"] = entry.payload.private  # False: the nonprivate baseline only
        mechanisms[name] = item
    datasets = {}
    for name, description in list_sweep_datasets().items():
        entry = get_dataset(name)
        datasets[name] = {"description": description, "kind": "drawn per trial" if entry.kind == "drawn" else "fixed",
                          "parameters": {p: _default_text(s) for p, s in (entry.parameters or {}).items()}}
    metrics = {name: {"description": description} for name, description in list_metrics().items()}
    not_sweepable = {name: why for name, why in NOT_SWEEPABLE.items() if name not in mechanisms}
    return {"mechanisms": mechanisms, "datasets": datasets, "metrics": metrics, "not_sweepable": not_sweepable}
