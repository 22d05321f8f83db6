"""Shared pieces of the seed-000 privacy wrappers: sanitising untrusted values, the value cache, BOT.

The common skeleton of the wrappers of Linder et al. 2025: (1) sample the level noise (it needs only |x|), (2)
evaluate f once on every subset of size >= max(l, 0), (3) sweep, (4) sample
the output noise. Step (2) goes through :func:`gpuprivacy.oracle.evaluate`
(the oracle sees only gathered rows, P1); every later step reads the cache,
so each subset is queried exactly once per release.

Per-query sanitisation is post-processing of f and costs
no privacy: it is deterministic, per value, and documented per wrapper:

* finite range Y (Sens-o-Matic, Shifted Inverse): round to the nearest grid
  point, ties to the lower one; NaN and -inf map to ``y_1``, +inf to ``y_k``;
* real values (claimed-sensitivity wrappers): NaN maps to ``nan_value``
  (0 unless the range says otherwise), then clamp to the range, divide by
  the claimed ``c``, clamp to ``[-2**30, 2**30]`` and round to the dyadic grid
  ``2**-20`` so that later differences, halvings and sums are exact.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from gpuprivacy._checks import check_data, check_int, check_real_array, is_tracer
from gpuprivacy.oracle import (
    DEFAULT_MAX_QUERIES,
    check_capacity,
    evaluate_levels,
    evaluate_powerset,
    split_levels,
    to_powerset,
)
from gpuprivacy import subsets as ps

NONRESPONSE = float("nan")
"""The nonresponse symbol BOT (the paper's perp) as a release value; ``info.nonresponse`` is True."""

QUANTUM = 2.0 ** -20
VALUE_BOUND = 2.0 ** 30
_INT_LIMIT = 1 << 40


def check_grid(grid) -> np.ndarray:
    """A finite, sorted, duplicate-free range Y with at least 2 points (Linder et al. 2025, Thm 3.1)."""
    y = check_real_array(grid, "grid")
    if y.ndim != 1:
        raise ValueError(f"grid must be a 1-D array of candidate outputs, got shape {y.shape}.")
    if not np.all(np.isfinite(y)):
        raise ValueError("grid must hold finite values; drop NaN/inf entries.")
    if y.size < 2:
        raise ValueError(f"grid must hold at least 2 distinct points, got {y.size}. A one-point range needs no "
                         "privacy wrapper; pass a range of >= 2 values.")
    if not np.all(np.diff(y) > 0):
        raise ValueError("grid must be strictly increasing (sorted, no duplicates); use np.unique(grid).")
    return y.astype(np.float64)


# Values per step when a long value array is rounded block by block (see _blockwise).
_BLOCK = {"cpu": 1 << 16}
_BLOCK_ACCELERATOR = 1 << 20


def _blockwise(fn, values):
    """``fn`` (elementwise) over ``values`` in blocks under ``lax.map``: its temporaries stay block-sized.

    A power set has 2**n values; ``jnp.searchsorted`` alone holds ~36 bytes of temporaries per value on
    a CPU (4.5 arrays of 2**n). The result is the same as ``fn(values)`` (elementwise, exact).
    """
    length = values.shape[0]
    block = _BLOCK.get(jax.default_backend(), _BLOCK_ACCELERATOR)
    if length <= block or length % block:
        return fn(values)
    return jax.lax.map(fn, values.reshape(length // block, block)).reshape(length)


@jax.jit
def round_to_grid(values: jax.Array, grid: jax.Array) -> jax.Array:
    """Grid index (int32) of the nearest grid point; ties go down; NaN and -inf to 0, +inf to k-1."""
    k = grid.shape[0]

    def rounded(block):
        v = jnp.where(jnp.isnan(block), -jnp.inf, block)
        upper = jnp.clip(jnp.searchsorted(grid, v, side="left"), 1, k - 1)
        lower = upper - 1
        pick_upper = jnp.abs(grid[upper] - v) < jnp.abs(v - grid[lower])
        pick_upper = jnp.where(jnp.isinf(v), v > 0, pick_upper)
        return jnp.where(pick_upper, upper, lower).astype(jnp.int32)

    return _blockwise(rounded, values) if values.ndim == 1 else rounded(values)


@functools.partial(jax.jit, static_argnames=("scale", "lower", "upper", "nan_value"))
def sanitise_real(values: jax.Array, *, scale: float, lower: float = -math.inf, upper: float = math.inf,
                  nan_value: float = 0.0) -> jax.Array:
    """NaN -> nan_value, clamp to [lower, upper], divide by ``scale``, clamp to +-2**30, round to 2**-20."""
    v = jnp.where(jnp.isnan(values), nan_value, values)
    v = jnp.clip(v, lower, upper) / scale
    v = jnp.clip(v, -VALUE_BOUND, VALUE_BOUND)
    return jnp.round(v / QUANTUM) * QUANTUM


def laplace_cdf_mp(t, scale):
    """P(Lap(scale) <= t) in mpmath."""
    t, scale = mpmath.mpf(t), mpmath.mpf(scale)
    return mpmath.exp(t / scale) / 2 if t < 0 else 1 - mpmath.exp(-t / scale) / 2


class Cache(NamedTuple):
    """The cached oracle values of one release, in one of our two layouts (whole power set or top levels).

    ``kind == "powerset"``: ``values[2**n]`` by KEEP bitmask (entries deeper than
    ``depth`` hold a fill and are never read unmasked). ``kind == "levels"``:
    ``values`` is a tuple of per-level arrays for removal depths 0..depth and
    ``children[d]`` the child ranks of level d.
    """

    kind: str
    n: int
    depth: int
    values: object
    children: tuple
    num_queries: int


def run_on_cache(kernel, cache: Cache, *args, **static):
    """Calls ``kernel(cache, *args, **static)`` jitted, with the cache layout and ``static`` as static arguments."""
    return _run_on_cache(kernel, cache.kind, cache.n, cache.depth, tuple(sorted(static.items())),
                         cache.values, tuple(jnp.asarray(c) for c in cache.children), *args)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _run_on_cache(kernel, kind, n, depth, static, values, children, *args):
    return kernel(Cache(kind, n, depth, values, children, 0), *args, **dict(static))


def plan_cap(n: int, max_depth: int | None) -> int:
    """The deepest level a release may need: n without a cap, else min(max_depth, n)."""
    return n if max_depth is None else min(max_depth, n)


def use_powerset(n: int, cap: int) -> bool:
    # Regime A when the power set fits the device's memory (its 2**n arrays, counted in
    # ps.WRAPPER_BYTES_PER_SUBSET) and is not much larger than what is queried.
    return n <= ps.powerset_max_n(ps.WRAPPER_BYTES_PER_SUBSET) and (1 << n) <= 8 * ps.query_count(n, cap)


def check_powerset_wrapper(n: int, what: str) -> None:
    """Refuses, before any oracle call, a regime-A release whose 2**n arrays do not fit the device's memory.

    The wrappers of Linder et al. 2025 that run on the full power set hold
    a few arrays of 2**n values at once (:data:`gpuprivacy.subsets.WRAPPER_BYTES_PER_SUBSET`
    bytes per subset: the raw and sanitised values, then the cache and the
    sweeps' temporaries), so their limit is memory, e.g. n = 30 on an 80 GB GPU.
    """
    ps.check_powerset_fits(n, bytes_per_subset=ps.WRAPPER_BYTES_PER_SUBSET, what=what)


def build_cache(oracle_fn, data: np.ndarray, *, depth: int, cap: int, capacity, max_queries, chunk_size,
                progress, sanitise, fill, regime: str | None = None, verify_determinism: bool = False) -> Cache:
    """Evaluates to ``depth`` (<= cap), sanitises, and lays the values out for the sweeps."""
    n = data.shape[0]
    depth = min(depth, n)
    kind = regime or ("powerset" if use_powerset(n, cap) else "levels")
    if kind == "powerset":
        check_powerset_wrapper(n, f"a regime-A release (n={n}, depth {depth})")  # before any oracle call
    if kind == "powerset" and depth == n:
        # Whole power set: the fast evaluator, indexed by canonical bitmask (regime A).
        raw = evaluate_powerset(oracle_fn, data, capacity=capacity, max_queries=max_queries,
                                verify_determinism=verify_determinism, progress=progress)
        num_queries = int(raw.shape[0])
        values = sanitise(raw)
        del raw  # the raw values are not read again: free their 2**n buffer before the sweeps
        return Cache("powerset", n, depth, values, (), num_queries)
    raw = evaluate_levels(oracle_fn, data, depth=depth, capacity=capacity, max_queries=max_queries,
                          chunk_size=chunk_size, verify_determinism=verify_determinism, progress=progress)
    num_queries = int(raw.shape[0])
    values = sanitise(raw)
    del raw
    if kind == "powerset":
        return Cache("powerset", n, depth, to_powerset(values, n, depth, fill), (), num_queries)
    levels = tuple(split_levels(values, n, depth))
    children = tuple(ps.child_ranks(n, d) for d in range(depth))
    return Cache("levels", n, depth, levels, children, num_queries)


def check_common(data, capacity, max_queries):
    data = check_data(data)
    n = data.shape[0]
    capacity = check_capacity(capacity, n)
    max_queries = DEFAULT_MAX_QUERIES if max_queries is None else check_int("max_queries", max_queries, minimum=1)
    return data, n, capacity, max_queries


def concrete_int(value) -> int | None:
    """A Python int for a concrete scalar, None for a tracer."""
    if is_tracer(value):
        return None
    return int(value)


def clamp_int(value: jax.Array) -> jax.Array:
    return jnp.clip(value, -_INT_LIMIT, _INT_LIMIT).astype(jnp.int64)


def closure_max_level_min(cache: Cache, low: jax.Array, base, floor_value, num_levels: int, empty_value):
    """Per-level minima of the closure max ``M_l``, for removal depths 0..num_levels-1.

    ``base`` maps (values, sizes) to the per-subset value fed to the closure;
    subsets with size < ``low`` get ``floor_value`` (Linder et al. 2025, Def 3.2 and Def D.1),
    so the result is right for any traced ``low``. Depths beyond n get
    ``empty_value``; depths beyond the evaluated ones but <= n are below
    ``low`` whenever the release is not BOT, so they get ``floor_value``.
    """
    n = cache.n
    if cache.kind == "powerset":
        def start_at(masks):
            # One block of masks at a time (ps.powerset_map): sizes come from a popcount on the device (no
            # 2**n constant), and the only 2**n arrays are the cache, this start array and the closure.
            sizes = jax.lax.population_count(masks).astype(jnp.int64)  # int64: compared with a traced int64
            return jnp.where(sizes >= low, base(cache.values[masks], sizes), floor_value)

        closure = ps.subset_max(ps.powerset_map(start_at, n), n)
        per_size = ps.level_reduce(closure, n, "min", None)
        per_depth = [per_size[n - d] for d in range(min(num_levels, n + 1))]
    else:
        levels = []
        for d, level in enumerate(cache.values):
            size = jnp.asarray(n - d, jnp.int64)
            levels.append(jnp.where(size >= low, base(level, size), floor_value))
        closure = ps.levels_closure_max(levels, list(cache.children))
        per_depth = [closure[d].min() if d < len(closure) else jnp.asarray(floor_value)
                     for d in range(min(num_levels, n + 1))]
        per_depth = [jnp.asarray(p) for p in per_depth]
    dtype = per_depth[0].dtype
    per_depth = [jnp.asarray(p, dtype) for p in per_depth]
    per_depth += [jnp.asarray(empty_value, dtype)] * (num_levels - len(per_depth))
    return jnp.stack(per_depth)
