"""Checks and ranks shared by the local-bound providers and the smooth-sensitivity baselines.

Domain and dataset checks (clipping is explicit and opt-in), 1-based order-statistic ranks
and the sort used by the closed forms.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._sort import sort
from gpuprivacy.accounting import PureDP
from gpuprivacy._checks import (
    check_epsilon,
    check_data,
    check_finite_real,
    check_int,
    check_probability,
    check_rows_in_domain,
    is_tracer,
)
from gpuprivacy.mechanisms._common import check_bool


def sort_rows(x: jax.Array) -> jax.Array:
    """``jnp.sort(x, axis=-1)`` by the backend's fastest sort (:func:`gpuprivacy._sort.sort`; NumPy on a CPU)."""
    return sort(x, axis=-1)


def check_domain(lower: Any, upper: Any) -> tuple[float, float]:
    """A public domain ``[lower, upper]`` with finite ends and ``lower < upper``."""
    lower = check_finite_real("lower", lower)
    upper = check_finite_real("upper", upper)
    if not lower < upper:
        raise ValueError(f"the domain needs lower < upper, got lower={lower!r}, upper={upper!r}. Pass the public "
                         "range of the data, e.g. lower=0.0, upper=10.0.")
    return lower, upper


def check_dataset(data: Any, lower: float, upper: float, clip: bool, *, batched: bool = False,
                  name: str = "data") -> jax.Array:
    """Curator-boundary check of one 1-D dataset (or ``[B, n]`` when ``batched``) in ``[lower, upper]``.

    NaN/inf always raise; values outside the domain raise unless ``clip=True``
    (then they are clipped, as the user asked). Traced data are refused at trace
    time unless ``clip=True`` (:func:`gpuprivacy._checks.check_rows_in_domain`).
    """
    clip = check_bool("clip", clip)
    if is_tracer(data):
        return jnp.asarray(check_rows_in_domain(data, lower, upper, clip, name))
    arr = check_data(data, name)
    want = 2 if batched else 1
    if batched and arr.ndim == 1:
        want = 1
    if arr.ndim != want:
        hint = (" For several datasets (one per trial) use gpuprivacy.mechanisms.run_trials(mechanism, key, num_trials, data, batched_args=True, ...), or jax.vmap." if arr.ndim > want else "")
        raise ValueError(f"{name} must be a 1-D array of n values{' (or [B, n])' if batched else ''}, got shape "
                         f"{arr.shape}.{hint}")
    # The one out-of-domain rule shared by every private median (gpuprivacy._checks).
    return jnp.asarray(check_rows_in_domain(arr.astype(np.float64), lower, upper, clip, name))


def check_rank(rank: Any, n: int) -> int:
    return check_int("rank", rank, minimum=1, maximum=n)


def quantile_rank(quantile: Any, n: int) -> int:
    """The 1-based rank of the lower empirical ``quantile``: ``max(1, ceil(quantile * n))``."""
    q = check_probability("quantile", quantile, open_interval=False)
    return max(1, min(n, math.ceil(q * n - 1e-12)))


def median_rank(n: int) -> int:
    """The (lower) median rank ``(n + 1) // 2``; for odd n this is the median; for even n, the lower median."""
    return (n + 1) // 2


def _max_pieces(max_pieces, n):
    if max_pieces is None:
        return n + 1
    return check_int("max_pieces", max_pieces, minimum=1)


def pure_guarantee(epsilon, lower=None, upper=None, clip=False):
    """PureDP(epsilon), after validating the public domain and ``clip`` exactly as the mechanism does."""
    epsilon = check_epsilon(epsilon)
    if lower is not None or upper is not None:
        check_domain(lower, upper)
    check_bool("clip", clip)
    return PureDP(epsilon)
