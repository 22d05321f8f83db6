"""`gpuprivacy estimate` with the seed estimators: sens-o-matic (000), piecewise-laplace and
inverse-sensitivity (001), private-median (003). The blackbox estimator (002) has its own file."""

import json

import numpy as np
import pytest

from gpuprivacy.cli import main


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "data.csv"
    values = np.random.default_rng(0).uniform(0.3, 0.7, size=400)
    path.write_text("x\n" + "".join(f"{v:.6f}\n" for v in values))
    return path


def _run(capsys, csv_file, mechanism, *extra, rows=None):
    code = main(["estimate", "--data", str(csv_file), "--column", "x", "--statistic", "median", "--mechanism",
                 mechanism, "--seed", "5", "--json", *extra])
    captured = capsys.readouterr()
    return code, captured


@pytest.mark.parametrize("mechanism, extra", [
    ("piecewise-laplace", ["--lower", "0", "--upper", "1"]),
    ("inverse-sensitivity", ["--lower", "0", "--upper", "1"]),
    ("private-median", ["--min-density", "1.0", "--radius", "0.2", "--median-bound", "1"]),
])
def test_seed_estimators_release_a_median_with_their_guarantee(capsys, csv_file, mechanism, extra):
    code, captured = _run(capsys, csv_file, mechanism, "--epsilon", "1", *extra)
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert payload["guarantee"] == {"type": "PureDP", "epsilon": 1.0}
    assert payload["mechanism"] == mechanism and payload["seed"] == 5
    assert abs(payload["value"] - 0.5) < 0.25  # 400 rows, median ~0.5; the noise is far smaller at epsilon = 1


def test_sens_o_matic_estimator_on_a_small_column(tmp_path, capsys):
    path = tmp_path / "small.csv"
    path.write_text("x\n" + "".join(f"{v:.4f}\n" for v in np.random.default_rng(1).uniform(0.45, 0.55, 14)))
    code = main(["estimate", "--data", str(path), "--column", "x", "--statistic", "mean", "--mechanism",
                 "sens-o-matic", "--epsilon", "4", "--lower", "0", "--upper", "1", "--grid-points", "41",
                 "--seed", "2", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert payload["guarantee"]["type"] == "PureDP" and payload["guarantee"]["epsilon"] >= 4.0
    assert payload["nonresponse"] is False and 0.0 <= payload["value"] <= 1.0


@pytest.mark.parametrize("mechanism, extra, message", [
    ("piecewise-laplace", [], "--lower L --upper U"),
    ("piecewise-laplace", ["--lower", "0.6", "--upper", "1"], "clip"),
    ("sens-o-matic", [], "--lower L --upper U"),
    ("private-median", ["--min-density", "1.0"], "--radius"),
])
def test_seed_estimators_explain_bad_input(capsys, csv_file, mechanism, extra, message):
    code, captured = _run(capsys, csv_file, mechanism, "--epsilon", "1", *extra)
    assert code == 2 and captured.out == ""
    assert message in captured.err
