"""The ``nonprivate`` baseline of a study: the exact statistic of each trial's data, with NO privacy.

A study compares private releases with what could be learned without privacy. The ``nonprivate``
sweepable releases the statistic itself, computed on the trial's data exactly as the engine computes
the private mechanisms' targets (the same functions of :data:`gpuprivacy.sweeps.TARGETS`), so

* its ``mae`` against the trial's statistic is exactly 0, and
* its ``population_mae`` (where the data law states the population value) is the sampling error
  of the statistic: the floor a private estimate of the population value is compared with.

It is **not a differentially private mechanism**: its release carries :class:`NotPrivate` (no epsilon,
no delta), its sweepable is the only one flagged ``private=False``, it is not (and must never be)
registered with the privacy auditor, and it takes no privacy parameter (a config that gives it an
``epsilon`` is refused). Rows say so: ``"guarantee": {"type": "NotPrivate", "kind": "none", "private":
false}`` and null ``epsilon``/``delta``/``rho`` metrics.

``statistic`` names one of the engine's real-valued targets, with the parameter names the private
mechanisms use for it:

============== ======================================= ==========================================
statistic      parameters                              the value (x = the trial's data, n values)
============== ======================================= ==========================================
median         ``median_index`` = "ceil" | "floor"      order statistic of rank ceil(n/2) (floor: n//2)
quantile       ``quantile`` = q in (0, 1]               order statistic of rank ceil(q n)
mean           (none)                                   mean of x
clipped-mean   ``lower``, ``upper``                     mean of x clipped into [lower, upper]
identity       (none)                                   x itself (a query or score vector)
count          ``cutoff`` (default 0.5)                 number of values >= cutoff
row-mean       ``dim``, ``lower``, ``upper``            mean of the n/dim rows clipped into the box
oracle         ``oracle`` (e.g. "variance")             the named oracle statistic of the whole data
============== ======================================= ==========================================
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple

import jax.numpy as jnp

from gpuprivacy._checks import is_tracer
from gpuprivacy.mechanisms import Release

# The statistics ``nonprivate`` releases, and the parameters each one takes (besides ``statistic``).
STATISTICS: dict[str, tuple[str, ...]] = {
    "median": ("median_index",),
    "quantile": ("quantile",),
    "mean": (),
    "clipped-mean": ("lower", "upper"),
    "identity": (),
    "count": ("cutoff",),
    "row-mean": ("dim", "lower", "upper"),
    "oracle": ("oracle",),
}
_REQUIRED = {"quantile": ("quantile",), "clipped-mean": ("lower", "upper"), "row-mean": ("dim", "lower", "upper"),
             "oracle": ("oracle",)}
_EXAMPLES = {"quantile": "quantile = 0.9", "lower": "lower = 0.0", "upper": "upper = 1.0", "dim": "dim = 2",
             "oracle": 'oracle = "variance"'}


@dataclasses.dataclass(frozen=True)
class NotPrivate:
    """The guarantee of a release that has none: the exact statistic, no noise, no differential privacy.

    Carried by the ``nonprivate`` baseline's releases so that nothing reads a privacy level off them:
    it has no ``epsilon``, ``delta`` or ``rho`` field, and a study row states it as
    ``{"type": "NotPrivate", "kind": "none", "private": false}``.
    """


NOT_PRIVATE = NotPrivate()


class NonprivateInfo(NamedTuple):
    """``valid``: the statistic is finite (the engine counts the others as withheld)."""

    valid: jnp.ndarray


def _check_params(statistic, given: dict, n: int) -> None:
    """Eager checks of concrete parameters (traced ones are skipped: the engine validated them beforehand)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {list(STATISTICS)}, got {statistic!r}. Set e.g. "
                         'statistic = "median".')
    allowed = STATISTICS[statistic]
    for name, value in given.items():
        if value is None or (name == "median_index" and value == "ceil"):
            continue
        if name not in allowed:
            raise ValueError(f"{name} = {value!r} does not apply to statistic = {statistic!r} (its parameters: "
                             f"{', '.join(allowed) or 'none'}). Remove it, or pick the statistic it belongs to.")
    for name in _REQUIRED.get(statistic, ()):
        if given.get(name) is None:
            raise ValueError(f"statistic = {statistic!r} needs {name}; set it (e.g. {_EXAMPLES[name]}).")
    median_index = given.get("median_index")
    if median_index is not None and median_index not in ("ceil", "floor"):
        raise ValueError(f'median_index must be "ceil" (rank ceil(n/2)) or "floor" (rank n//2), got {median_index!r}.')
    q = given.get("quantile")
    if q is not None and not is_tracer(q) and not (0.0 < float(q) <= 1.0):
        raise ValueError(f"quantile must be in (0, 1], got {q!r}.")
    lower, upper = given.get("lower"), given.get("upper")
    if lower is not None and upper is not None and not is_tracer(lower) and not is_tracer(upper):
        if not (math.isfinite(float(lower)) and math.isfinite(float(upper)) and float(lower) < float(upper)):
            raise ValueError(f"lower and upper must be finite with lower < upper, got [{lower!r}, {upper!r}].")
    dim = given.get("dim")
    if dim is not None and (dim < 1 or n % dim):
        raise ValueError(f"dim must be >= 1 and divide the data size n = {n}, got {dim!r}.")
    if given.get("oracle") is not None:
        from gpuprivacy.sweeps._adapters import parse_oracle

        parse_oracle(given["oracle"])


def make_nonprivate(statistic_fn: Callable) -> Callable:
    """The ``nonprivate`` release, computing its value with ``statistic_fn(x, params)``.

    The engine passes its own target function for the named statistic (the ``named-statistic`` target of
    :data:`gpuprivacy.sweeps.TARGETS`, which dispatches to the private mechanisms' targets), so the
    baseline's value is the private mechanisms' target, computed the same way (and this module needs
    nothing from the target table: no import cycle).
    """

    def nonprivate(key, data, *, statistic: str = "median", quantile: float | None = None,
                   lower: float | None = None, upper: float | None = None, median_index: str = "ceil",
                   cutoff: float | None = None, dim: int | None = None, oracle: str | None = None) -> Release:
        """NOT PRIVATE: the exact statistic of the data, a study's baseline (no noise, no privacy guarantee).

        Releases the statistic ``statistic`` of ``data`` (see gpuprivacy/sweeps/_nonprivate.py) with the
        guarantee :data:`NOT_PRIVATE`; ``key`` is not used. Never publish it: it is the reference that
        private errors are compared with (its error against the population value is the sampling error).

        Args:
          key: unused (a mechanism's signature, so the study engine runs it as any other).
          data: ``[n] float64``, one trial's dataset.
          statistic: ``"median"``, ``"quantile"``, ``"mean"``, ``"clipped-mean"``, ``"identity"``,
            ``"count"``, ``"row-mean"`` or ``"oracle"``.
          quantile, lower, upper, median_index, cutoff, dim, oracle: the statistic's parameters, named as
            the private mechanisms name them (each only for its statistic).

        Returns:
          ``Release(value, NonprivateInfo(valid), NOT_PRIVATE)``.

        Raises:
          ValueError: an unknown statistic, a parameter that does not apply to it, or a missing one.
        """
        del key
        given = dict(quantile=quantile, lower=lower, upper=upper, median_index=median_index, cutoff=cutoff,
                     dim=dim, oracle=oracle)
        x = jnp.asarray(data, jnp.float64)
        _check_params(statistic, given, x.shape[-1])
        params = {k: v for k, v in given.items() if v is not None}
        value = jnp.asarray(statistic_fn(x, {"statistic": statistic, **params}), jnp.float64)
        return Release(value, NonprivateInfo(jnp.all(jnp.isfinite(value))), NOT_PRIVATE)

    return nonprivate
