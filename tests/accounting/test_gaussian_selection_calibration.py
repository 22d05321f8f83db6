"""calibrate_sigma round trips and the ``gpuprivacy bound`` command line."""

import json
import math
import subprocess
import sys

import pytest

from gpuprivacy import accounting
from gpuprivacy.cli import main

SQRT3 = math.sqrt(3.0)
RNM = dict(d=10, sensitivity=1e-3, lower=0.0, upper=1.0)
AT = dict(t=10, threshold=0.5, sensitivity=1e-3, lower=0.0, upper=1.0)


def test_calibrate_gaussian_rnm_round_trip():
    sigma = accounting.calibrate_sigma("gaussian-rnm", 0.05, **RNM)
    assert accounting.gaussian_rnm_epsilon(sigma, **RNM) <= 0.05
    # The smallest such sigma (to the search's relative tolerance 1e-10).
    assert accounting.gaussian_rnm_epsilon(sigma * (1 - 1e-8), **RNM) > 0.05


def test_calibrate_gaussian_at_round_trip():
    sigma = accounting.calibrate_sigma("gaussian-at", 0.03, **AT)
    eps = accounting.gaussian_at_epsilon(AT["t"], sigma, SQRT3 * sigma, AT["threshold"], AT["sensitivity"], 0.0, 1.0)
    assert eps <= 0.03
    lower = sigma * (1 - 1e-8)
    assert accounting.gaussian_at_epsilon(AT["t"], lower, SQRT3 * lower, 0.5, 1e-3, 0.0, 1.0) > 0.03
    other = accounting.calibrate_sigma("gaussian-at", 0.03, query_ratio=2.0, **AT)
    assert accounting.gaussian_at_epsilon(10, other, 2.0 * other, 0.5, 1e-3, 0.0, 1.0) <= 0.03


def test_calibrate_baselines_round_trip():
    sigma = accounting.calibrate_sigma("rnm-analytic", 0.5, d=100, sensitivity=1e-3, delta=1e-5)
    assert accounting.gaussian_rnm_epsilon_postprocessing(sigma, 100, 1e-3, 1e-5) <= 0.5
    assert accounting.gaussian_rnm_epsilon_postprocessing(sigma * (1 - 1e-9), 100, 1e-3, 1e-5) > 0.5
    sigma = accounting.calibrate_sigma("zhu-wang", 0.05, threshold=0.5, sensitivity=1e-3, delta=1e-5)
    assert accounting.zhu_wang_at_epsilon(sigma, SQRT3 * sigma, 0.5, 1e-3, 1e-5) <= 0.05
    lower = sigma * (1 - 1e-8)
    assert accounting.zhu_wang_at_epsilon(lower, SQRT3 * lower, 0.5, 1e-3, 1e-5) > 0.05


def test_calibration_orders_the_bounds_as_the_paper_reports():
    # High privacy, many candidates (spec 004 Sec 5.3): the pure bound needs less noise than the
    # analytic post-processing bound at delta = 1e-5.
    pure = accounting.calibrate_sigma("gaussian-rnm", 0.05, d=1024, sensitivity=1e-3, lower=0.0, upper=1.0)
    post = accounting.calibrate_sigma("rnm-analytic", 0.05, d=1024, sensitivity=1e-3, delta=1e-5)
    assert pure < post


def test_calibration_bad_inputs():
    with pytest.raises(ValueError, match="bound must be one of"):
        accounting.calibrate_sigma("laplace", 0.1, **RNM)
    with pytest.raises(ValueError, match="missing \\['upper'\\]"):
        accounting.calibrate_sigma("gaussian-rnm", 0.1, d=10, sensitivity=1e-3, lower=0.0)
    with pytest.raises(ValueError, match="unknown \\['sigma'\\]"):
        accounting.calibrate_sigma("gaussian-rnm", 0.1, sigma=1.0, **RNM)
    with pytest.raises(ValueError, match="target_epsilon must be finite and > 0"):
        accounting.calibrate_sigma("gaussian-rnm", 0.0, **RNM)


# ------------------------------------------------------------------------------------------------
# CLI.


def test_cli_bound_gaussian_rnm_json(capsys):
    args = ["bound", "gaussian-rnm", "--sigma", "0.3", "--d", "2", "--sensitivity", "0.01", "--lower", "0",
            "--upper", "1", "--json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    payload = json.loads(out)
    assert out.count("\n") == 1
    assert payload["epsilon"] == accounting.gaussian_rnm_epsilon(0.3, 2, 0.01, 0.0, 1.0)
    assert payload["epsilon"] == pytest.approx(0.1259421424, abs=1e-10)
    assert payload["method"] == "quadrature" and payload["certified"] is False
    assert payload["inputs"] == {"sigma": 0.3, "d": 2, "sensitivity": 0.01, "lower": 0.0, "upper": 1.0}


def test_cli_bound_gaussian_at_json_and_text(capsys):
    args = ["bound", "gaussian-at", "--t", "3", "--sigma-threshold", "0.3", "--sigma-query", str(0.3 * SQRT3),
            "--threshold", "0.75", "--sensitivity", "1e-3", "--lower", "0", "--upper", "1"]
    assert main(args + ["--json", "--method", "mpmath"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["method"] == "mpmath" and payload["inputs"]["t"] == 3 and payload["no_top"] is False
    assert payload["epsilon"] == pytest.approx(0.007968298394985668, rel=1e-9)
    assert main(args + ["--no-top"]) == 0
    text = capsys.readouterr().out
    assert "bottom^t" in text and "epsilon = " in text


def test_cli_bound_errors_exit_2():
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", "bound", "gaussian-rnm", "--sigma", "0.3", "--d", "1",
                           "--sensitivity", "0.01", "--lower", "0", "--upper", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "d must be an integer >= 2, got 1.0" in proc.stderr and proc.stdout == ""


def test_cli_bound_range_error(capsys):
    code = main(["bound", "gaussian-at", "--t", "2", "--sigma-threshold", "0.1", "--sigma-query", "0.2",
                 "--threshold", "0.5", "--sensitivity", "2", "--lower", "0", "--upper", "1"])
    assert code == 2
    assert "sensitivity must lie in (0, upper - lower]" in capsys.readouterr().err


def test_cli_bound_certified(capsys):
    pytest.importorskip("flint")
    args = ["bound", "gaussian-rnm", "--sigma", "0.3", "--d", "2", "--sensitivity", "0.01", "--lower", "0",
            "--upper", "1", "--certified", "--json"]
    assert main(args) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["method"] == "arb" and payload["certified"] is True
    assert payload["epsilon"] == accounting.gaussian_rnm_epsilon(0.3, 2, 0.01, 0.0, 1.0, certified=True)
    assert payload["epsilon"] == pytest.approx(0.1259421424, abs=1e-10)
