"""One trial of a sweep cell, as a function the study engine traces: draw the data, release, score.

:func:`_mechanism_fn` is what every compiled mechanism program vmaps over trials and cells; :func:`_draw_fn`
draws one trial's dataset; :func:`traceable_parameters` finds, by tracing once abstractly, which real
parameters a mechanism accepts as traced arguments (so an epsilon grid compiles one program).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import data_checked_by_caller
from gpuprivacy._lru import LRUCache
from gpuprivacy.mechanisms import batched_implementation
from gpuprivacy.sweeps._mechanisms import TARGETS, SweepableMechanism

# (mechanism, static params) -> the float parameters it accepts traced (probed abstractly; small entries).
_TRACEABLE = LRUCache(1024)


class DataSpec(NamedTuple):
    """Where a trial's data comes from.

    ``distribution`` draws ``n`` values from a key with traced ``params``; or ``fixed``
    holds one array for every trial. ``fresh``: a new draw per trial (else one per cell).
    """

    name: str
    n: int
    params: dict
    distribution: Any = None
    fixed: np.ndarray | None = None
    fresh: bool = True


def _split(params: dict, traceable: tuple) -> tuple[tuple, dict]:
    static = tuple(sorted((k, v) for k, v in params.items() if k not in traceable))
    traced = {k: jnp.asarray(v, jnp.float64) for k, v in params.items() if k in traceable}
    return static, traced


def _info_scalars(info, leading: tuple = ()) -> dict:
    """The numeric fields of a release's ``info`` that hold one number per trial (shape ``leading``)."""
    fields = info._asdict() if hasattr(info, "_asdict") else (dict(info) if isinstance(info, dict) else {})
    out = {}
    for name, leaf in fields.items():
        if isinstance(leaf, (jax.Array, np.ndarray, np.generic, int, float, bool)):
            leaf = jnp.asarray(leaf)
            if leaf.shape == leading and (jnp.issubdtype(leaf.dtype, jnp.number) or leaf.dtype == jnp.bool_):
                out[name] = leaf
    return out


def _exact_values(mechanism: SweepableMechanism, x, params) -> dict:
    if mechanism.exact is None:
        return {}
    return {str(k): jnp.asarray(v, jnp.float64) for k, v in mechanism.exact(x, params).items()}


def _valid(release):
    valid = getattr(release.info, "valid", None)
    if valid is None:
        valid = jnp.all(jnp.isfinite(jnp.asarray(release.value, jnp.float64)))
    return jnp.asarray(valid, bool)


# The info field in which the engine reports, per trial, the rows of the data outside the mechanism's declared
# domain [lower, upper] (NaN included) when the cell does not clip: the cell is then refused (gpuprivacy/sweeps/
# _run.py), as the direct call on the same data would be. Not a release field: the sweep is a simulation.
ROWS_OUTSIDE_DOMAIN = "engine_rows_outside_domain"


@functools.lru_cache(maxsize=None)
def _takes_clip(release) -> bool:
    try:
        return "clip" in inspect.signature(release).parameters
    except (TypeError, ValueError):  # pragma: no cover (a builtin without a signature)
        return False


def _rows_outside_domain(mechanism: SweepableMechanism, x, params):
    """The rows of ``x`` outside ``[lower, upper]`` (NaN included) for a domain mechanism that does not clip, else None.

    The engine traces the data under :func:`gpuprivacy._checks.data_checked_by_caller`, so the mechanism's own
    check cannot raise; this is that check, counted on the device for every trial.
    """
    if not _takes_clip(mechanism.release) or params.get("clip", False) is True:
        return None
    if "lower" not in params or "upper" not in params:
        return None
    inside = (x >= params["lower"]) & (x <= params["upper"])
    return jnp.sum(~inside, dtype=jnp.int32)


def _mechanism_fn(mechanism: SweepableMechanism, static: tuple, with_exact: bool):
    """``one(mechanism_key, x, traced) -> (value, target, valid, info, exact)``: one trial on its data ``x``.

    ``mechanism_key`` is the second half of ``jax.random.split(trial_key)``, split by the caller outside the
    compiled program (:func:`gpuprivacy.sweeps._trials.run_cells`).
    """
    target = TARGETS[mechanism.target]
    static_params = dict(static)

    def one(mechanism_key, x, traced):
        params = {**static_params, **traced}
        release = mechanism.release(mechanism_key, x, **params)
        exact = _exact_values(mechanism, x, params) if with_exact else {}
        valid, info = _valid(release), _info_scalars(release.info)
        outside = _rows_outside_domain(mechanism, x, params)
        if outside is not None:
            valid = valid & (outside == 0)
            info = {**info, ROWS_OUTSIDE_DOMAIN: outside}
        return release.value, target.statistic(x, params), valid, info, exact
    return one


def _draw_fn(data: DataSpec):
    """``draw(data_key, dist_params, fixed) -> x``: one trial's data from its data key."""
    def draw(data_key, dist_params, fixed):
        if data.distribution is None or not data.fresh:
            return fixed
        return data.distribution.draw(data_key, (data.n,), **dist_params)
    return draw


def traceable_parameters(mechanism: SweepableMechanism, params: dict, data: DataSpec, example) -> tuple:
    """The real parameters that ``mechanism`` accepts traced with these static values (probed once, abstractly)."""
    reals = tuple(sorted(k for k, v in params.items()
                         if isinstance(v, float) and not isinstance(v, bool) and np.isfinite(v)))
    others = tuple(sorted((k, v) for k, v in params.items() if k not in reals))
    cache_key = (mechanism.name, id(mechanism.release), others, reals)
    if cache_key not in _TRACEABLE:
        found: tuple = ()
        if batched_implementation(mechanism.release) is None and reals:
            # All of them traced if the mechanism allows it; else each one that it accepts traced alone
            # (e.g. epsilon, while lower and upper must be concrete), checked together once more.
            candidates = [reals] + [(name,) for name in reals]
            accepted = []
            for names in candidates:
                if _traces(mechanism, params, data, example, names):
                    if names == reals:
                        accepted = list(reals)
                        break
                    accepted.append(names[0])
            if accepted and tuple(accepted) != reals and not _traces(mechanism, params, data, example,
                                                                     tuple(accepted)):
                accepted = []
            found = tuple(sorted(accepted))
        _TRACEABLE[cache_key] = found
    return _TRACEABLE[cache_key]


def _traces(mechanism, params, data, example, names) -> bool:
    static, traced = _split(params, names)
    try:
        with data_checked_by_caller():  # the engine counts rows outside the domain itself (_rows_outside_domain)
            jax.eval_shape(_mechanism_fn(mechanism, static, False), jax.random.key(0), example, traced)
    except Exception:  # noqa: BLE001  (the mechanism needs them concrete: they stay static)
        return False
    return True
