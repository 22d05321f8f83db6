"""Adapters: the public mechanisms whose inputs are not one data vector, as sweepable releases.

Each adapter is a release ``(key, data, *, params) -> Release`` whose keyword-only, annotated
parameters are config values (numbers, strings, booleans). It maps one trial's data vector to the
public mechanism's inputs and calls that mechanism itself, with the trial's mechanism key, so what a
study measures is what a curator gets; nothing is re-implemented. The mappings:

* stopping-index mechanisms (AboveThreshold and the sparse vector technique, Lyu, Su & Li 2017,
  Alg. 1; Gaussian above threshold and sparse vector, Lebensold, Precup & Balle 2024): the data
  vector *is* the query stream, so the public function is swept as it is; targets
  ``first-above-threshold``, ``stopping-time`` and ``threshold-answers`` (selection accuracy);
* piecewise Laplace and inverse sensitivity on local bounds (Durfee 2025, Def 3.1, Def 4.1): the
  bounds come from the data by the public closed forms (``statistic = "median" | "quantile" |
  "clipped-mean"``); target ``statistic``;
* their count forms (Durfee 2025, Sec. 4.1): the count is the number of values ``>= cutoff``
  (the ones of a 0/1 vector); target ``count``;
* the approximate piecewise Laplace in R^d (Durfee 2025, Sec. 5.1): the data are ``n/dim`` rows of
  ``dim`` coordinates in the public box ``[lower, upper]^dim``, the center is their mean and every
  radius is the mean's global sensitivity (valid for Def 5.1 by Sec. 5.2); target ``row-mean``;
* the privacy wrappers of Linder, Raskhodnikova, Smith & Steinke 2025 and the black-box estimators
  of Steinke & Steinke 2025: the oracle is named by a string (:data:`ORACLE_STATISTICS`), a finite
  grid by its ends and size, a covering design by its construction; target ``oracle`` (the named
  statistic of the whole trial's data). These run host-side code (the oracle engine), so they are
  registered with ``batched=False``: the engine draws the data on the device and calls them once
  per trial.
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np

from gpuprivacy import designs
from gpuprivacy import oracle as _oracles  # aliased: "oracle" is the adapters' config parameter
from gpuprivacy._checks import check_int, check_rows_in_domain, is_tracer
from gpuprivacy.mechanisms import blackbox, instance_optimal, wrappers
from gpuprivacy.mechanisms import (
    above_threshold,
    gaussian_above_threshold,
    gaussian_sparse_vector,
    gaussian_sparse_vector_whitehouse,
    sparse_vector,
)
from gpuprivacy.mechanisms import Release

# --------------------------------------------------------------------------------------------------
# Oracle statistics by name.

# name -> (library oracle or factory, number of ':'-separated real arguments, the arguments' meaning).
_ORACLES = {
    "count": (_oracles.count, 0, ""),
    "sum": (_oracles.sum_, 0, ""),
    "mean": (_oracles.mean, 0, ""),
    "variance": (_oracles.variance, 0, ""),
    "median": (_oracles.median, 0, ""),
    "quantile": (_oracles.quantile, 1, "Q in [0, 1]"),
    "trimmed-mean": (_oracles.trimmed_mean, 1, "P in [0, 0.5), the share cut from each end"),
    "clipped-mean": (_oracles.clipped_mean, 2, "LOWER < UPPER"),
}
ORACLE_STATISTICS = ("count", "sum", "mean", "variance", "median", "quantile:Q", "trimmed-mean:P",
                     "clipped-mean:LOWER:UPPER")
"""The oracle names a config may give (``oracle = "median"``, ``oracle = "quantile:0.9"``)."""

_ORACLE_HELP = ("choose one of " + ", ".join(ORACLE_STATISTICS)
                + ' (arguments after colons, e.g. oracle = "quantile:0.9" or "clipped-mean:0:1")')


def parse_oracle(spec) -> tuple[str, tuple[float, ...]]:
    """``(name, arguments)`` of an oracle spec such as ``"quantile:0.9"``; a clear error for anything else."""
    if not isinstance(spec, str):
        raise TypeError(f"oracle must be a string naming a statistic, got {spec!r}; {_ORACLE_HELP}.")
    name, *args = spec.split(":")
    if name not in _ORACLES:
        raise ValueError(f"oracle {spec!r} is not a known statistic; {_ORACLE_HELP}.")
    _, arity, meaning = _ORACLES[name]
    if len(args) != arity:
        wanted = f"{arity} argument(s) ({meaning})" if arity else "no arguments"
        raise ValueError(f"oracle {spec!r}: {name!r} takes {wanted} after colons, got {len(args)}; {_ORACLE_HELP}.")
    values = []
    for arg in args:
        try:
            value = float(arg)
        except ValueError:
            raise ValueError(f"oracle {spec!r}: argument {arg!r} is not a number ({meaning}).") from None
        if not math.isfinite(value):
            raise ValueError(f"oracle {spec!r}: argument {arg!r} must be finite ({meaning}).")
        values.append(value)
    return name, tuple(values)


@functools.lru_cache(maxsize=None)
def oracle_function(spec: str):
    """The package's own oracle ``f(rows, valid)`` named by ``spec`` (see :data:`ORACLE_STATISTICS`).

    Cached, so one name gives one function object and the oracle engine compiles it once. The
    factories' own checks (e.g. a quantile outside [0, 1]) raise with the spec named.
    """
    name, args = parse_oracle(spec)
    target = _ORACLES[name][0]
    if not args:
        return target
    try:
        return target(*args)
    except (TypeError, ValueError) as err:
        raise ValueError(f"oracle {spec!r}: {err}") from None


def oracle_value(spec: str, x):
    """The statistic ``spec`` of the whole 1-D dataset ``x``: the oracle itself on every row.

    Rows are sorted first, as the oracle engine hands them to an oracle (order-statistic oracles
    read, not sort, their block).
    """
    rows = jnp.sort(jnp.asarray(x, jnp.float64))
    return jnp.asarray(oracle_function(spec)(rows, jnp.ones(rows.shape, bool)), jnp.float64)


@functools.lru_cache(maxsize=None)
def _indicator_oracle(spec: str, cutoff: float):
    """``1[f(rows) >= cutoff]`` for the named statistic f (NaN stays NaN: a nonresponse)."""
    fn = oracle_function(spec)

    def indicator(rows, valid):
        value = jnp.asarray(fn(rows, valid), jnp.float64)
        return jnp.where(jnp.isnan(value), jnp.nan, (value >= cutoff).astype(jnp.float64))
    return _oracles.trusted(indicator)  # the package's own statistic, thresholded: runs in-process


def _check_real_param(name: str, value) -> float:
    """A finite concrete value; a tracer passes (the engine traces only values the mechanism accepts traced)."""
    if is_tracer(value):
        return value
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    return value


def _grid(grid_lower: float, grid_upper: float, grid_size: int) -> np.ndarray:
    """The public finite range Y of Linder et al. 2025, Thm 3.1: ``linspace(grid_lower, grid_upper, grid_size)``."""
    if isinstance(grid_size, bool) or not isinstance(grid_size, (int, np.integer)) or grid_size < 2:
        raise ValueError(f"grid_size must be an integer >= 2 (the number of points of the public output grid "
                         f"linspace(grid_lower, grid_upper, grid_size)), got {grid_size!r}; e.g. grid_size = 11.")
    lower, upper = _check_real_param("grid_lower", grid_lower), _check_real_param("grid_upper", grid_upper)
    if not lower < upper:
        raise ValueError(f"grid_lower must be < grid_upper, got grid_lower={grid_lower!r}, grid_upper={grid_upper!r}; "
                         "they are the ends of the public output grid.")
    return np.linspace(lower, upper, int(grid_size))


# --------------------------------------------------------------------------------------------------
# Piecewise Laplace and inverse sensitivity on local bounds (Durfee 2025).

STATISTICS = ("median", "quantile", "clipped-mean")


def local_bounds(data, *, statistic: str, lower: float, upper: float, quantile: float | None, clip: bool,
                 max_pieces: int | None) -> instance_optimal.LocalBounds:
    """The exact local bounds of ``statistic`` on ``data`` by the public closed forms (Durfee 2025, Sec. 3.1)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {list(STATISTICS)}, got {statistic!r}.")
    if statistic == "quantile":
        if quantile is None:
            raise ValueError('statistic = "quantile" needs quantile (in [0, 1]), e.g. quantile = 0.9.')
        return instance_optimal.quantile_bounds(data, lower=lower, upper=upper, quantile=quantile, clip=clip,
                                                max_pieces=max_pieces)
    if quantile is not None:
        raise ValueError(f"quantile={quantile!r} applies to statistic = \"quantile\" only, not {statistic!r}; "
                         "remove it.")
    if statistic == "median":
        return instance_optimal.median_bounds(data, lower=lower, upper=upper, clip=clip, max_pieces=max_pieces)
    if max_pieces is not None:
        raise ValueError(f"max_pieces={max_pieces!r} applies to the order statistics (median, quantile), not "
                         "clipped-mean, whose bounds are exact at every level; remove it.")
    return instance_optimal.clipped_mean_bounds(data, lower=lower, upper=upper, clip=clip)


def piecewise_laplace(key, data, *, statistic: str, epsilon: float, lower: float, upper: float,
                      quantile: float | None = None, clip: bool = False, max_pieces: int | None = None,
                      smoothness: float = 0.0) -> Release:
    """Piecewise Laplace on the local bounds of the data's median, quantile or clipped mean (Durfee 2025, Def 3.1)."""
    bounds = local_bounds(data, statistic=statistic, lower=lower, upper=upper, quantile=quantile, clip=clip,
                          max_pieces=max_pieces)
    return instance_optimal.piecewise_laplace(key, bounds, epsilon=epsilon, smoothness=smoothness)


def inverse_sensitivity(key, data, *, statistic: str, epsilon: float, lower: float, upper: float,
                        quantile: float | None = None, clip: bool = False, max_pieces: int | None = None,
                        smoothness: float = 0.0) -> Release:
    """Inverse sensitivity on the local bounds of the data's median, quantile or clipped mean (Durfee 2025, Def 4.1)."""
    bounds = local_bounds(data, statistic=statistic, lower=lower, upper=upper, quantile=quantile, clip=clip,
                          max_pieces=max_pieces)
    return instance_optimal.inverse_sensitivity(key, bounds, epsilon=epsilon, smoothness=smoothness)


COUNT_CUTOFF = 0.5  # the ones of a 0/1 vector; shared with the "count" target


def data_count(data, cutoff):
    """The number of values ``>= cutoff`` (int64; the count of ones of a 0/1 vector at the default 0.5)."""
    return jnp.sum(jnp.asarray(data, jnp.float64) >= cutoff, dtype=jnp.int64)


def piecewise_laplace_count(key, data, *, epsilon: float, cutoff: float = COUNT_CUTOFF) -> Release:
    """Piecewise Laplace on the count of values >= cutoff, add/remove neighbours (Durfee 2025, Sec. 4.1, Thm 1)."""
    return instance_optimal.piecewise_laplace_count(key, data_count(data, _check_real_param("cutoff", cutoff)),
                                                    epsilon=epsilon)


def inverse_sensitivity_count(key, data, *, epsilon: float, cutoff: float = COUNT_CUTOFF) -> Release:
    """Inverse sensitivity on the count of values >= cutoff, add/remove neighbours (Durfee 2025, Def 4.1)."""
    return instance_optimal.inverse_sensitivity_count(key, data_count(data, _check_real_param("cutoff", cutoff)),
                                                      epsilon=epsilon)


def row_mean(data, *, dim: int, lower: float, upper: float, clip: bool):
    """``(mean of the n/dim rows of dim coordinates, their count)``, rows in the box ``[lower, upper]^dim``."""
    dim = check_int("dim", dim, minimum=1)
    n = data.shape[-1]
    if n % dim:
        raise ValueError(f"dim={dim} must divide the dataset size n={n} (the data are n/dim rows of dim "
                         "coordinates); pick n a multiple of dim.")
    rows = jnp.asarray(check_rows_in_domain(data, lower, upper, clip), jnp.float64).reshape(n // dim, dim)
    return jnp.mean(rows, axis=0), n // dim


def piecewise_laplace_vector(key, data, *, epsilon: float, dim: int, lower: float, upper: float, norm: str = "l2",
                             clip: bool = False) -> Release:
    """Approximate piecewise Laplace in R^dim on the mean of the data's rows (Durfee 2025, Sec. 5.1, Lemma 5.2).

    The rows are in the public box ``[lower, upper]^dim``, so swapping one of the ``m = n/dim`` rows
    moves the mean by at most ``(upper - lower) dim^(1/p) / m`` in the l_p norm: that is the global
    sensitivity, and every radius equals it (Def 5.1 holds at once; Sec. 5.2). For data-dependent
    radii call :func:`~gpuprivacy.mechanisms.instance_optimal.piecewise_laplace_vector` directly.
    """
    # Finite: the global sensitivity (upper - lower) dim^(1/p) / m is the mechanism's noise scale.
    lower, upper = _check_real_param("lower", lower), _check_real_param("upper", upper)
    if not is_tracer(lower) and not is_tracer(upper) and not lower < upper:
        raise ValueError(f"lower must be < upper, got lower={lower!r}, upper={upper!r}; they are the public box "
                         "every row lies in.")
    if norm not in ("l1", "l2"):
        raise ValueError(f'norm must be "l1" or "l2", got {norm!r}.')
    center, rows = row_mean(data, dim=dim, lower=lower, upper=upper, clip=clip)
    sensitivity = (upper - lower) * (dim if norm == "l1" else math.sqrt(dim)) / rows
    radii = jnp.full((1,), sensitivity, jnp.float64) if is_tracer(sensitivity) else np.array([sensitivity])
    return instance_optimal.piecewise_laplace_vector(key, center, radii, epsilon=epsilon,
                                                     global_sensitivity=sensitivity, norm=norm)


# --------------------------------------------------------------------------------------------------
# Privacy wrappers of untrusted black-box functions (Linder, Raskhodnikova, Smith & Steinke 2025).

def sens_o_matic(key, data, *, oracle: str, grid_lower: float, grid_upper: float, grid_size: int, epsilon: float,
                 beta: float, max_depth: int | None = None) -> Release:
    """Sens-o-Matic on a named oracle and a linspace grid (Linder et al. 2025, Algorithm 1, Thm 3.1)."""
    return wrappers.sens_o_matic(key, data, oracle_fn=oracle_function(oracle),
                                 grid=_grid(grid_lower, grid_upper, grid_size), epsilon=epsilon, beta=beta,
                                 max_depth=max_depth)


def shifted_inverse(key, data, *, oracle: str, grid_lower: float, grid_upper: float, grid_size: int, epsilon: float,
                    beta: float, depth: int | None = None) -> Release:
    """Shifted Inverse on a named oracle and a linspace grid (Linder et al. 2025, Lemma 3.2; private for monotone f)."""
    return wrappers.shifted_inverse(key, data, oracle_fn=oracle_function(oracle),
                                    grid=_grid(grid_lower, grid_upper, grid_size), epsilon=epsilon, beta=beta,
                                    depth=depth)


def cummings_durfee(key, data, *, oracle: str, c: float, epsilon: float) -> Release:
    """Cummings-Durfee Lipschitz extension plus Laplace on a named oracle (Linder et al. 2025, Table 2)."""
    return wrappers.cummings_durfee(key, data, oracle_fn=oracle_function(oracle), c=c, epsilon=epsilon)


def double_monotonization(key, data, *, oracle: str, r: float, c: float, epsilon: float, beta: float,
                          max_depth: int | None = None) -> Release:
    """Double-Monotonization on a named oracle (Linder et al. 2025, Algorithm 5, Thm D.1)."""
    return wrappers.double_monotonization(key, data, oracle_fn=oracle_function(oracle), r=r, c=c, epsilon=epsilon,
                                          beta=beta, max_depth=max_depth)


def small_diameter_subset_extension(key, data, *, oracle: str, r: float, c: float, epsilon: float) -> Release:
    """Small-Diameter Subset Extension on a named oracle (Linder et al. 2025, Algorithm 4, Thm C.1)."""
    return wrappers.small_diameter_subset_extension(key, data, oracle_fn=oracle_function(oracle), r=r, c=c,
                                                    epsilon=epsilon)


def subset_extension(key, data, *, oracle: str, c: float, epsilon: float, delta: float) -> Release:
    """Subset-Extension on a named oracle (Linder et al. 2025, Algorithm 2, Thm 4.1)."""
    return wrappers.subset_extension(key, data, oracle_fn=oracle_function(oracle), c=c, epsilon=epsilon, delta=delta)


def tahoe(key, data, *, oracle: str, c: float, epsilon: float, delta: float) -> Release:
    """Modified TAHOE on a named oracle (Kohli & Laskowski 2023; Linder et al. 2025, Algorithm 3)."""
    return wrappers.tahoe(key, data, oracle_fn=oracle_function(oracle), c=c, epsilon=epsilon, delta=delta)


def white_box_laplace(key, data, *, oracle: str, sensitivity: float, epsilon: float) -> Release:
    """White-box Laplace on a named oracle with a claimed sensitivity (Linder et al. 2025, Fact 2.1)."""
    return wrappers.white_box_laplace(key, data, oracle_fn=oracle_function(oracle), sensitivity=sensitivity,
                                      epsilon=epsilon)


# --------------------------------------------------------------------------------------------------
# Black-box estimation over covering designs (Steinke & Steinke 2025).

DESIGNS = ("sample-and-aggregate", "block", "planned")


@functools.lru_cache(maxsize=64)
def _design(construction: str, n: int, mechanism: str, t: int, kept_blocks, budget, epsilon, rho, num_outputs: int,
            beta: float):
    # Cached: the estimators verify a design's covering once per design object, so every trial of a
    # cell reuses one verified design (the construction is public and data-independent).
    if construction == "sample-and-aggregate":
        return designs.sample_and_aggregate(n, t)
    if construction == "block":
        return designs.block_design(n, t, kept_blocks)
    return designs.plan_design(n, budget=budget, mechanism=mechanism, epsilon=epsilon, rho=rho,
                               num_outputs=num_outputs, beta=beta).build()


def covering_design(n: int, *, design: str, mechanism: str, epsilon: float | None = None, rho: float | None = None,
                    num_outputs: int = 2, beta: float, kept_blocks: int | None, budget: int | None):
    """The covering design a config names, for n rows and the strength t the mechanism needs (Steinke & Steinke 2025).

    ``"sample-and-aggregate"``: t + 1 disjoint blocks; ``"block"``: every union of ``kept_blocks`` of the
    t + kept_blocks blocks (Sec. 3.4, Table 6.1); ``"planned"``: :func:`gpuprivacy.designs.plan_design` within
    ``budget`` oracle calls. t is :func:`gpuprivacy.designs.required_t` of the mechanism's parameters.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {list(DESIGNS)}, got {design!r}.")
    if design == "block":
        if kept_blocks is None:
            raise ValueError('design = "block" needs kept_blocks (an integer >= 1, the c of Table 6.1), e.g. '
                             "kept_blocks = 2.")
        kept_blocks = check_int("kept_blocks", kept_blocks, minimum=1)
    elif kept_blocks is not None:
        raise ValueError(f'kept_blocks={kept_blocks!r} applies to design = "block" only, not {design!r}; remove it.')
    if design == "planned":
        if budget is None:
            raise ValueError('design = "planned" needs budget (the most oracle calls allowed), e.g. budget = 300.')
        budget = check_int("budget", budget, minimum=1)
    elif budget is not None:
        raise ValueError(f'budget={budget!r} applies to design = "planned" only, not {design!r}; remove it.')
    t, _ = designs.required_t(mechanism, epsilon=epsilon, rho=rho, num_outputs=num_outputs, beta=beta)
    return _design(design, int(n), mechanism, t, kept_blocks, budget, epsilon, rho, int(num_outputs), float(beta))


def blackbox_estimate(key, data, *, oracle: str, epsilon: float, lower: float, upper: float, resolution: float,
                      beta: float = 0.01, design: str = "sample-and-aggregate", kept_blocks: int | None = None,
                      budget: int | None = None) -> Release:
    """Pure-DP black-box estimate of a named oracle over a covering design (Steinke & Steinke 2025, Thm 4.4)."""
    fn = oracle_function(oracle)
    num_outputs = blackbox.output_grid(lower=lower, upper=upper, resolution=resolution).size
    family = covering_design(data.shape[0], design=design, mechanism="pure", epsilon=epsilon,
                             num_outputs=num_outputs, beta=beta, kept_blocks=kept_blocks, budget=budget)
    return blackbox.blackbox_estimate(key, data, fn, design=family, epsilon=epsilon, lower=lower, upper=upper,
                                      resolution=resolution, beta=beta)


def blackbox_estimate_zcdp(key, data, *, oracle: str, rho: float, lower: float, upper: float, resolution: float,
                           beta: float = 0.01, design: str = "sample-and-aggregate", kept_blocks: int | None = None,
                           budget: int | None = None) -> Release:
    """zCDP black-box estimate of a named oracle over a covering design (Steinke & Steinke 2025, Thm 4.5)."""
    fn = oracle_function(oracle)
    num_outputs = blackbox.output_grid(lower=lower, upper=upper, resolution=resolution).size
    family = covering_design(data.shape[0], design=design, mechanism="zcdp", rho=rho, num_outputs=num_outputs,
                             beta=beta, kept_blocks=kept_blocks, budget=budget)
    return blackbox.blackbox_estimate_zcdp(key, data, fn, design=family, rho=rho, lower=lower, upper=upper,
                                           resolution=resolution, beta=beta)


def blackbox_binary(key, data, *, oracle: str, cutoff: float, epsilon: float, beta: float = 0.01,
                    design: str = "sample-and-aggregate", kept_blocks: int | None = None,
                    budget: int | None = None) -> Release:
    """Binary black-box estimate of ``1[oracle >= cutoff]`` over a covering design (Steinke & Steinke 2025, Sec. 1.2)."""
    fn = _indicator_oracle(oracle, _check_real_param("cutoff", cutoff))
    family = covering_design(data.shape[0], design=design, mechanism="binary", epsilon=epsilon, beta=beta,
                             kept_blocks=kept_blocks, budget=budget)
    return blackbox.blackbox_binary(key, data, fn, design=family, epsilon=epsilon, beta=beta)


# --------------------------------------------------------------------------------------------------
# The table.

# name -> (release, target, batched). The stopping-index mechanisms take the query stream as their data
# vector already: the public function itself is the release.
ADAPTERS = {
    "above-threshold": (above_threshold, "first-above-threshold", True),
    "sparse-vector": (sparse_vector, "threshold-answers", True),
    "gaussian-above-threshold": (gaussian_above_threshold, "stopping-time", True),
    "gaussian-sparse-vector": (gaussian_sparse_vector, "threshold-answers", True),
    "gaussian-sparse-vector-whitehouse": (gaussian_sparse_vector_whitehouse, "threshold-answers", True),
    "piecewise-laplace": (piecewise_laplace, "statistic", True),
    "inverse-sensitivity": (inverse_sensitivity, "statistic", True),
    "piecewise-laplace-count": (piecewise_laplace_count, "count", True),
    "inverse-sensitivity-count": (inverse_sensitivity_count, "count", True),
    "piecewise-laplace-vector": (piecewise_laplace_vector, "row-mean", True),
    "sens-o-matic": (sens_o_matic, "oracle", False),
    "shifted-inverse": (shifted_inverse, "oracle", False),
    "cummings-durfee": (cummings_durfee, "oracle", False),
    "double-monotonization": (double_monotonization, "oracle", False),
    "small-diameter-subset-extension": (small_diameter_subset_extension, "oracle", False),
    "subset-extension": (subset_extension, "oracle", False),
    "tahoe": (tahoe, "oracle", False),
    "white-box-laplace": (white_box_laplace, "oracle", False),
    "blackbox-estimate": (blackbox_estimate, "oracle", False),
    "blackbox-estimate-zcdp": (blackbox_estimate_zcdp, "oracle", False),
    "blackbox-binary": (blackbox_binary, "oracle-indicator", False),
}
