"""Sweepable mechanisms: any public release function ``(key, data, *, params) -> Release`` as a sweep axis.

A :class:`SweepableMechanism` says how the study engine runs a mechanism on one
trial's data and what it estimates:

* ``release(key, data, **params) -> Release``: the public mechanism itself,
  unchanged (the engine calls exactly what a curator calls);
* ``target``: the non-private statistic the release estimates, by name
  (:data:`TARGETS`): the engine computes it on the same trial's data, and the
  population value from the data distribution, for the error metrics;
* ``parameters``: one :class:`~gpuprivacy.sweeps.SweepParameter` per keyword of
  the mechanism's signature, so a config's typo or wrong type is refused
  before any cell runs, naming the cell.

Every public release function of :mod:`gpuprivacy.mechanisms` whose data is one
vector (a sample, a score vector or a query vector) is registered under its
name in kebab case (``piecewise_laplace_median`` -> ``piecewise-laplace-median``);
:func:`register_mechanism` adds a user's own in one call.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_int
from gpuprivacy._sort import sort as _sort
from gpuprivacy.sweeps._parameters import REQUIRED, UNSET, SweepParameter

# Keywords that control how a release is computed, not what it is: never a grid axis.
_OPERATIONAL = frozenset({"progress", "chunk_size", "max_work", "max_queries", "capacity", "verify_determinism"})


def _median(x, params):
    # The mechanisms' median is an order statistic, the left one (rank ceil(n/2), 1-based) unless a
    # mechanism is told otherwise (private_median's median_index="floor": rank floor(n/2)); jnp.median
    # would average the two middle values at even n, which no mechanism estimates.
    from gpuprivacy.mechanisms.instance_optimal import median_rank

    n = x.shape[-1]
    rank = n // 2 if params.get("median_index") == "floor" else median_rank(n)
    return _sort(x)[max(rank, 1) - 1]


def _quantile(x, params):
    # The mechanisms' quantile is the order statistic of rank ceil(q * n) (1-based), as in
    # Asi & Duchi 2020, Sec. 5; jnp.quantile(method="higher") is a different rank at ties of q * n.
    # The same rank as the mechanisms' quantile_rank, its 1e-12 slack included (0.9 * 10 is 9.000000000000002).
    n = x.shape[-1]
    rank = jnp.clip(jnp.ceil(params["quantile"] * n - 1e-12).astype(jnp.int32), 1, n)
    return _sort(x)[rank - 1]


def _clipped_mean(x, params):
    return jnp.mean(jnp.clip(x, params["lower"], params["upper"]))


def _argmax(x, params):
    return jnp.argmax(x)


def _identity(x, params):
    return x


def _above(x, params):
    # AboveThreshold answers "top" for q_i + noise >= T + noise (Lyu, Su & Li 2017, Alg. 1): without noise, q_i >= T.
    return x >= params["threshold"]


def _first_above_threshold(x, params):
    # The encoding of above_threshold: the 0-based index of the first query >= threshold, -1 if none.
    above = _above(x, params)
    return jnp.where(jnp.any(above), jnp.argmax(above), -1).astype(jnp.int32)


def _stopping_time(x, params):
    # The encoding of gaussian_above_threshold: the 1-based stopping time, 0 if no query passes.
    above = _above(x, params)
    return jnp.where(jnp.any(above), jnp.argmax(above) + 1, 0).astype(jnp.int32)


def _threshold_answers(x, params):
    # The answers a sparse vector gives without noise, in its own encoding: True for q_i >= threshold, and, with a
    # cutoff c (max_positives), False after the c-th True, where Lyu, Su & Li's Alg. 1 halts.
    above = _above(x, params)
    cutoff = params.get("max_positives")
    if cutoff is None:
        return above
    return above & (jnp.cumsum(above, dtype=jnp.int32) <= cutoff)


def _statistic(x, params):
    # The statistic whose local bounds the adapter builds (gpuprivacy/sweeps/_adapters.py), on the data as the
    # mechanism sees them (clipped into [lower, upper]): U_0 = L_0 of those bounds (Durfee 2025, Sec. 3.1).
    from gpuprivacy.mechanisms.instance_optimal import median_rank, quantile_rank

    x = jnp.clip(x, params["lower"], params["upper"])
    n = x.shape[-1]
    if params["statistic"] == "clipped-mean":
        return jnp.mean(x)
    rank = median_rank(n) if params["statistic"] == "median" else quantile_rank(params["quantile"], n)
    return _sort(x)[rank - 1]


def _statistic_population(distribution, dist_params, params):
    method = {"median": "median", "quantile": "quantile"}.get(params["statistic"])
    return None if method is None else _population(method)(distribution, dist_params, params)


def _count(x, params):
    from gpuprivacy.sweeps._adapters import COUNT_CUTOFF, data_count

    return data_count(x, params.get("cutoff", COUNT_CUTOFF)).astype(jnp.float64)


def _row_mean(x, params):
    # The center the vector adapter releases around: the mean of the n/dim rows, clipped into the public box.
    rows = jnp.clip(x, params["lower"], params["upper"]).reshape(-1, params["dim"])
    return jnp.mean(rows, axis=0)


def _oracle(x, params):
    from gpuprivacy.sweeps._adapters import oracle_value

    return oracle_value(params["oracle"], x)


def _oracle_population(distribution, dist_params, params):
    from gpuprivacy.sweeps._adapters import parse_oracle

    name, args = parse_oracle(params["oracle"])
    if name in ("mean", "median"):
        return _population(name)(distribution, dist_params, params)
    if name == "quantile":
        return _population("quantile")(distribution, dist_params, {"quantile": args[0]})
    return None


def _named_statistic(x, params):
    # The nonprivate baseline's target (sweeps/_nonprivate.py): the statistic its ``statistic`` parameter names,
    # by the private mechanisms' own target functions (so the baseline's value is their target), or the mean.
    params = {k: v for k, v in params.items() if v is not None}
    statistic = params.get("statistic", "median")
    return jnp.mean(x) if statistic == "mean" else TARGETS[statistic].statistic(x, params)


def _named_statistic_population(distribution, dist_params, params):
    params = {k: v for k, v in params.items() if v is not None}
    statistic = params.get("statistic", "median")
    if statistic == "mean":
        return _population("mean")(distribution, dist_params, params)
    if statistic in ("median", "quantile", "oracle"):
        return TARGETS[statistic].population(distribution, dist_params, params)
    return None  # clipped-mean, identity, count, row-mean: no law states them


def _oracle_indicator(x, params):
    return (_oracle(x, params) >= params["cutoff"]).astype(jnp.int32)


class Target(NamedTuple):
    """A non-private statistic a release estimates.

    Attributes:
      statistic: ``(data, params) -> value`` in jnp (runs on the device, per trial).
      population: ``(distribution, dist_params, params) -> float | None``: the
        population value where the distribution states one (its median, mean,
        quantile), else None.
      kind: "real" (error metrics) or "index" (selection accuracy).
    """

    statistic: Callable
    population: Callable
    kind: str


def _population(method: str):
    def population(distribution, dist_params, params):
        fn = getattr(distribution, method, None)
        if fn is None:
            return None
        value = fn(params["quantile"], **dist_params) if method == "quantile" else fn(**dist_params)
        return None if value is None else float(value)
    return population


def _no_population(distribution, dist_params, params):
    return None


TARGETS: dict[str, Target] = {
    "median": Target(_median, _population("median"), "real"),
    "quantile": Target(_quantile, _population("quantile"), "real"),
    "clipped-mean": Target(_clipped_mean, _no_population, "real"),
    "argmax": Target(_argmax, _no_population, "index"),
    "identity": Target(_identity, _no_population, "real"),
    # The adapters' targets (gpuprivacy/sweeps/_adapters.py): stopping indices and answer vectors of the
    # AboveThreshold / sparse vector family, the statistic of local bounds, a count, the mean of rows, and
    # the named oracle statistic on the whole data.
    "first-above-threshold": Target(_first_above_threshold, _no_population, "index"),
    "stopping-time": Target(_stopping_time, _no_population, "index"),
    "threshold-answers": Target(_threshold_answers, _no_population, "index"),
    "statistic": Target(_statistic, _statistic_population, "real"),
    "count": Target(_count, _no_population, "real"),
    "row-mean": Target(_row_mean, _no_population, "real"),
    "oracle": Target(_oracle, _oracle_population, "real"),
    "oracle-indicator": Target(_oracle_indicator, _no_population, "index"),
    # The nonprivate baseline's: the real-valued statistic named by its ``statistic`` parameter.
    "named-statistic": Target(_named_statistic, _named_statistic_population, "real"),
}


class SweepableMechanism(NamedTuple):
    """A public mechanism as the study engine runs it (see the module docstring).

    Attributes:
      name, release, target, parameters, description: see :func:`make_sweepable`.
      exact: optional ``(data, params) -> {name: scalar}``, exact (not sampled) per-dataset
        quantities of the release's error distribution, e.g. its expected absolute error from
        a closed form; the engine evaluates it on every trial's data beside the release and
        keeps it in :attr:`CellTrials.exact <gpuprivacy.sweeps.CellTrials>`.
      batched: False for a mechanism that cannot be traced (host-side code): the engine then
        draws the data batched on the device and calls the mechanism once per trial.
      order_invariant: True when the release (for the same key) and the target depend on the data
        only through its sorted values, bitwise: the engine then sorts each dataset once for all
        such mechanisms of a block, and their own sorts of sorted data cost a linear check
        (tested for every built-in so marked: release(key, x) == release(key, sort(x))).
      error_has_no_mean: ``(params) -> bool``, True where the release's error has no expectation (heavy-tailed
        noise added unclamped): the mean metrics (mae, mse, bias and their s.e.) are then reported as undefined
        and the quantiles of |error| suggested.
      neighbours: the neighbour relation on a trial's data vector under which the guarantee holds, one of
        :data:`NEIGHBOUR_RELATIONS` (``"unstated"`` for a mechanism registered without one); every row's
        guarantee names it, so a reader can compare with a library that states another relation.
      private: False only for the ``nonprivate`` baseline (the exact statistic, no privacy guarantee): it is
        exempt from the auditor's registry and its rows carry no epsilon (tested: the only such sweepable).
        Not settable through :func:`make_sweepable` or :func:`~gpuprivacy.sweeps.register_mechanism`.
    """

    name: str
    release: Callable
    target: str
    parameters: dict
    description: str
    exact: Callable | None = None
    batched: bool = True
    order_invariant: bool = False
    neighbours: str = "unstated"
    error_has_no_mean: Callable | None = None
    private: bool = True


def _cauchy_noise(params) -> bool:
    """The smooth-sensitivity median's Cauchy noise is added unclamped: its error has no mean (NRS07, Sec. 3)."""
    return params.get("noise", "cauchy") == "cauchy"


# Mechanisms whose error has no expectation for some parameters: (params) -> bool.
_ERROR_HAS_NO_MEAN = {"smooth-sensitivity-median": _cauchy_noise}


# The parameters that set how private a release is. Target statistics never read them; paired comparisons
# require them equal.
PRIVACY_PARAMETERS = ("epsilon", "delta", "rho")

# The neighbour relations a row's guarantee names (the relation on one trial's data vector).
NEIGHBOUR_RELATIONS = {
    "swap": "two datasets of the same public size n that differ in one record (replace one)",
    "add-remove": "one dataset is the other plus one record",
    "add-remove-slot": "add/remove over public slots: one slot empty in one dataset (a replacement costs twice)",
    "bounded": "the data vector is the queries' answers (or the candidates' scores): each entry moves by at most "
               "the declared sensitivity",
    "swap-or-add-remove": "either: one record replaced, added or removed changes the count by at most 1",
    "unstated": "the mechanism was registered without stating its relation",
    "none": "not private: the release is the exact statistic (the nonprivate baseline), under no relation",
}
# Built-ins by target family: the statistics of a sample (medians, quantiles, clipped means, their adapters,
# the row mean of the vector mechanism) are private under swap with n public (Durfee 2025, Sec. 2; Tzamos et
# al. 2020, Sec. 2); the wrappers under add/remove (Linder et al. 2025, Sec. 2); the black-box estimators over
# public slots (Steinke & Steinke 2025, Sec. 2); the classic and selection mechanisms on their answer vectors.
_NEIGHBOURS_BY_TARGET = {"median": "swap", "quantile": "swap", "clipped-mean": "swap", "statistic": "swap",
                         "row-mean": "swap", "count": "swap-or-add-remove", "argmax": "bounded", "identity": "bounded",
                         "first-above-threshold": "bounded", "stopping-time": "bounded",
                         "threshold-answers": "bounded", "oracle": "add-remove", "oracle-indicator": "add-remove"}
_BLACKBOX = ("blackbox-estimate", "blackbox-estimate-zcdp", "blackbox-binary")


def kebab(name: str) -> str:
    return name.replace("_", "-")


def _check_real(name: str):
    def check(value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__}).")
        value = float(value)
        if math.isnan(value):
            raise ValueError(f"{name} must be a number, got NaN.")
        return value
    return check


def _check_bool(name: str):
    def check(value):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be true or false, got {value!r}.")
        return bool(value)
    return check


def _check_str(name: str):
    def check(value):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {value!r} ({type(value).__name__}).")
        return value
    return check


def _check_integer(name: str):
    return lambda value: check_int(name, value)


def _checker(name: str, annotation) -> Callable:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    base = text.replace(" ", "").replace("|None", "").replace("Optional[", "").rstrip("]")
    if base == "float":
        return _check_real(name)
    if base == "int":
        return _check_integer(name)
    if base == "bool":
        return _check_bool(name)
    if base == "str":
        return _check_str(name)
    raise TypeError(f"parameter {name!r} has type {text!r}, which a sweep config cannot hold (numbers, strings "
                    "and booleans only).")


def signature_parameters(fn: Callable, *, skip: frozenset = frozenset()) -> dict[str, SweepParameter]:
    """One :class:`SweepParameter` per keyword-only parameter of ``fn`` (typed by its annotation).

    Operational keywords (``progress``, ``chunk_size``, ...) and ``skip`` are left out: the engine
    decides them. A keyword without a default is required; ``None`` defaults stay ``None``.
    """
    out = {}
    for pname, p in inspect.signature(fn).parameters.items():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY or pname in _OPERATIONAL or pname in skip:
            continue
        check = _checker(pname, p.annotation)
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        if default is None:
            check = _allow_none(check)
        example = _example(pname, p.annotation, default)
        if isinstance(default, float) and not math.isfinite(default):
            default = UNSET  # JSON cannot hold it: left out of the cell, the function's default applies
        out[pname] = SweepParameter(check, default=default, example=example)
    return out


# A value to show in "for example" hints for parameters that have no default (or a None default), by name where
# the name says what a sensible value is, else by type: a message never ends in a placeholder.
_EXAMPLE_VALUES = {"epsilon": 1.0, "delta": 1e-6, "rho": 0.5, "beta": 0.05, "sensitivity": 1.0, "lower": 0.0,
                   "upper": 1.0, "threshold": 0.5, "quantile": 0.5, "oracle": "median", "statistic": "median",
                   "noise": "gumbel", "calibration": "analytic", "norm": "l2", "design": "auto",
                   "cutoff": 0.5, "dim": 2}
_EXAMPLE_BY_TYPE = {"float": 1.0, "int": 10, "bool": True, "str": "median"}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value + '"'
    return repr(value)


def _example(pname: str, annotation, default) -> str:
    """``pname = VALUE`` in TOML: the default where there is one, else a typical value of the parameter."""
    if default not in (REQUIRED, None):  # (TOML writes infinities as inf and -inf, as repr does)
        return f"{pname} = {_toml(default)}"
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    base = text.replace(" ", "").replace("|None", "").replace("Optional[", "").rstrip("]")
    value = _EXAMPLE_VALUES.get(pname, _EXAMPLE_BY_TYPE.get(base, 1.0))
    if base == "int" and not isinstance(value, int):
        value = _EXAMPLE_BY_TYPE["int"]
    return f"{pname} = {_toml(value)}"


def _allow_none(check):
    return lambda value: None if value is None else check(value)


def _data_positional(fn: Callable) -> bool:
    """Whether ``fn`` takes exactly ``(key, data)`` positionally (one data vector)."""
    positional = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2


def make_sweepable(release: Callable, *, target: str, name: str | None = None,
                   description: str = "", exact: Callable | None = None,
                   batched: bool = True, order_invariant: bool = False,
                   neighbours: str = "unstated") -> SweepableMechanism:
    """A :class:`SweepableMechanism` for ``release(key, data, **params) -> Release``.

    Args:
      release: the mechanism; its keyword-only parameters become the config's keys.
      target: what it estimates, one of :data:`TARGETS` (``"median"``, ``"quantile"``,
        ``"clipped-mean"``, ``"argmax"``, ``"identity"``).
      name: the config name; default the function's name in kebab case.
      description: one line for ``gpuprivacy sweep --list``; default the docstring's first line.
      exact: optional ``(data, params) -> {name: scalar}`` in jnp, exact per-dataset quantities of the
        release's error (see :class:`SweepableMechanism`).
      batched: False if ``release`` cannot be traced under ``jax.vmap`` (it then runs once per trial).
      order_invariant: True if ``release(key, x)`` equals ``release(key, sort(x))`` bitwise for every
        dataset (it sorts first, and never sums in data order) and the target is an order statistic;
        the engine then hands it sorted data (see :class:`SweepableMechanism`).
      neighbours: the neighbour relation of its guarantee on a trial's data, a key of
        :data:`NEIGHBOUR_RELATIONS`; named in every row's guarantee.
    """
    if neighbours not in NEIGHBOUR_RELATIONS:
        raise ValueError(f"neighbours must be one of {sorted(NEIGHBOUR_RELATIONS)}, got {neighbours!r}.")
    if not callable(release):
        raise TypeError(f"release must be a mechanism (key, data, *, params) -> Release, got {release!r}.")
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, got {target!r}.")
    if not _data_positional(release):
        raise TypeError(f"{getattr(release, '__name__', release)!r} must take (key, data) positionally and its "
                        "parameters as keywords, like gpuprivacy's mechanisms.")
    name = kebab(release.__name__) if name is None else name
    if not description:
        description = (inspect.getdoc(release) or "").split("\n", 1)[0]
    if exact is not None and not callable(exact):
        raise TypeError(f"exact must be a function (data, params) -> dict of scalars, got {exact!r}.")
    return SweepableMechanism(name, release, target, signature_parameters(release), description, exact,
                              bool(batched), bool(order_invariant), neighbours)


def _builtin_table():
    from gpuprivacy import mechanisms
    from gpuprivacy.mechanisms import instance_optimal, median

    targets = {
        "piecewise_laplace_median": "median", "inverse_sensitivity_median": "median",
        "laplace_median": "median", "smooth_sensitivity_median": "median",
        "exponential_mechanism_median": "median", "private_median": "median",
        "piecewise_laplace_quantile": "quantile", "inverse_sensitivity_quantile": "quantile",
        "piecewise_laplace_clipped_mean": "clipped-mean", "inverse_sensitivity_clipped_mean": "clipped-mean",
        "report_noisy_max": "argmax", "exponential_mechanism": "argmax", "permute_and_flip": "argmax",
        "laplace_report_noisy_max": "argmax", "gaussian_report_noisy_max": "argmax",
        "laplace_mechanism": "identity", "gaussian_mechanism": "identity", "gaussian_mechanism_zcdp": "identity",
    }
    from gpuprivacy.sweeps._exact import EXACT_ERRORS

    # Order statistics of sorted data, nothing summed in data order (tests/sweeps/test_cell_blocks.py checks
    # release(key, x) == release(key, sort(x)) for each): the engine may hand them sorted data.
    order_invariant = {name for name, target in targets.items() if target in ("median", "quantile")}
    out = {}
    for fname, target in targets.items():
        fn = None
        for namespace in (mechanisms, instance_optimal, median):
            fn = getattr(namespace, fname, None)
            if fn is not None:
                break
        out[kebab(fname)] = make_sweepable(fn, target=target, exact=EXACT_ERRORS.get(kebab(fname)),
                                           order_invariant=fname in order_invariant,
                                           neighbours=_NEIGHBOURS_BY_TARGET[target])._replace(
            error_has_no_mean=_ERROR_HAS_NO_MEAN.get(kebab(fname)))
    # The public mechanisms whose inputs are not one data vector, through their adapters (sweeps/_adapters.py).
    from gpuprivacy.sweeps._adapters import ADAPTERS

    for name, (release, target, batched) in ADAPTERS.items():
        out[name] = make_sweepable(release, target=target, name=name, batched=batched,
                                   neighbours="add-remove-slot" if name in _BLACKBOX else _NEIGHBOURS_BY_TARGET[target])
    # The baseline: the exact statistic, NOT private (private=False: no guarantee, not audited, no epsilon).
    from gpuprivacy.sweeps._nonprivate import make_nonprivate

    nonprivate = make_nonprivate(_named_statistic)
    out["nonprivate"] = make_sweepable(nonprivate, target="named-statistic", neighbours="none")._replace(
        description="NOT PRIVATE: the exact statistic of each trial's data (no noise, no guarantee), the baseline "
                    "that private errors are compared with", private=False)
    return out


# Public release functions the study engine cannot run yet, with the reason (listed by --list). Every public
# mechanism the auditor registry knows is sweepable now (tests/sweeps/test_every_mechanism_sweepable.py).
NOT_SWEEPABLE: dict[str, str] = {}


@functools.lru_cache(maxsize=1)
def builtin_sweepables() -> dict[str, SweepableMechanism]:
    """Every built-in sweepable mechanism, by config name."""
    return _builtin_table()
