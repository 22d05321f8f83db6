"""``gpuprivacy estimate`` prints the guarantee its release carries, and never calls a ``*_guarantee`` function.

Every public ``*_guarantee`` function is replaced by one that raises (the
mechanisms state their guarantee through their own private copies, so the
releases still carry it), and every public release function records what it
returns. The JSON guarantee of each estimator must then be exactly the
recorded release's ``guarantee``.
"""

import dataclasses
import functools
import inspect
import json

import numpy as np
import pytest

from gpuprivacy import mechanisms
from gpuprivacy.cli import main


@pytest.fixture(scope="module")
def column(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "data.csv"
    values = np.random.default_rng(0).uniform(0.3, 0.7, size=400)
    path.write_text("x\n" + "".join(f"{v:.6f}\n" for v in values))
    return path


@pytest.fixture(scope="module")
def small_column(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "small.csv"
    path.write_text("x\n" + "".join(f"{v:.4f}\n" for v in np.random.default_rng(1).uniform(0.45, 0.55, 14)))
    return path


def _namespaces():
    return [mechanisms] + [module for name, module in inspect.getmembers(mechanisms, inspect.ismodule)
                           if not name.startswith("_")]


@pytest.fixture
def releases(monkeypatch):
    """The releases public mechanism functions return during the test; ``*_guarantee`` functions raise."""
    recorded = []

    def refuse(name):
        def guarantee(*args, **kwargs):
            raise AssertionError(f"the CLI called {name}; it must print the release's own guarantee")
        return guarantee

    def record(fn):
        @functools.wraps(fn)
        def release(*args, **kwargs):
            out = fn(*args, **kwargs)
            recorded.append(out)
            return out
        return release

    for namespace in _namespaces():
        for name, fn in inspect.getmembers(namespace, inspect.isfunction):
            if name.startswith("_"):
                continue
            if name.endswith("_guarantee"):
                monkeypatch.setattr(namespace, name, refuse(f"{namespace.__name__}.{name}"))
            elif list(inspect.signature(fn).parameters)[:1] == ["key"]:
                monkeypatch.setattr(namespace, name, record(fn))
    return recorded


CASES = [
    ("laplace", "median", ["--sensitivity", "1"]),
    ("laplace", "median", ["--sensitivity", "1", "--secure"]),
    ("gaussian", "mean", ["--sensitivity", "1", "--delta", "1e-6"]),
    ("gaussian", "mean", ["--sensitivity", "1", "--delta", "1e-6", "--secure"]),
    ("piecewise-laplace", "median", ["--lower", "0", "--upper", "1"]),
    ("inverse-sensitivity", "median", ["--lower", "0", "--upper", "1"]),
    ("private-median", "median", ["--min-density", "1.0", "--radius", "0.2", "--median-bound", "1"]),
    ("blackbox", "median", ["--lower", "0", "--upper", "1", "--resolution", "0.05", "--budget", "300"]),
    ("blackbox", "median", ["--variant", "zcdp", "--rho", "0.5", "--lower", "0", "--upper", "1", "--resolution",
                            "0.1", "--budget", "100"]),
    ("blackbox", "median", ["--variant", "binary", "--budget", "50"]),
    ("sens-o-matic", "mean", ["--lower", "0", "--upper", "1", "--grid-points", "41"]),
]


@pytest.mark.parametrize("mechanism, statistic, extra", CASES, ids=[" ".join([c[0], *c[2]]) for c in CASES])
def test_the_printed_guarantee_is_the_releases_own(capsys, releases, column, small_column, mechanism, statistic,
                                                   extra):
    data = small_column if mechanism == "sens-o-matic" else column
    code = main(["estimate", "--data", str(data), "--column", "x", "--statistic", statistic, "--mechanism", mechanism,
                 "--epsilon", "2", "--seed", "7", "--json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert releases, "the estimator called no public release function"
    guarantee = releases[-1].guarantee
    assert guarantee is not None, f"{mechanism}: the release carries no guarantee"
    expected = {"type": type(guarantee).__name__, **dataclasses.asdict(guarantee)}
    assert json.loads(captured.out)["guarantee"] == expected


def test_an_unstatable_guarantee_is_refused_without_a_release(capsys, releases, small_column):
    # Sens-o-Matic capped at depth 3 at epsilon 40: the cap's delta is >= 1, so no guarantee can be stated and
    # the mechanism refuses before it draws noise; the CLI prints no value.
    code = main(["estimate", "--data", str(small_column), "--column", "x", "--statistic", "mean", "--mechanism",
                 "sens-o-matic", "--epsilon", "40", "--lower", "0", "--upper", "1", "--max-depth", "3", "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "delta" in captured.err
    assert not releases
