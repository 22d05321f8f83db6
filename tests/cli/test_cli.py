import json
import subprocess
import sys

import pytest

from gpuprivacy.cli import main


def _run_cli(*args):
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", *args], capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("x,y\n" + "".join(f"{i},{i % 3}\n" for i in range(1, 21)))
    return path


def test_info_json_reports_x64_and_devices():
    code, out, err = _run_cli("info", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["x64_enabled"] is True
    assert payload["devices"] and payload["devices"][0]["platform"] == "cpu"
    assert out.count("\n") == 1  # exactly one JSON object


def test_estimate_json_is_one_object_and_reproducible(csv_file, capsys):
    args = ["estimate", "--data", str(csv_file), "--column", "x", "--statistic", "median", "--mechanism",
            "laplace", "--epsilon", "2", "--sensitivity", "0.5", "--seed", "11", "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert first == second
    assert first["guarantee"] == {"type": "PureDP", "epsilon": 2.0}
    assert first["scale"] == 0.25
    assert abs(first["value"] - 10.5) < 0.25 * 30  # Laplace(0.25) tail beyond 30 scales has probability e^-30


def test_estimate_secure_release_lies_on_the_grid(csv_file, capsys):
    assert main(["estimate", "--data", str(csv_file), "--column", "x", "--statistic", "mean", "--mechanism",
                 "laplace", "--epsilon", "1", "--sensitivity", "1", "--seed", "1", "--secure", "--json"]) == 0
    value = json.loads(capsys.readouterr().out)["value"]
    assert (value * 2**20) == int(value * 2**20)


def test_estimate_gaussian_needs_delta(csv_file, capsys):
    code = main(["estimate", "--data", str(csv_file), "--column", "x", "--statistic", "mean", "--mechanism",
                 "gaussian", "--epsilon", "1", "--sensitivity", "1"])
    assert code == 2
    assert "--delta" in capsys.readouterr().err


@pytest.mark.parametrize("content,extra,match", [
    ("x\n1\nnan\n", [], "not finite"),
    ("x\n1\nabc\n", [], "is not a number"),
    ("x\n", [], "no data rows"),
    ("", [], "empty"),
    ("x\n1\n2\n", ["--column", "nope"], "is not in"),
    ("x,x\n1,2\n", [], "names column 'x' 2 times"),
    ("x\n0.2,9\n0.3\n", [], "line 2: 2 cell(s) under a header of 1 column(s)"),
    ("x,y\n1,2\n3\n", [], "line 3: 1 cell(s) under a header of 2 column(s)"),
    ("x\n1\n2\n", ["--sensitivity-missing"], "--sensitivity"),
])
def test_estimate_bad_input_exits_nonzero_with_a_message(tmp_path, capsys, content, extra, match):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    args = ["estimate", "--data", str(path), "--column", "x", "--statistic", "mean", "--mechanism", "laplace",
            "--epsilon", "1"]
    if extra == ["--sensitivity-missing"]:
        extra = []
    else:
        args += ["--sensitivity", "1"]
    if extra[:1] == ["--column"]:
        args[args.index("--column") + 1] = extra[1]
    assert main(args) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("flag,value", [("--epsilon", "0"), ("--epsilon", "nan"), ("--delta", "1.5"),
                                        ("--sensitivity", "-1")])
def test_bad_parameters_are_rejected_by_the_parser(csv_file, capsys, flag, value):
    args = ["estimate", "--data", str(csv_file), "--column", "x", "--statistic", "mean", "--mechanism",
            "gaussian", "--epsilon", "1", "--delta", "1e-6", "--sensitivity", "1"]
    args[args.index(flag) + 1] = value
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main(["estimate", "--data", str(tmp_path / "none.csv"), "--column", "x", "--statistic", "mean",
                 "--mechanism", "laplace", "--epsilon", "1", "--sensitivity", "1"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("seed", [str(2**63), str(2**70), "-1", "1.5"])
def test_an_out_of_range_seed_is_a_clean_error(csv_file, seed):
    # Through a real process: exit 2 and one message, no traceback (an OverflowError used to escape).
    code, out, err = _run_cli("estimate", "--data", str(csv_file), "--column", "x", "--statistic", "mean",
                              "--mechanism", "laplace", "--epsilon", "1", "--sensitivity", "1", "--seed", seed)
    assert code == 2 and "--seed" in err and "Traceback" not in err
    code, _, err = _run_cli("audit", "laplace", "--seed", seed, "--samples", "10")
    assert code == 2 and "--seed" in err and "Traceback" not in err


@pytest.mark.parametrize("lower,upper,match", [("1", "0", "--lower must be below --upper"),
                                               ("0", "nan", "--upper must be finite"),
                                               ("0", "inf", "--upper must be finite")])
def test_a_bad_public_range_is_named(csv_file, capsys, lower, upper, match):
    args = ["estimate", "--data", str(csv_file), "--column", "x", "--statistic", "mean", "--mechanism",
            "sens-o-matic", "--epsilon", "1", "--lower", lower, "--upper", upper]
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("mechanism,extra,match", [
    ("laplace", ["--sensitivity", "1", "--delta", "1e-6", "--max-depth", "3"], "does not use --delta, --max-depth"),
    ("piecewise-laplace", ["--lower", "0", "--upper", "30", "--sensitivity", "5"], "does not use --sensitivity"),
    ("piecewise-laplace", ["--lower", "0", "--upper", "30", "--secure"],
     "secure .*release path exists for: gaussian-mechanism, laplace-mechanism"),
    ("sens-o-matic", ["--lower", "0", "--upper", "30", "--secure"], "does not use --secure"),
])
def test_options_a_mechanism_does_not_use_are_refused(csv_file, capsys, mechanism, extra, match):
    import re

    args = ["estimate", "--data", str(csv_file), "--column", "x", "--statistic", "median", "--mechanism", mechanism,
            "--epsilon", "1", *extra]
    assert main(args) == 2
    assert re.search(match, capsys.readouterr().err)
