"""Seeded synthetic datasets: reproducible, in range, scaled so one user moves each query by <= 1/N."""

import numpy as np
import pytest

from gpuprivacy import datasets


def test_energy_queries_are_seeded_in_range_and_read_only():
    a = datasets.synthetic_energy_queries(300, 364, seed=7, peak_day=196, cap_kwh=40.0)
    b = datasets.synthetic_energy_queries(300, 364, seed=7, peak_day=196, cap_kwh=40.0)
    c = datasets.synthetic_energy_queries(300, 364, seed=8, peak_day=196, cap_kwh=40.0)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.shape == (364,) and a.dtype == np.float64 and ((a >= 0) & (a <= 1)).all()
    assert not a.flags.writeable
    # The seasonal term peaks on peak_day: the mean around it exceeds the mean half a year later.
    assert a[180:212].mean() > a[0:30].mean()


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_users=0), "num_users"), (dict(num_days=0), "num_days"), (dict(seed=-1), "seed"),
    (dict(cap_kwh=0.0), "cap_kwh"), (dict(cap_kwh=float("nan")), "cap_kwh"),
])
def test_energy_queries_reject_bad_parameters(kwargs, message):
    args = dict(num_users=10, num_days=5, seed=0, peak_day=0, cap_kwh=40.0) | kwargs
    with pytest.raises(ValueError, match=message):
        datasets.synthetic_energy_queries(args.pop("num_users"), args.pop("num_days"), **args)
