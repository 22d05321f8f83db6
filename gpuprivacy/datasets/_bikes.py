"""UCI Bike Sharing daily registered-user counts (see ``datasets/README.md``)."""

from __future__ import annotations

import csv
import functools
import importlib.resources
import io
from typing import NamedTuple

import numpy as np

from gpuprivacy._checks import check_int

BIKES_DAILY_POPULATION = 6946
"""N: the largest daily count of registered users, 6,946 on 2012-09-26 (Lebensold et al. 2024, Sec. 4)."""

_NUM_DAYS = 731


class BikesDaily(NamedTuple):
    """Daily counts of registered users, 2011-01-01 .. 2012-12-31.

    Attributes:
      dates: ``str[731]``, ISO 8601 dates in increasing order, consecutive.
      registered: ``int64[731]``, rentals by registered users per day.
      population: the public normaliser N = 6946 of Lebensold et al. (2024).
    """

    dates: np.ndarray
    registered: np.ndarray
    population: int = BIKES_DAILY_POPULATION


@functools.cache
def _read() -> tuple[tuple[str, ...], tuple[int, ...]]:
    text = importlib.resources.files("gpuprivacy.datasets").joinpath("bikes_daily.csv").read_text("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    if rows[0] != ["date", "registered"]:
        raise RuntimeError(f"bikes_daily.csv has header {rows[0]}, expected ['date', 'registered']; "
                           "the installed package data are damaged, reinstall gpuprivacy.")
    dates = tuple(r[0] for r in rows[1:])
    counts = tuple(int(r[1]) for r in rows[1:])
    if len(dates) != _NUM_DAYS:
        raise RuntimeError(f"bikes_daily.csv has {len(dates)} rows, expected {_NUM_DAYS}; reinstall gpuprivacy.")
    return dates, counts


def load_bikes_daily() -> BikesDaily:
    """Loads the UCI Bike Sharing daily registered-user counts (731 days).

    Source: UCI Bike Sharing Dataset (Fanaee-T & Gama 2013), CC BY 4.0; the
    hourly ``registered`` counts summed per day (provenance in
    ``gpuprivacy/datasets/README.md``).

    Returns:
      A :class:`BikesDaily` with fresh (writable) arrays.

    Examples:
      >>> bikes = load_bikes_daily()
      >>> len(bikes.dates), int(bikes.registered.max()), bikes.population
      (731, 6946, 6946)
      >>> str(bikes.dates[bikes.registered.argmax()])
      '2012-09-26'
    """
    dates, counts = _read()
    return BikesDaily(dates=np.array(dates, dtype=str), registered=np.array(counts, dtype=np.int64),
                      population=BIKES_DAILY_POPULATION)


def bikes_daily_queries(d: int | None = None) -> np.ndarray:
    """Daily queries :math:`q_t = \\mathrm{registered}_t / N` over the first ``d`` days.

    This is the offline report-noisy-max task of Lebensold, Precup & Balle
    (arXiv 2402.06137v2, App. B.3): which of the first ``d`` days had the
    most registered users? With :math:`N = 6946` every query lies in
    :math:`[0, 1]` and, if each user contributes at most one rental to every
    daily count (the paper's assumption), each query has sensitivity

    .. math:: \\Delta = 1 / N = 1/6946 \\approx 1.4397 \\times 10^{-4}.

    N is the largest daily count in the data, which the paper takes as public;
    this normalisation is therefore paper-faithful rather than a DP-rigorous
    curation.

    Args:
      d: number of leading days, 1 <= d <= 731; None means all 731. The
        paper uses d = 90 and d = 365 (Lebensold et al. 2024, Sec. 4; we take the first d days).

    Returns:
      ``float64[d]`` with values in [0, 1].

    Raises:
      TypeError, ValueError: if ``d`` is not an integer in [1, 731].

    Examples:
      >>> q = bikes_daily_queries(90)
      >>> q.shape, int(q.argmax()), round(float(q.max()), 4)
      ((90,), 76, 0.339)
    """
    d = _NUM_DAYS if d is None else check_int("d", d, minimum=1, maximum=_NUM_DAYS)
    _, counts = _read()
    return np.array(counts[:d], dtype=np.float64) / BIKES_DAILY_POPULATION
