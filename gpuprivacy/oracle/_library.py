"""Ready oracles ``f(rows, valid) -> value`` for :func:`gpuprivacy.oracle.evaluate`.

Every oracle receives one gathered subset: ``rows[capacity, ...]`` in the
evaluator's canonical order (ascending lexicographic order of rows, so 1-D
rows arrive sorted), zero padding after the real rows, and ``valid`` marking
the real rows. Order-statistic oracles rely on that order: their value is a
gather, not a sort (call them through ``evaluate``, or on sorted rows).

On an empty subset (``valid`` all False) statistics that are undefined there
(mean, median, quantiles, regression fits) return NaN, by definition; the
mechanisms that consume oracle values map NaN to their documented
nonresponse. Factories are cached, so the same parameters give the same
function object (and ``evaluate`` does not recompile).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from gpuprivacy._checks import check_finite_real, check_int, check_positive, check_probability
from gpuprivacy.oracle._isolation import order_statistic_oracle
from gpuprivacy.oracle._trust import library_factory, library_oracle


def _masked(rows, valid):
    mask = valid.reshape(valid.shape + (1,) * (rows.ndim - 1))
    return jnp.where(mask, rows, jnp.zeros((), rows.dtype))


def _count(valid):
    # An int32 reduction (blocks hold fewer than 2**31 rows): on a CPU, XLA fuses it with the sum of the rows
    # far better than an int64 one, and the count is exact either way.
    return valid.sum(dtype=jnp.int32).astype(jnp.float64)


def count(rows, valid):
    """Number of rows in the subset (as float64)."""
    del rows
    return _count(valid)


def sum_(rows, valid):
    """Sum of the subset's rows (over the rows axis)."""
    return _masked(rows, valid).astype(jnp.float64).sum(axis=0)


def mean(rows, valid):
    """Mean of the subset's rows; NaN on an empty subset."""
    return sum_(rows, valid) / _count(valid)


def variance(rows, valid):
    """Population variance (ddof = 0) of the subset's rows; NaN on an empty subset."""
    c = _count(valid)
    x = rows.astype(jnp.float64)
    centred = _masked(x - sum_(rows, valid) / c, valid)
    return (centred * centred).sum(axis=0) / c


def _sorted_1d(rows, name):
    if rows.ndim != 1:
        raise ValueError(f"the {name} oracle needs 1-D data (rows of scalars), got rows of shape {rows.shape[1:]}. "
                         "Select a column first.")
    return rows.astype(jnp.float64)


def _take_from_block(x):
    """``take(i)``: block slots at float indices ``i``, clipped to the block (what a gather of the block reads)."""
    size = x.shape[0]
    return lambda i: x[jnp.clip(i, 0, size - 1).astype(jnp.int32)]


def _interpolated(take, position):
    # position is a 0-based fractional rank into the sorted valid prefix.
    lo = jnp.floor(position)
    hi = jnp.ceil(position)
    x_lo, x_hi = take(lo), take(hi)
    return x_lo + (position - lo) * (x_hi - x_lo)


def _median_of(c, take):
    value = 0.5 * (_interpolated(take, jnp.floor((c - 1) / 2)) + _interpolated(take, jnp.floor(c / 2)))
    return jnp.where(c > 0, value, jnp.nan)


def median(rows, valid):
    """Median (mean of the two middle values when the count is even); NaN on an empty subset."""
    return _median_of(_count(valid), _take_from_block(_sorted_1d(rows, "median")))


@functools.lru_cache(maxsize=None)
def quantile(q: float):
    """The q-quantile with linear interpolation (NumPy's default ``method="linear"``)."""
    q = check_probability("q", q, open_interval=False)

    def quantile_oracle(rows, valid):
        return _quantile_of(_count(valid), _take_from_block(_sorted_1d(rows, "quantile")), q)

    return order_statistic_oracle(quantile_oracle, functools.partial(_quantile_of, q=q))


def _quantile_of(c, take, q):
    return jnp.where(c > 0, _interpolated(take, q * (c - 1)), jnp.nan)


@functools.lru_cache(maxsize=None)
def trimmed_mean(proportion: float):
    """Mean after cutting ``floor(proportion * c)`` rows from each end (``scipy.stats.trim_mean``)."""
    proportion = check_finite_real("proportion", proportion)
    if not 0.0 <= proportion < 0.5:
        raise ValueError(f"proportion must lie in [0, 0.5), got {proportion!r}; it is the share cut from EACH end.")

    def trimmed_mean_oracle(rows, valid):
        x = _sorted_1d(rows, "trimmed_mean")
        c = valid.sum(dtype=jnp.int32)
        cut = jnp.floor(proportion * c.astype(jnp.float64)).astype(jnp.int32)
        slots = jnp.arange(x.shape[0], dtype=jnp.int32)
        keep = (slots >= cut) & (slots < c - cut)
        return jnp.where(keep, x, 0.0).sum() / keep.sum(dtype=jnp.int64).astype(jnp.float64)

    return trimmed_mean_oracle


@functools.lru_cache(maxsize=None)
def clipped_mean(lower: float, upper: float):
    """Mean of the rows clipped to ``[lower, upper]`` (the user asked for the clipping)."""
    lower = check_finite_real("lower", lower)
    upper = check_finite_real("upper", upper)
    if not lower < upper:
        raise ValueError(f"lower must be < upper, got lower={lower!r}, upper={upper!r}.")

    def clipped_mean_oracle(rows, valid):
        return mean(jnp.clip(rows.astype(jnp.float64), lower, upper), valid)

    return clipped_mean_oracle


def _design(rows, valid, fit_intercept, name):
    if rows.ndim != 2 or rows.shape[1] < 2:
        raise ValueError(f"the {name} oracle needs rows [features..., target] with at least 2 columns, got rows "
                         f"of shape {rows.shape[1:]}.")
    x = rows[:, :-1].astype(jnp.float64)
    y = rows[:, -1].astype(jnp.float64)
    if fit_intercept:
        x = jnp.concatenate([jnp.ones((x.shape[0], 1), jnp.float64), x], axis=1)
    w = valid.astype(jnp.float64)
    return x, y, w


@functools.lru_cache(maxsize=None)
def least_squares(coefficient: int = 0, *, fit_intercept: bool = True):
    """One coefficient of the ordinary least-squares fit of the last column on the others.

    Rows are ``[x_1, ..., x_p, y]``. With ``fit_intercept`` the coefficients
    are ``(intercept, beta_1, ..., beta_p)`` and ``coefficient`` indexes them.
    Solved from the normal equations over the valid rows; a singular design
    gives a non-finite value (mapped to nonresponse by mechanisms).
    """
    coefficient = check_int("coefficient", coefficient, minimum=0)

    def least_squares_oracle(rows, valid):
        x, y, w = _design(rows, valid, fit_intercept, "least_squares")
        if coefficient >= x.shape[1]:
            raise ValueError(f"coefficient must be < {x.shape[1]} (number of fitted coefficients), got {coefficient}.")
        gram = (x * w[:, None]).T @ x
        beta = jnp.linalg.solve(gram, (x * w[:, None]).T @ y)
        return beta[coefficient]

    return least_squares_oracle


@functools.lru_cache(maxsize=None)
def logistic_regression(coefficient: int = 1, *, steps: int = 200, learning_rate: float = 0.1,
                        l2: float = 1e-3, fit_intercept: bool = True):
    """One coefficient of an L2-regularised logistic regression fitted with optax.

    Rows are ``[x_1, ..., x_p, y]`` with labels y in {0, 1}. Minimises the
    mean logistic loss over the valid rows plus ``l2/2 * ||beta||^2`` with
    ``steps`` (a fixed number, so the fit vmaps over subsets with static
    shapes) of ``optax.adam(learning_rate)``. The default coefficient 1 is the
    first slope when ``fit_intercept``.
    """
    coefficient = check_int("coefficient", coefficient, minimum=0)
    steps = check_int("steps", steps, minimum=1)
    learning_rate = check_positive("learning_rate", learning_rate)
    l2 = check_finite_real("l2", l2)
    import optax  # here, not at import: optax is a third of `import gpuprivacy`'s own time

    optimizer = optax.adam(learning_rate)

    def logistic_regression_oracle(rows, valid):
        x, y, w = _design(rows, valid, fit_intercept, "logistic_regression")
        if coefficient >= x.shape[1]:
            raise ValueError(f"coefficient must be < {x.shape[1]} (number of fitted coefficients), got {coefficient}.")
        count = w.sum()

        def loss(beta):
            margins = x @ beta
            losses = jnp.logaddexp(0.0, margins) - y * margins
            return (w * losses).sum() / count + 0.5 * l2 * (beta @ beta)

        def step(_, carry):
            from optax import apply_updates  # not from the closure: it holds plain values and the optimizer

            beta, state = carry
            updates, state = optimizer.update(jax.grad(loss)(beta), state, beta)
            return apply_updates(beta, updates), state

        beta0 = jnp.zeros(x.shape[1], jnp.float64)
        # optax mixes Python scalars and int32 step counts; allow standard promotion
        # even when the caller runs with jax_numpy_dtype_promotion="strict".
        with jax.numpy_dtype_promotion("standard"):
            beta, _ = jax.lax.fori_loop(0, steps, step, (beta0, optimizer.init(beta0)))
        return beta[coefficient]

    return logistic_regression_oracle


# Names for the CLI and configs: name -> (factory or oracle, parameter names).
# The package's own oracles run in-process (the trusted fast path); what the factories build does too.
for _oracle in (count, sum_, mean, variance, median):
    library_oracle(_oracle)
order_statistic_oracle(median, _median_of)
quantile = library_factory(quantile)
trimmed_mean = library_factory(trimmed_mean)
clipped_mean = library_factory(clipped_mean)
least_squares = library_factory(least_squares)
logistic_regression = library_factory(logistic_regression)

ORACLES = {
    "count": (count, ()),
    "sum": (sum_, ()),
    "mean": (mean, ()),
    "variance": (variance, ()),
    "median": (median, ()),
    "quantile": (quantile, ("q",)),
    "trimmed_mean": (trimmed_mean, ("proportion",)),
    "clipped_mean": (clipped_mean, ("lower", "upper")),
    "least_squares": (least_squares, ("coefficient",)),
    "logistic_regression": (logistic_regression, ("coefficient",)),
}


def oracle_by_name(name: str, **params):
    """The library oracle called ``name``, built with ``params`` where it takes any."""
    if name not in ORACLES:
        raise ValueError(f"unknown statistic {name!r}; choose one of {sorted(ORACLES)}.")
    target, names = ORACLES[name]
    missing = [p for p in names if p not in params and not (name in ("least_squares", "logistic_regression"))]
    unknown = [p for p in params if p not in names]
    if missing or unknown:
        raise ValueError(f"statistic {name!r} takes parameters {list(names)}; missing {missing}, unknown {unknown}.")
    return target(**params) if names else target
