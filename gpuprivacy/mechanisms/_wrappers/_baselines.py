"""Baselines of Linder et al. 2025: the Cummings-Durfee Lipschitz extension with Laplace (Table 2) and white-box Laplace (Fact 2.1)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import all_ok, check_epsilon, check_key, check_positive, epsilon_ok, positive_ok
from gpuprivacy._typing import Array, Key
from gpuprivacy._rounding import divide_up
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._release import Release, stated_guarantee, withheld_unless
from gpuprivacy.mechanisms._wrappers._common import (
    build_cache,
    check_common,
    check_powerset_wrapper,
    sanitise_real,
)
from gpuprivacy.noise import laplace
from gpuprivacy import subsets as ps
from gpuprivacy.mechanisms._common import concrete


class BaselineInfo(NamedTuple):
    """Info of the baselines: the public Laplace scale and the oracle calls made."""

    noise_scale: float
    nonprivate_num_queries: int
    valid: Any = True  # False: a traced epsilon was invalid and the release withheld (docs/fail_closed.md)


def lipschitz_extension(values: Array, n: int) -> Array:
    """The level-wise clip on power-set values of f/c (our construction of the Table 2 baseline of Linder et al. 2025).

    ``F(empty) = f(empty)``; for |s| = t = 1..n:
    ``F(s) = clip(f(s), max_i F(s - i) - 1, min_i F(s - i) + 1)``. F is
    1-Lipschitz everywhere and equals f wherever f is 1-Lipschitz on P(x).
    """
    def level(t, current):
        def block(masks):
            # One block of masks at a time (ps.powerset_map): the bounds lo/hi and the children gathered from
            # ``current`` stay block-sized instead of several arrays of 2**n values (and no 2**n constant).
            own = current[masks]
            lo = jnp.full(masks.shape, -jnp.inf)
            hi = jnp.full(masks.shape, jnp.inf)
            for bit in range(n):
                has = ((masks >> bit) & 1) == 1
                child = current[masks ^ np.uint32(1 << bit)]
                lo = jnp.where(has, jnp.maximum(lo, child - 1), lo)
                hi = jnp.where(has, jnp.minimum(hi, child + 1), hi)
            # lo <= hi by induction (children are pairwise within 2 of each other through their common child).
            sizes = jax.lax.population_count(masks).astype(jnp.int32)
            return jnp.where(sizes == t, jnp.clip(own, lo, hi), own)

        return ps.powerset_map(block, n)

    return jax.lax.fori_loop(1, n + 1, level, values)


_extension_jit = jax.jit(lipschitz_extension, static_argnums=1)


def cummings_durfee_guarantee(*, epsilon: float, c: float):
    """(epsilon, 0)-DP for every f: the extension is c-Lipschitz everywhere (CD20)."""
    check_positive("c", c)
    return PureDP(epsilon=check_epsilon(epsilon))  # one Laplace, scale divide_up(1, epsilon): exact


def cummings_durfee(key: Key, data, *, oracle_fn, c: float, epsilon: float, capacity: int | None = None,
                    max_queries: int | None = None, chunk_size: int | None = None) -> Release:
    """Cummings-Durfee Lipschitz extension plus Laplace (Linder et al. 2025, Table 2 row 1), a baseline.

    .. math:: \\text{out} = c\\,(F[f/c](x) + \\mathrm{Lap}(1/\\varepsilon))

    with F the level-wise clip of :func:`lipschitz_extension`. Pure epsilon-DP
    for every f; queries the whole power set (2**n subsets, n up to what the device's memory holds:
    :func:`gpuprivacy.subsets.powerset_max_n`, n = 30 on an 80 GB GPU); equals
    ``f(x) + Lap(c/epsilon)`` when f is c-Lipschitz on P(x). Oracle values:
    NaN -> 0, divided by c, clamped to +-2**30, rounded to 2**-20.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.cummings_durfee(jax.random.key(0), np.ones(6), oracle_fn=oracle.count, c=1.0, epsilon=1.0)
      >>> out.info.nonprivate_num_queries
      64

    References:
      Cummings & Durfee, Individual Sensitivity Preprocessing for Data Privacy, SODA 2020.
    """
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    c = check_positive("c", c)
    if not math.isfinite(c):
        raise ValueError(f"c must be finite, got {c!r}.")
    data, n, capacity, max_queries = check_common(data, capacity, max_queries)
    guarantee = stated_guarantee(cummings_durfee_guarantee, epsilon=epsilon, c=c)
    # The whole power set: limited by the device's memory (2**n values per array), refused before any query.
    check_powerset_wrapper(n, "cummings_durfee (it queries the whole power set)")
    ps.plan_queries(n, n, max_queries=max_queries, what="cummings_durfee")
    cache = build_cache(oracle_fn, data, depth=n, cap=n, capacity=capacity, max_queries=max_queries,
                        chunk_size=chunk_size, progress=False, sanitise=lambda v: sanitise_real(v, scale=c),
                        fill=jnp.float64(0.0), regime="powerset")
    extended = _extension_jit(cache.values, n)[(1 << n) - 1]
    value = c * (extended + laplace(key) * divide_up(1, epsilon))
    return withheld_unless(Release(value, BaselineInfo(c / epsilon, cache.num_queries), guarantee),
                          epsilon_ok(epsilon))


def white_box_laplace_guarantee(*, epsilon: float, sensitivity: float):
    """(epsilon, 0)-DP **if** ``sensitivity`` is the true global sensitivity of f (Fact 2.1)."""
    check_positive("sensitivity", sensitivity)
    return PureDP(epsilon=check_epsilon(epsilon))  # one Laplace, scale divide_up(1, epsilon): exact


def white_box_laplace(key: Key, data, *, oracle_fn, sensitivity: float, epsilon: float,
                      capacity: int | None = None) -> Release:
    """White-box Laplace: ``f(x) + Lap(sensitivity/epsilon)`` (Linder et al. 2025, Fact 2.1), the accuracy reference.

    .. math:: \\text{out} = f(x) + \\mathrm{Lap}(\\Delta/\\varepsilon)

    Private only when ``sensitivity`` is f's true global sensitivity (a
    promise, not a wrapper). One oracle call. NaN -> 0; values clamped to
    ``+-2**30 sensitivity``.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import oracle
      >>> from gpuprivacy.mechanisms import wrappers
      >>> out = wrappers.white_box_laplace(jax.random.key(0), np.ones(5), oracle_fn=oracle.count,
      ...                                  sensitivity=1.0, epsilon=1.0)
      >>> out.info.noise_scale
      1.0

    References:
      Dwork, McSherry, Nissim & Smith, TCC 2006; Linder et al., Fact 2.1.
    """
    concrete("sensitivity", sensitivity, "white_box_laplace")  # calibrated in Python
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    data, n, capacity, _ = check_common(data, capacity, None)
    guarantee = stated_guarantee(white_box_laplace_guarantee, epsilon=epsilon, sensitivity=sensitivity)
    cache = build_cache(oracle_fn, data, depth=0, cap=0, capacity=capacity, max_queries=1, chunk_size=None,
                        progress=False, sanitise=lambda v: sanitise_real(v, scale=sensitivity),
                        fill=jnp.float64(0.0), regime="levels")
    value = sensitivity * (cache.values[0][0] + laplace(key) * divide_up(1, epsilon))
    # A traced epsilon or sensitivity skipped the eager checks: checked by value, the release withheld.
    ok = all_ok(epsilon_ok(epsilon), positive_ok("sensitivity", sensitivity))
    return withheld_unless(Release(value, BaselineInfo(sensitivity / epsilon, cache.num_queries), guarantee), ok)
