"""Sweep metrics of the optimal private median's routes (Tzamos, Vlatakis-Gkaragkounis & Zadik 2020).

:func:`gpuprivacy.mechanisms.median.private_median` (sweep name ``private-median``) computes its density (3.6)
by one of several routes, chosen from the data (not private; its release's ``info.nonprivate_route`` is the
index into :data:`gpuprivacy.mechanisms.median.ROUTE_NAMES`). The engine keeps that field per trial
(``CellTrials.info["nonprivate_route"]``), and this module registers, at the import of
:mod:`gpuprivacy.sweeps`, two user metrics that a config lists in ``metrics = [...]``:

* ``private-median-fast-path-rate``: the fraction of the cell's trials that took the certified fast path;
* ``private-median-overflow-rate``: the fraction that took the full overflow route.

Both are over every trial of the cell (a route is taken whether or not the trial released), and null for a
mechanism whose releases have no ``nonprivate_route`` (every mechanism but ``private-median``).
"""

from __future__ import annotations

import math

import numpy as np

from gpuprivacy.mechanisms import median
from gpuprivacy.sweeps._metrics import register_metric

ROUTE_FIELD = "nonprivate_route"
ROUTE_FAST = median.ROUTE_NAMES.index("certified-fast-path")
ROUTE_OVERFLOW = median.ROUTE_NAMES.index("full-overflow")


def route_rate(trials, route: int) -> float:
    """The fraction of ``trials`` (a :class:`~gpuprivacy.sweeps.CellTrials`) whose release took ``route``; NaN
    (null in a row) where the releases state no route or the cell has no trial."""
    routes = (getattr(trials, "info", None) or {}).get(ROUTE_FIELD)
    if routes is None:
        return math.nan
    routes = np.asarray(routes).reshape(-1)
    return float(np.mean(routes == route)) if routes.size else math.nan


def fast_path_rate(trials, params) -> float:
    """``private-median-fast-path-rate``: see the module docstring."""
    del params  # the route is read off the releases
    return route_rate(trials, ROUTE_FAST)


def overflow_rate(trials, params) -> float:
    """``private-median-overflow-rate``: see the module docstring."""
    del params
    return route_rate(trials, ROUTE_OVERFLOW)


# Metric name -> function. replace=True: registering again (a reload of this module) is not an error, and the
# names are the package's own, registered before any user code runs.
ROUTE_METRICS = {
    "private-median-fast-path-rate": fast_path_rate,
    "private-median-overflow-rate": overflow_rate,
}
_DESCRIPTIONS = {
    "private-median-fast-path-rate": "private-median: fraction of trials on the certified fast path "
                                     "(info.nonprivate_route; null for other mechanisms)",
    "private-median-overflow-rate": "private-median: fraction of trials on the full overflow route "
                                    "(info.nonprivate_route; null for other mechanisms)",
}
for _name, _fn in ROUTE_METRICS.items():
    register_metric(_name, _fn, description=_DESCRIPTIONS[_name], replace=True)
