"""Metrics of a sweep cell, from its per-trial results (:class:`~gpuprivacy.sweeps.CellTrials`).

Built-in metrics (always computed; null in JSON where they do not apply):

* ``released``: the fraction of trials that released (the rest were withheld:
  fail closed, docs/fail_closed.md). Error metrics are over released trials.
* real-valued targets (median, quantile, mean, identity), with
  :math:`e_j = \\hat\\theta_j - \\theta(x_j)` the error of trial j against the
  non-private statistic of its own data (per trial, averaged over coordinates
  for a vector): ``mae`` (mean :math:`|e_j|`) and ``mae_se`` (its standard
  error, sample s.d. over :math:`\\sqrt{T}`), ``mse`` and ``mse_se``,
  ``abs_error_q50``, ``abs_error_q90``, ``abs_error_q99`` (empirical quantiles
  of :math:`|e_j|`), and the same against the population value where the
  distribution states one (``population_mae``, ``population_mae_se``,
  ``population_mse``, ``population_mse_se``, ``bias`` with ``bias_se``, and
  ``population_abs_error_q50``, ``population_abs_error_q90``,
  ``population_abs_error_q99``: empirical quantiles of
  :math:`|\\hat\\theta_j - \\theta|` over the released trials, with
  :math:`\\theta` the population value; null without one);
  ``coverage`` is the fraction of trials with :math:`|e_j| \\le r` for the
  config's ``coverage_radius = r`` (null without one);
* exact errors, with ``exact = true`` in the config, where the mechanism states them (its ``exact`` function, e.g.
  the closed forms of :mod:`gpuprivacy.sweeps._exact`; null otherwise): with
  :math:`a_j = E|M(x_j) - f(x_j)|` the exact expected absolute error of trial
  j's dataset over the mechanism's randomness (Durfee 2025, Thm 2 compares
  these), ``expected_abs_error`` is the mean of :math:`a_j` over the released
  trials, the average over datasets (not a Monte Carlo estimate of the
  noise), and ``expected_abs_error_se`` its standard error over datasets (0
  for one fixed dataset; null for a single trial); ``median_abs_error_exact`` is the mean over datasets
  of the exact median of :math:`|M(x_j) - f(x_j)|` (e.g. for Cauchy noise,
  which has no mean);
* index targets (selections): ``selection_accuracy`` (the fraction of trials
  that select the true argmax) and ``selection_accuracy_se`` (binomial);
* the guarantee as the release states it: ``epsilon``, ``delta`` and ``rho``
  (null where the guarantee has no such field);
* ``time_per_trial_s`` (compilation excluded) and ``compile_s``.

Users add metrics with :func:`register_metric`; a config lists them in
``metrics = [...]``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

_USER_METRICS: dict[str, tuple[Callable, str]] = {}


def register_metric(name: str, fn: Callable, *, description: str = "", replace: bool = False) -> None:
    """Adds a metric ``fn(trials, params) -> float`` that configs may list in ``metrics = [...]``.

    ``trials`` is the cell's :class:`~gpuprivacy.sweeps.CellTrials` (``values``, ``targets``,
    ``valid``, ``population``, ``guarantee``...) and ``params`` its mechanism parameters.

    Examples:
      >>> import numpy as np
      >>> register_metric("doc-max-abs-error",
      ...                 lambda t, p: float(np.max(np.abs(t.values - t.targets))), replace=True)
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"a metric name must be a non-empty string without surrounding spaces, got {name!r}.")
    if not callable(fn):
        raise TypeError(f"metric {name!r} must be a function (trials, params) -> float, got {fn!r}.")
    if name in BUILTIN_METRICS:
        raise ValueError(f"{name!r} is a built-in metric; pick another name.")
    if name in _USER_METRICS and not replace:
        raise ValueError(f"a metric named {name!r} is already registered. Pick another name or pass replace=True.")
    _USER_METRICS[name] = (fn, description)


def list_metrics() -> dict[str, str]:
    """Every metric, name -> description (built-ins first)."""
    return {**BUILTIN_METRICS, **{k: v[1] for k, v in sorted(_USER_METRICS.items())}}


def user_metric(name: str):
    return _USER_METRICS.get(name)


BUILTIN_METRICS = {
    "released": "fraction of trials that released (others withheld, fail closed)",
    "mae": "mean |release - statistic of the trial's data|", "mae_se": "standard error of mae",
    "mse": "mean squared error against the trial's statistic", "mse_se": "standard error of mse",
    "abs_error_q50": "median |error|", "abs_error_q90": "90th percentile |error|",
    "abs_error_q99": "99th percentile |error|",
    "population_mae": "mean |release - population value|", "population_mae_se": "its standard error",
    "population_mse": "mean squared error against the population value", "population_mse_se": "its standard error",
    "bias": "mean (release - population value)", "bias_se": "its standard error",
    "population_abs_error_q50": "median |release - population value|",
    "population_abs_error_q90": "90th percentile |release - population value|",
    "population_abs_error_q99": "99th percentile |release - population value|",
    "coverage": "fraction of trials with |error| <= coverage_radius",
    "expected_abs_error": "exact E|error| per dataset (closed form), mean over the released trials' datasets",
    "expected_abs_error_se": "standard error of expected_abs_error over datasets",
    "median_abs_error_exact": "exact median |error| per dataset, mean over the released trials' datasets",
    "selection_accuracy": "fraction of trials selecting the true argmax", "selection_accuracy_se": "binomial s.e.",
    "epsilon": "the release's guarantee: epsilon", "delta": "the release's guarantee: delta",
    "rho": "the release's guarantee: rho (zCDP)",
    "time_per_trial_s": "seconds per trial (compilation excluded)", "compile_s": "seconds compiling",
}


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    if x.size == 0:
        return math.nan, math.nan
    mean = float(np.mean(x))
    se = float(np.std(x, ddof=1)) / math.sqrt(x.size) if x.size > 1 else math.nan
    return mean, se


def _released(values, ok: np.ndarray) -> np.ndarray:
    return np.asarray(values, np.float64).reshape(ok.shape[0], -1).mean(axis=1)[ok]


# The metrics that are expectations of the error (or of its square): undefined when the error has no mean.
MEAN_METRICS = ("mae", "mae_se", "mse", "mse_se", "population_mae", "population_mae_se", "population_mse",
                "population_mse_se", "bias", "bias_se")


def cell_metrics(trials, params: dict, *, target_kind: str, coverage_radius: float | None = None,
                 extra: tuple = (), error_has_no_mean: bool = False) -> dict[str, float]:
    """The built-in metrics of one cell (see the module docstring), plus the user metrics in ``extra``.

    ``error_has_no_mean``: the release's error has no expectation (Cauchy noise, unclamped): the means of
    :data:`MEAN_METRICS` are left NaN (reported as undefined), since a sample mean of such an error estimates
    nothing and its standard error is no confidence band; the quantiles of ``|error|`` stay.
    """
    num = trials.valid.shape[0]
    ok = trials.valid.reshape(num)
    out = dict.fromkeys(BUILTIN_METRICS, math.nan)
    out["released"] = float(ok.mean()) if num else math.nan
    values = np.asarray(trials.values).reshape(num, -1)[ok]
    targets = np.asarray(trials.targets).reshape(num, -1)[ok]
    if target_kind == "index":
        hits = (values == targets).all(axis=1).astype(np.float64)
        out["selection_accuracy"], _ = _mean_se(hits)
        p = out["selection_accuracy"]
        out["selection_accuracy_se"] = math.sqrt(p * (1 - p) / hits.size) if hits.size else math.nan
    else:
        values, targets = values.astype(np.float64), targets.astype(np.float64)
        err = values - targets
        abs_err, sq_err = np.abs(err).mean(axis=1), (err**2).mean(axis=1)
        out["mae"], out["mae_se"] = _mean_se(abs_err)
        out["mse"], out["mse_se"] = _mean_se(sq_err)
        if abs_err.size:
            out["abs_error_q50"], out["abs_error_q90"], out["abs_error_q99"] = (
                float(q) for q in np.quantile(abs_err, [0.5, 0.9, 0.99]))
        if coverage_radius is not None and abs_err.size:
            out["coverage"] = float(np.mean(abs_err <= coverage_radius))
        if trials.population is not None:
            pop_err = values - trials.population
            out["population_mae"], out["population_mae_se"] = _mean_se(np.abs(pop_err).mean(axis=1))
            out["population_mse"], out["population_mse_se"] = _mean_se((pop_err**2).mean(axis=1))
            out["bias"], out["bias_se"] = _mean_se(pop_err.mean(axis=1))
            pop_abs_err = np.abs(pop_err).mean(axis=1)
            if pop_abs_err.size:
                (out["population_abs_error_q50"], out["population_abs_error_q90"],
                 out["population_abs_error_q99"]) = (float(q) for q in np.quantile(pop_abs_err, [0.5, 0.9, 0.99]))
    # Exact per-dataset quantities: means over the datasets of released trials (withheld ones have no error).
    exact = getattr(trials, "exact", None) or {}
    if "expected_abs_error" in exact:
        out["expected_abs_error"], out["expected_abs_error_se"] = _mean_se(_released(exact["expected_abs_error"], ok))
    if "median_abs_error" in exact:
        out["median_abs_error_exact"], _ = _mean_se(_released(exact["median_abs_error"], ok))
    for field in ("epsilon", "delta", "rho"):
        value = getattr(trials.guarantee, field, None)
        if value is not None:
            out[field] = float(value)
    if trials.guarantee is not None and type(trials.guarantee).__name__ == "PureDP":
        out["delta"] = 0.0
    if error_has_no_mean:
        out.update(dict.fromkeys(MEAN_METRICS, math.nan))
    out["time_per_trial_s"] = trials.wall_s / num if num else math.nan
    out["compile_s"] = trials.compile_s
    for name in extra:
        fn = _USER_METRICS[name][0]
        out[name] = float(fn(trials, params))
    return out
