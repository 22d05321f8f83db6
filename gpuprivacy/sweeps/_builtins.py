"""Built-in sweep mechanisms and datasets."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_epsilon, check_int, check_positive
from gpuprivacy.datasets import BIKES_DAILY_POPULATION, bikes_daily_queries, synthetic_uniform_queries
from gpuprivacy.sweeps import _median_routes  # noqa: F401  (registers the private median's route metrics)
from gpuprivacy.sweeps._registry import (
    SweepData,
    SweepParameter,
    register_sweep_dataset,
    register_sweep_mechanism,
)

RNM_NOISES = ("laplace", "gumbel", "exponential")

# Bounds the memory of one batched call: about 2**22 noise draws (32 MiB in float64).
_DRAWS_PER_CHUNK = 2**22


def _check_noise(value) -> str:
    if value not in RNM_NOISES:
        raise ValueError(f"noise must be one of {RNM_NOISES}, got {value!r}.")
    return value


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be true or false, got {value!r}.")
    return bool(value)


def _chunk_size(num_trials: int, num_queries: int) -> int:
    """Trials per batched call: a power of two >= 64 (few distinct shapes, so few compilations)."""
    limit = max(1, _DRAWS_PER_CHUNK // num_queries)
    bucket = max(64, 1 << (num_trials - 1).bit_length())
    return min(bucket, limit)


def report_noisy_max_cell(key: jax.Array, queries: jax.Array, params: dict, num_trials: int) -> dict[str, float]:
    """Sweep cell: ``num_trials`` independent runs of report noisy max, summarised.

    Runs ``gpuprivacy.mechanisms.report_noisy_max(trial_key, queries,
    epsilon=, sensitivity=, noise=, monotonic=)`` once per trial, batched
    with ``jax.vmap`` over trial keys ``jax.random.split(key, num_trials)``
    (in chunks of a power-of-two number of trials and at most about 2**22
    noise draws; the trial keys, hence the results, do not depend on the
    chunking). With :math:`i^*` the true argmax and :math:`\\hat\\imath_j`
    the selection in trial j, the metrics are the utility of Lebensold, Precup & Balle (arXiv 2402.06137v2,
    App. B.3, eq. (39)):

    .. math::

        \\mathrm{accuracy} = 1 - \\frac{1}{T}\\sum_{j=1}^{T}
            \\frac{q_{i^*} - q_{\\hat\\imath_j}}{q_{\\max}}

    with ``query_max`` as :math:`q_{\\max}` (1 for queries in [0, 1], as in
    the paper), its standard error (sample standard deviation of the
    per-trial errors over :math:`\\sqrt{T}`; null when T = 1), and the
    probability that the selected query attains the maximum value (ties
    count as correct) with its binomial standard error.

    Args:
      key: the cell's typed key.
      queries: ``float64[d]``.
      params: ``epsilon``, ``noise``, ``monotonic`` (mechanism parameters),
        ``sensitivity`` and ``query_max`` (from the dataset).
      num_trials: T >= 1.

    Returns:
      ``{"accuracy", "accuracy_se", "prob_true_argmax", "prob_true_argmax_se",
      "mean_selected_query"}`` as floats.
    """
    # Imported here so that the sweeps package imports without the mechanisms package.
    from gpuprivacy.mechanisms import report_noisy_max

    # Concrete parameters, exactly as a curator would call the mechanism (its noise scale is
    # rounded up in Python); its jitted kernel takes the scale as an array, so one compilation
    # per (noise, chunk shape) serves a whole epsilon grid.
    select = functools.partial(report_noisy_max, epsilon=params["epsilon"], sensitivity=params["sensitivity"],
                               noise=params["noise"], monotonic=params["monotonic"])
    batched = jax.vmap(lambda trial_key: select(trial_key, queries).value)
    trial_keys = jax.random.split(key, num_trials)
    chunk = _chunk_size(num_trials, int(queries.shape[0]))
    if num_trials % chunk:
        # Pad with repeats of the first keys so that every call has the chunk's shape; the
        # padded trials are dropped below. Trial i always uses trial_keys[i].
        padding = chunk - num_trials % chunk
        trial_keys = jnp.concatenate([trial_keys, jnp.resize(trial_keys, (padding,))])
    selected = np.concatenate([np.asarray(batched(trial_keys[start:start + chunk]))
                               for start in range(0, trial_keys.shape[0], chunk)])[:num_trials]

    q = np.asarray(queries, dtype=np.float64)
    chosen = q[selected]
    errors = (q.max() - chosen) / params["query_max"]
    hits = chosen == q.max()
    p = float(hits.mean())
    return {
        "accuracy": 1.0 - float(errors.mean()),
        "accuracy_se": float(errors.std(ddof=1)) / math.sqrt(num_trials) if num_trials > 1 else math.nan,
        "prob_true_argmax": p,
        "prob_true_argmax_se": math.sqrt(p * (1.0 - p) / num_trials),
        "mean_selected_query": float(chosen.mean()),
    }


def _bikes_daily(params: dict) -> SweepData:
    return SweepData(bikes_daily_queries(params["d"]), sensitivity=1.0 / BIKES_DAILY_POPULATION, query_max=1.0)


def _synthetic_uniform(params: dict) -> SweepData:
    return SweepData(synthetic_uniform_queries(params["d"], seed=params["seed"]),
                     sensitivity=1.0 / params["population"], query_max=1.0)


def register_builtins() -> None:
    register_sweep_mechanism(
        "report-noisy-max", report_noisy_max_cell, replace=True,
        description="report noisy max (noise laplace / gumbel = exponential mechanism / exponential = "
                    "permute-and-flip); metrics: accuracy eq. (39), P(true argmax)",
        parameters={
            "epsilon": SweepParameter(check_epsilon, example="epsilon = [0.01, 0.1, 1.0]"),
            "noise": SweepParameter(_check_noise, default="gumbel",
                                    example='noise = ["laplace", "gumbel", "exponential"]'),
            "monotonic": SweepParameter(functools.partial(_check_bool, "monotonic"), default=False,
                                        example="monotonic = false"),
        })
    register_sweep_dataset(
        "bikes-daily", _bikes_daily, replace=True,
        description="UCI Bike Sharing daily registered users / 6946, first d days; sensitivity 1/6946",
        parameters={"d": SweepParameter(lambda v: check_int("d", v, minimum=1, maximum=731), default=731,
                                        example="d = [90, 365]")})
    register_sweep_dataset(
        "synthetic-uniform", _synthetic_uniform, replace=True,
        description="d i.i.d. Uniform[0, 1) queries (NumPy PCG64 seed); sensitivity 1/population",
        parameters={
            "d": SweepParameter(lambda v: check_int("d", v, minimum=1), example="d = [10, 100]"),
            "seed": SweepParameter(lambda v: check_int("seed", v, minimum=0), default=0, example="seed = 0"),
            "population": SweepParameter(lambda v: check_positive("population", v), default=1000.0,
                                         example="population = 1000"),
        })


register_builtins()
