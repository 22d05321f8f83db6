"""The study engine: any public mechanism swept by name, on data drawn on the device, compiled once."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import tomllib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import datasets, sweeps
from gpuprivacy.cli import main
from gpuprivacy.mechanisms import instance_optimal
from gpuprivacy.sweeps import SweepConfigError, run_sweep
from gpuprivacy.sweeps import _trials
from tests._helpers import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIVE_MEDIANS = ["piecewise-laplace-median", "inverse-sensitivity-median", "exponential-mechanism-median",
                "smooth-sensitivity-median", "private-median"]


def median_config(**overrides):
    config = {
        "name": "study-test", "seed": 11, "trials": 24,
        "mechanism": {"name": "piecewise-laplace-median", "epsilon": [0.5, 2.0], "lower": -5.0, "upper": 5.0,
                      "clip": True},
        "dataset": {"name": "normal", "n": 33},
    }
    config.update(overrides)
    return config


def test_a_public_mechanism_sweeps_by_name_with_its_guarantee_and_errors(tmp_path):
    summary = run_sweep(median_config(), results_path=tmp_path / "r.jsonl", progress=False)
    assert summary.num_computed == 2
    for row in summary.rows:
        epsilon = row["mechanism_params"]["epsilon"]
        assert row["guarantee"] == {"type": "PureDP", "epsilon": epsilon, "neighbours": "swap"}  # read off the release
        assert row["metrics"]["epsilon"] == epsilon and row["metrics"]["delta"] == 0.0
        assert row["metrics"]["released"] == 1.0 and row["population_value"] == 0.0
        assert 0 < row["metrics"]["mae"] < row["metrics"]["abs_error_q99"] + 1e-12
        assert row["n"] == 33 and row["git_sha"] and row["jax_version"]
    # more privacy, more error (24 trials; the gap is far beyond the noise at these epsilons)
    low, high = (r["metrics"]["population_mae"] for r in summary.rows)
    assert low > high


def test_the_released_values_are_the_public_mechanism_s_own(tmp_path):
    """Trial i = the public function called with trial i's keys on trial i's data (nothing re-implemented)."""
    dist = datasets.distribution("normal")
    spec = sweeps.DataSpec("normal", 17, {"loc": 0.0, "scale": 1.0}, distribution=dist)
    mech = sweeps._mechanisms.builtin_sweepables()["piecewise-laplace-median"]
    params = dict(epsilon=1.0, lower=-5.0, upper=5.0, clip=True)
    key = jax.random.key(3)
    out = _trials.run_cell(mech, params, spec, key, 5, chunk=8)
    for i, trial_key in enumerate(jax.random.split(key, 5)):
        data_key, mechanism_key = jax.random.split(trial_key)
        x = dist.draw(data_key, (17,), loc=0.0, scale=1.0)
        expected = instance_optimal.piecewise_laplace_median(mechanism_key, x, **params)
        assert float(out.values[i]) == pytest.approx(float(expected.value), rel=1e-12, abs=1e-12)
        assert float(out.targets[i]) == float(jnp.sort(x)[8])  # the left median, rank ceil(n/2)


@pytest.mark.parametrize("mechanism, key, value, match", [
    ("piecewise-laplace-median", "epsilon_typo", 1.0, "not a parameter of mechanism 'piecewise-laplace-median'"),
    ("piecewise-laplace-median", "epsilon", "one", "must be a real number"),
    ("piecewise-laplace-median", "clip", 1, "must be true or false"),
    ("smooth-sensitivity-median", "noise", 3, "must be a string"),
])
def test_a_typo_or_a_wrong_type_is_an_error_naming_the_parameter(tmp_path, mechanism, key, value, match):
    config = median_config()
    config["mechanism"] = dict(config["mechanism"], name=mechanism, **{key: value})
    with pytest.raises(SweepConfigError, match=match):
        run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    assert not (tmp_path / "r.jsonl").exists() or (tmp_path / "r.jsonl").read_text() == ""


def test_a_value_the_mechanism_refuses_is_an_error_naming_the_cell_before_any_cell_runs(tmp_path):
    config = median_config()
    config["mechanism"] = dict(config["mechanism"], epsilon=[1.0, -1.0])
    with pytest.raises(SweepConfigError, match=r"the cell .*epsilon.*-1\.0.* is refused by piecewise-laplace-median"):
        run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    assert (tmp_path / "r.jsonl").read_text() == ""  # not even the valid cell ran
    config["mechanism"] = dict(config["mechanism"], epsilon=1.0, lower=5.0, upper=-5.0)
    with pytest.raises(SweepConfigError, match="lower"):
        run_sweep(config, results_path=tmp_path / "r2.jsonl", progress=False)


def test_a_20_point_epsilon_grid_compiles_once(tmp_path):
    traced_epsilons = []

    def counted_median(key, data, *, epsilon: float, lower: float, upper: float, clip: bool = False):
        """A user's mechanism: the public PLM median, counting how often it is traced with a traced epsilon."""
        if isinstance(epsilon, jax.core.Tracer):
            traced_epsilons.append(1)
        return instance_optimal.piecewise_laplace_median(key, data, epsilon=epsilon, lower=lower, upper=upper,
                                                         clip=clip)

    name = sweeps.register_mechanism(counted_median, target="median", name="counted-median-test", replace=True)
    grid = [float(e) for e in np.geomspace(0.1, 10.0, 20)]
    config = median_config(trials=8, mechanism={"name": name, "epsilon": grid, "lower": -50.0, "upper": 50.0},
                           dataset={"name": "laplace", "n": 41})
    before = _trials.COMPILE_COUNT[0]
    summary = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    assert summary.num_computed == 20
    assert _trials.COMPILE_COUNT[0] - before == 2  # one draw program, one mechanism program, for 20 epsilons
    assert summary.num_programs_compiled == 2  # what the summary (and the CLI) reports
    assert summary.compile_s == pytest.approx(sum(r["metrics"]["compile_s"] for r in summary.rows), rel=1e-9)
    again = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)  # all cells found: nothing run
    assert again.num_computed == 0 and again.num_programs_compiled == 0 and again.compile_s == 0.0
    assert len(traced_epsilons) <= 4  # the probe and the one program: independent of the grid's length
    assert [r["metrics"]["epsilon"] for r in summary.rows] == grid
    # The 20 cells ran as one block (same datasets) and one program: its compile time is shared evenly.
    assert len({r["metrics"]["compile_s"] for r in summary.rows}) == 1 and summary.rows[0]["metrics"]["compile_s"] > 0


def test_results_do_not_depend_on_the_chunk():
    dist = datasets.distribution("cauchy")
    spec = sweeps.DataSpec("cauchy", 29, {"loc": 0.0, "scale": 1.0}, distribution=dist)
    mech = sweeps._mechanisms.builtin_sweepables()["exponential-mechanism-median"]
    params = dict(epsilon=1.0, lower=-5.0, upper=5.0, clip=True)
    a = _trials.run_cell(mech, params, spec, jax.random.key(5), 40, chunk=8)
    b = _trials.run_cell(mech, params, spec, jax.random.key(5), 40, chunk=64)
    assert a.chunk == 8 and b.chunk == 64
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.targets, b.targets)


def test_fixed_data_per_cell_or_fresh_per_trial(tmp_path):
    config = median_config(trials=16, dataset={"name": "normal", "n": 25, "fresh": [True, False]})
    config["mechanism"] = dict(config["mechanism"], epsilon=1.0)
    rows = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False).rows
    dist = datasets.distribution("normal")
    spec = sweeps.DataSpec("normal", 25, {"loc": 0.0, "scale": 1.0}, distribution=dist, fresh=False)
    mech = sweeps._mechanisms.builtin_sweepables()["piecewise-laplace-median"]
    fixed = _trials.run_cell(mech, dict(epsilon=1.0, lower=-5.0, upper=5.0, clip=True), spec, jax.random.key(1), 16)
    assert len(set(fixed.targets.tolist())) == 1  # one dataset for the cell
    fresh = _trials.run_cell(mech, dict(epsilon=1.0, lower=-5.0, upper=5.0, clip=True), spec._replace(fresh=True),
                             jax.random.key(1), 16)
    assert len(set(fresh.targets.tolist())) == 16
    assert {r["dataset_params"]["fresh"] for r in rows} == {True, False}


def test_max_trials_caps_every_cell(tmp_path):
    summary = run_sweep(median_config(trials=[24, 1000]), results_path=tmp_path / "r.jsonl", progress=False,
                        max_trials=5)
    assert {r["num_trials"] for r in summary.rows} == {5}
    assert summary.num_cells == 2  # 24 and 1000 both capped to 5: one cell each epsilon


def test_user_metric_and_coverage_radius(tmp_path):
    sweeps.register_metric("max-abs-error-test", lambda t, p: float(np.max(np.abs(t.values - t.targets))),
                           replace=True)
    config = median_config(metrics=["max-abs-error-test"], coverage_radius=0.5)
    rows = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False).rows
    for row in rows:
        m = row["metrics"]
        assert m["max-abs-error-test"] >= m["abs_error_q99"] and 0 <= m["coverage"] <= 1
        assert row["options"] == {"metrics": ["max-abs-error-test"], "coverage_radius": 0.5}
    with pytest.raises(SweepConfigError, match="not a registered metric"):
        run_sweep(median_config(metrics=["nope"]), results_path=tmp_path / "x.jsonl", progress=False)


def test_selection_mechanisms_report_selection_accuracy(tmp_path):
    config = {"name": "sel", "seed": 1, "trials": 64,
              "mechanism": {"name": ["exponential-mechanism", "permute-and-flip"], "epsilon": [0.1, 50.0]},
              "dataset": {"name": "scores-gap", "n": 6, "gap": 1.0, "fresh": True}}
    rows = run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False).rows
    for row in rows:
        accuracy = row["metrics"]["selection_accuracy"]
        if row["mechanism_params"]["epsilon"] == 50.0:
            assert accuracy == 1.0  # gap 1 at epsilon 50: the planted best wins every time
        else:
            assert 0.0 < accuracy < 0.6  # near uniform over 6 (1/6 + a little)


def test_list_shows_every_sweepable_mechanism_dataset_and_metric(capsys):
    assert main(["sweep", "--list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    for name in FIVE_MEDIANS:
        assert name in listing["mechanisms"], name
    assert listing["mechanisms"]["private-median"]["parameters"]["min_density"] == "REQUIRED"
    for name in ("normal", "uniform", "laplace", "cauchy", "student-t", "normal-mixture", "lower-bound-mixture",
                 "scores-gap", "bikes-daily"):
        assert name in listing["datasets"], name
    assert {"mae", "mse", "coverage", "selection_accuracy", "epsilon", "time_per_trial_s"} <= set(listing["metrics"])
    assert "sens-o-matic" in listing["mechanisms"] and listing["not_sweepable"] == {}  # every one sweepable now
    assert main(["sweep", "--list"]) == 0
    assert "piecewise-laplace-median(" in capsys.readouterr().out


def test_cli_imports_a_module_that_registers_a_mechanism(tmp_path, capsys):
    module = tmp_path / "my_mechanisms.py"
    module.write_text(textwrap.dedent('''
        from gpuprivacy import sweeps
        from gpuprivacy.mechanisms import instance_optimal

        def my_median(key, data, *, epsilon: float):
            return instance_optimal.piecewise_laplace_median(key, data, epsilon=epsilon, lower=-3.0, upper=3.0,
                                                             clip=True)

        sweeps.register_mechanism(my_median, target="median", replace=True)
    '''))
    config = tmp_path / "mine.toml"
    config.write_text('name = "mine"\nseed = 1\ntrials = 8\n[mechanism]\nname = "my-median"\nepsilon = 1.0\n'
                      '[dataset]\nname = "uniform"\nn = 9\nlow = -1.0\nhigh = 1.0\n')
    assert main(["sweep", str(config), "--import", str(module), "--results", str(tmp_path / "m.jsonl"),
                 "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_computed"] == 1
    assert main(["sweep", str(config), "--import", "no_such_module_xyz"]) == 2
    assert "cannot import" in capsys.readouterr().err
    assert main(["sweep"]) == 2
    assert "--list" in capsys.readouterr().err


def test_study_report_writes_a_plot_and_a_table_from_the_results_alone(tmp_path, capsys):
    config = median_config(trials=16, dataset={"name": "normal", "n": [16, 64]})
    config["mechanism"] = dict(config["mechanism"], name=["piecewise-laplace-median", "exponential-mechanism-median"])
    results = tmp_path / "r.jsonl"
    run_sweep(config, results_path=results, progress=False)
    assert main(["study", "report", str(results), "--out", str(tmp_path / "rep"), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["x"] == "n" and written["metric"] == "mae"
    table = (tmp_path / "rep" / "report.md").read_text()
    cells, paired = table.split("## Paired differences")  # the cells' table, then the pairs (same datasets)
    assert cells.count("| piecewise-laplace-median |") == 4 and "± " in cells
    assert paired.count("| piecewise-laplace-median |") + paired.count("| exponential-mechanism-median |") == 4
    png = (tmp_path / "rep" / "mae_vs_n.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["study", "report", str(results), "--metric", "nope"]) == 2
    assert "not in" in capsys.readouterr().err


WORKER = textwrap.dedent('''
    import json, sys
    import jax, numpy as np
    from jax.sharding import Mesh
    from gpuprivacy import datasets, sweeps
    from gpuprivacy.sweeps import _trials
    assert len(jax.devices()) == 4
    dist = datasets.distribution("normal")
    spec = sweeps.DataSpec("normal", 48, {"loc": 0.0, "scale": 1.0}, distribution=dist)
    mech = sweeps._mechanisms.builtin_sweepables()["piecewise-laplace-median"]
    params = dict(epsilon=1.0, lower=-5.0, upper=5.0, clip=True)
    four = _trials.run_cell(mech, params, spec, jax.random.key(2), 64, chunk=32)
    program = [p for k, p in _trials._PROGRAMS.items() if k[0] == "mechanism"][0]
    one = _trials.run_cell(mech, params, spec, jax.random.key(2), 64, chunk=32,
                           mesh=Mesh(np.array(jax.devices()[:1]), ("trials",)))
    text = program.as_text()
    print(json.dumps({"devices": four.devices, "same": bool((four.values == one.values).all()),
                      "local_rows": "f64[8,48]" in text, "global_rows": "f64[32,48]" in text}))
''')


def test_four_devices_each_run_their_share_of_the_trials():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", WORKER], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["devices"] == 4 and result["same"]
    # The per-device program works on 32 / 4 = 8 trials' rows; no device holds the chunk's 32 rows.
    assert result["local_rows"] and not result["global_rows"]


def test_two_processes_split_the_cells_and_merge_them_in_grid_order(tmp_path):
    """jax.distributed: each process computes its share of the cells; the file equals one process's run."""
    config = median_config(trials=12, dataset={"name": "normal", "n": [33, 21]})  # two blocks of 2 cells
    results = tmp_path / "shared.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    address = f"127.0.0.1:{free_port()}"
    procs = [subprocess.Popen([sys.executable, str(ROOT / "tests" / "sweeps" / "_distributed_sweep_worker.py"),
                               address, "2", str(pid), str(results), str(tmp_path / f"p{pid}.json"),
                               json.dumps(config)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for pid in range(2)]
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err[-3000:]
    outs = [json.loads((tmp_path / f"p{pid}.json").read_text()) for pid in range(2)]
    assert [o["num_computed"] for o in outs] == [2, 2]  # each process ran one block: half of the 4 cells
    assert not list(tmp_path.glob("shared.jsonl.process*"))  # parts merged and removed
    single = run_sweep(config, results_path=tmp_path / "single.jsonl", progress=False)
    merged = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["cell_id"] for r in merged] == [r["cell_id"] for r in single.rows]  # grid order
    for a, b in zip(merged, single.rows):
        assert a["metrics"]["mae"] == b["metrics"]["mae"] and a["metrics"]["mse"] == b["metrics"]["mse"]
    assert outs[0]["rows"] == outs[1]["rows"] == merged


@pytest.mark.parametrize("path", sorted((ROOT / "experiments" / "configs").glob("*.toml")), ids=lambda p: p.stem)
def test_every_example_config_runs_in_quick_mode(tmp_path, path):
    """Each shipped config: every cell checked, then a quick run (--max-trials 2, the smallest n of each dataset)."""
    with open(path, "rb") as f:
        config = tomllib.load(f)
    assert sweeps.expand_sweep(path)
    tables = config["dataset"] if isinstance(config["dataset"], list) else [config["dataset"]]
    for table in tables:
        if isinstance(table.get("n"), list):
            table["n"] = [min(table["n"])]
    summary = run_sweep(config, results_path=tmp_path / "quick.jsonl", progress=False, max_trials=2)
    assert summary.num_computed == summary.num_cells > 0
    assert all(row["metrics"] for row in summary.rows)
    if path.stem == "five_medians":  # the study: 5 medians x 3 laws x 3 n x 3 epsilons, and its report
        assert len(sweeps.expand_sweep(path)) == 5 * 3 * 3 * 3 + 3 * 3  # and the nonprivate baseline per dataset
        assert {r["mechanism"] for r in summary.rows} == set(FIVE_MEDIANS) | {"nonprivate"}
        assert all(r["metrics"]["epsilon"] == r["mechanism_params"]["epsilon"] for r in summary.rows
                   if r["mechanism"] != "nonprivate")
        assert all(r["metrics"]["epsilon"] is None and r["guarantee"]["private"] is False for r in summary.rows
                   if r["mechanism"] == "nonprivate")
        assert main(["study", "report", str(tmp_path / "quick.jsonl"), "--x", "epsilon"]) == 0
