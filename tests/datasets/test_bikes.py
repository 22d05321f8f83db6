"""The bundled UCI Bikes daily counts reproduce the facts of spec 004 §5.1."""

import datetime
import hashlib
import importlib.resources

import numpy as np
import pytest

from gpuprivacy.datasets import (
    BIKES_DAILY_POPULATION,
    BikesDaily,
    bikes_daily_queries,
    load_bikes_daily,
    synthetic_uniform_queries,
)

# Recorded in gpuprivacy/datasets/README.md; a change to the data must update both.
CSV_SHA256 = "b56449f142ba34b655aa80d2e27ca3b467aa51d1c68ed728ece0a109cd151439"


def test_csv_matches_recorded_hash():
    data = importlib.resources.files("gpuprivacy.datasets").joinpath("bikes_daily.csv").read_bytes()
    assert hashlib.sha256(data).hexdigest() == CSV_SHA256


def test_load_shape_dtypes_and_dates():
    bikes = load_bikes_daily()
    assert isinstance(bikes, BikesDaily)
    assert bikes.registered.dtype == np.int64 and bikes.registered.shape == (731,)
    assert bikes.dates.shape == (731,) and bikes.dates.dtype.kind == "U"
    dates = [datetime.date.fromisoformat(d) for d in bikes.dates]
    assert dates[0] == datetime.date(2011, 1, 1) and dates[-1] == datetime.date(2012, 12, 31)
    assert all((b - a).days == 1 for a, b in zip(dates[:-1], dates[1:], strict=True))
    assert (bikes.registered > 0).all()
    # UCI day.csv, first row: 2011-01-01, registered 654.
    assert bikes.registered[0] == 654


def test_population_is_the_max_on_2012_09_26():
    bikes = load_bikes_daily()
    assert bikes.population == BIKES_DAILY_POPULATION == 6946
    assert bikes.registered.max() == 6946
    assert bikes.dates[bikes.registered.argmax()] == "2012-09-26"


def test_first_365_days():
    bikes = load_bikes_daily()
    first_year = bikes.registered[:365]
    assert first_year.max() == 4614 and first_year.argmax() == 234
    assert bikes.dates[234] == "2011-08-23"
    q = bikes_daily_queries(365)
    assert round(float(q.max()), 4) == 0.6643
    assert round(float(np.sort(q)[-2]), 4) == 0.6461


def test_first_90_days():
    q = bikes_daily_queries(90)
    assert q.shape == (90,) and q.dtype == np.float64
    assert q.argmax() == 76 and round(float(q.max()), 4) == 0.3390
    assert round(float(np.sort(q)[-2]), 4) == 0.3380


def test_queries_are_registered_over_population():
    bikes = load_bikes_daily()
    q = bikes_daily_queries()
    assert q.shape == (731,)
    np.testing.assert_array_equal(q, bikes.registered / 6946)
    assert q.min() > 0 and q.max() == 1.0
    assert int((q >= 0.575).sum()) == 290  # spec 004 §5.1


def test_uniform_random_selection_accuracy_matches_spec():
    # Spec 004 §5.5: uniform-random selection accuracy (eq. (39) with q_max = 1)
    # is 0.7285 for d = 365 and 0.8662 for d = 90.
    for d, expected in [(365, 0.7285), (90, 0.8662)]:
        q = bikes_daily_queries(d)
        assert round(1 - float(np.mean(q.max() - q)), 4) == expected


def test_load_returns_fresh_arrays():
    a = load_bikes_daily()
    a.registered[0] = -1
    assert load_bikes_daily().registered[0] == 654


@pytest.mark.parametrize("d, error", [(0, ValueError), (732, ValueError), (2.5, TypeError), ("90", TypeError),
                                      (True, TypeError)])
def test_bad_d(d, error):
    with pytest.raises(error, match="d must"):
        bikes_daily_queries(d)


def test_synthetic_uniform_is_seeded():
    a = synthetic_uniform_queries(50, seed=3)
    assert a.shape == (50,) and a.dtype == np.float64 and ((a >= 0) & (a < 1)).all()
    np.testing.assert_array_equal(a, synthetic_uniform_queries(50, seed=3))
    assert not np.array_equal(a, synthetic_uniform_queries(50, seed=4))
    with pytest.raises(ValueError, match="seed must be >= 0"):
        synthetic_uniform_queries(5, seed=-1)
