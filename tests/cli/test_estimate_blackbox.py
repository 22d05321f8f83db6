"""`gpuprivacy estimate --mechanism blackbox` (seed 002)."""

import json

import pytest

from gpuprivacy.cli import main


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("x,b\n" + "".join(f"{(i * 37) % 100 / 10},{int(i % 5 != 0)}\n" for i in range(600)))
    return path


def _estimate(capsys, csv_file, *extra, column="x", statistic="median"):
    code = main(["estimate", "--data", str(csv_file), "--column", column, "--statistic", statistic, "--mechanism",
                 "blackbox", "--seed", "3", "--json", *extra])
    captured = capsys.readouterr()
    return code, captured


def test_pure_blackbox_median_with_a_budget(csv_file, capsys):
    code, captured = _estimate(capsys, csv_file, "--epsilon", "1", "--lower", "0", "--upper", "10", "--resolution",
                               "0.5", "--budget", "300")
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert payload["guarantee"] == {"type": "PureDP", "epsilon": 1.0}
    assert payload["k"] <= 300 and payload["t"] >= 1 and payload["m"] == 600 - payload["rows_per_evaluation"]
    assert payload["value"] in [0.5 * j for j in range(21)]
    assert 2.0 <= payload["value"] <= 7.0  # data median 4.95; subsets of >= 40 rows


def test_m_option_and_sample_and_aggregate(csv_file, capsys):
    code, captured = _estimate(capsys, csv_file, "--epsilon", "2", "--lower", "0", "--upper", "10", "--m", "580")
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert payload["m"] <= 580 and payload["k"] == payload["t"] + 1  # the fewest calls wasting at most m rows
    code, captured = _estimate(capsys, csv_file, "--epsilon", "2", "--lower", "0", "--upper", "10", "--m", "300",
                               "--budget", "1000")
    assert code != 0 and "--budget" in captured.err
    code, captured = _estimate(capsys, csv_file, "--epsilon", "2", "--lower", "0", "--upper", "10", "--design",
                               "sample-and-aggregate")
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert payload["k"] == payload["t"] + 1 and payload["aggregation"] == "sort"


def test_zcdp_and_binary_variants(csv_file, capsys):
    code, captured = _estimate(capsys, csv_file, "--epsilon", "1", "--variant", "zcdp", "--rho", "0.5", "--lower",
                               "0", "--upper", "10", "--resolution", "1", "--budget", "100")
    assert code == 0, captured.err
    assert json.loads(captured.out)["guarantee"] == {"type": "ZCDP", "rho": 0.5}
    code, captured = _estimate(capsys, csv_file, "--epsilon", "4", "--delta", "1e-6", "--variant", "zcdp", "--lower",
                               "0", "--upper", "10", "--resolution", "2", "--budget", "100")
    assert code == 0, captured.err
    rho = json.loads(captured.out)["guarantee"]["rho"]
    assert rho == pytest.approx(16 / (4 * 13.815510557964274 + 16), rel=1e-9)  # (4.9)
    code, captured = _estimate(capsys, csv_file, "--epsilon", "1", "--variant", "binary", "--budget", "50",
                               column="b", statistic="median")
    assert code == 0, captured.err
    assert json.loads(captured.out)["value"] == 1.0  # 80% ones: every subset median is 1


@pytest.mark.parametrize("extra,match", [
    (["--epsilon", "1"], "--lower"),
    (["--epsilon", "1", "--lower", "1", "--upper", "0"], "--lower must be below --upper"),
    (["--epsilon", "1", "--lower", "0", "--upper", "10", "--budget", "5"], "no covering design"),
    (["--epsilon", "1", "--lower", "0", "--upper", "10", "--m", "600"], "--m must satisfy"),
])
def test_bad_input_is_a_clear_error(csv_file, capsys, extra, match):
    code, captured = _estimate(capsys, csv_file, *extra)
    assert code != 0
    assert match in captured.err
