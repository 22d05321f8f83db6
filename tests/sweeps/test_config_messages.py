"""Config errors name the fix: a concrete example value (never a placeholder) and "did you mean" for names."""

import pytest

from gpuprivacy.sweeps import SweepConfigError, expand_sweep
from gpuprivacy.sweeps._mechanisms import builtin_sweepables


def config(mechanism, dataset=None):
    return {"name": "t", "seed": 1, "trials": 10, "mechanism": mechanism,
            "dataset": dataset or {"name": "normal", "n": 11}}


def test_every_parameter_example_is_a_value():
    for name, entry in builtin_sweepables().items():
        for pname, spec in entry.parameters.items():
            assert spec.example.startswith(f"{pname} = "), (name, spec.example)
            assert "..." not in spec.example and spec.example != f"{pname} = ", (name, spec.example)


def test_a_string_epsilon_gets_a_number_as_the_example():
    with pytest.raises(SweepConfigError) as err:
        expand_sweep(config({"name": "laplace-median", "epsilon": "1.0", "lower": -5.0, "upper": 5.0}))
    message = str(err.value)
    assert "For example: epsilon = 1.0." in message and "...." not in message


def test_a_required_parameter_gets_a_value_as_the_example():
    with pytest.raises(SweepConfigError, match=r"requires\. Add e\.g\. epsilon = 1\.0\.$"):
        expand_sweep(config({"name": "laplace-median", "lower": -5.0, "upper": 5.0}))


@pytest.mark.parametrize("given, suggested", [
    ("private_median", None),  # the Python name is accepted
    ("piecewise-laplace-medain", "piecewise-laplace-median"),  # a typo
    ("plm-median", "piecewise-laplace-median"),  # the auditor's older name
    ("gaussian-analytic", "gaussian-mechanism"),  # an auditor configuration's older name
])
def test_mechanism_names_did_you_mean(given, suggested):
    mechanism = {"name": given, "epsilon": 1.0, "lower": -5.0, "upper": 5.0}
    if suggested is None:
        cells = expand_sweep(config({**mechanism, "min_density": 0.1, "radius": 1.0, "median_bound": 5.0}))
        assert {c.mechanism for c in cells} == {given.replace("_", "-")}
        return
    with pytest.raises(SweepConfigError, match=f"Did you mean '{suggested}'"):
        expand_sweep(config(mechanism))


def test_parameter_and_dataset_names_did_you_mean():
    with pytest.raises(SweepConfigError, match="Did you mean 'epsilon'"):
        expand_sweep(config({"name": "laplace-median", "epsilonn": 1.0, "lower": -5.0, "upper": 5.0}))
    with pytest.raises(SweepConfigError, match="Did you mean 'normal'"):
        expand_sweep(config({"name": "laplace-median", "epsilon": 1.0, "lower": -5.0, "upper": 5.0},
                            {"name": "normall", "n": 11}))


def test_sweep_json_prints_the_summary_not_the_rows(tmp_path, capsys):
    import json

    from gpuprivacy.cli import main

    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nseed = 1\ntrials = 4\n[mechanism]\nname = "laplace-median"\nepsilon = 1.0\n'
                      'lower = -5.0\nupper = 5.0\nclip = true\n[dataset]\nname = "normal"\nn = 7\n')
    results = tmp_path / "tiny.jsonl"
    assert main(["sweep", str(config), "--results", str(results), "--no-progress", "--json"]) == 0
    out = capsys.readouterr().out
    payload = json.loads(out)
    assert "rows" not in payload and payload["num_rows"] == 1 == len(results.read_text().splitlines())
    assert out.count("\n") == 1 and len(out) < 2000
