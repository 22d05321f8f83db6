"""``gpuprivacy sweep --plan`` lists what a run would do; a rerun reads every program back and compiles none."""

import json
import os
import subprocess
import sys
import types

import pytest

CONFIG = """
name = "plan-test"
seed = 7
trials = 16
[[mechanism]]
name = ["piecewise-laplace-median", "exponential-mechanism-median"]
epsilon = [0.5, 2.0]
lower = -10.0
upper = 10.0
clip = true
[dataset]
name = "normal"
n = [20, 100]
"""
# n = 100 with 16 trials on purpose: on CPU a program that sorts 1024 or more values (the batch counts) runs
# NumPy's sort inside the program (gpuprivacy/_sort.py). It does so through a named FFI target, which the
# compilation cache keeps; a Python callback there would make the rerun compile those programs again.


def _sweep(config, results, cache, *extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["GPUPRIVACY_COMPILATION_CACHE"] = str(cache)
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", "sweep", str(config), "--results", str(results),
                           "--json", "--no-progress", *extra], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def first_sweep(tmp_path_factory):
    """The whole grid planned, then swept once into a compilation cache of its own (empty before): the tests
    below check that run and read its cache back, so the grid compiles once for the module, not once per test."""
    folder = tmp_path_factory.mktemp("first-sweep")
    config = folder / "plan.toml"
    config.write_text(CONFIG)
    results, cache = folder / "first.jsonl", folder / "xla"
    plan = _sweep(config, results, cache, "--plan")
    wrote = results.exists()
    run = _sweep(config, results, cache)
    return types.SimpleNamespace(config=config, results=results, cache=cache, plan=plan, plan_wrote=wrote, run=run)


def test_the_plan_lists_the_cells_and_the_programs_a_run_then_compiles(first_sweep):
    plan = first_sweep.plan
    assert not first_sweep.plan_wrote  # a dry run writes nothing
    assert (plan["num_cells"], plan["num_done"], plan["num_to_run"]) == (8, 0, 8)
    assert plan["num_trials"] == 8 * 16
    # Per n: one draw and one program per mechanism (the epsilon grid is traced): 2 x (1 + 2).
    assert plan["num_programs"] == 6
    assert [len(b["cells"]) for b in plan["blocks"]] == [4, 4]
    assert first_sweep.run["num_programs_compiled"] == plan["num_programs"]  # the plan counts what the engine compiles
    again = _sweep(first_sweep.config, first_sweep.results, "off", "--plan")
    assert (again["num_done"], again["num_to_run"], again["num_programs"]) == (8, 0, 0)


def test_a_rerun_compiles_no_program(first_sweep, tmp_path):
    first = first_sweep.run
    assert first["num_programs_compiled"] == 6 and first["num_programs_loaded"] == 0
    # A new results file: every cell is computed again, from programs read back from the cache.
    second = _sweep(first_sweep.config, tmp_path / "second.jsonl", first_sweep.cache)
    assert second["num_computed"] == 8
    assert second["num_programs_compiled"] == 0, second
    assert second["num_programs_loaded"] == 6

    def metrics(path):
        return [json.loads(line)["metrics"]["mae"] for line in path.read_text().splitlines()]
    assert metrics(tmp_path / "second.jsonl") == metrics(first_sweep.results)  # bitwise the same releases


def test_a_sweep_reads_back_the_programs_of_another_sweep_that_shared_its_cells(first_sweep, tmp_path):
    """A config with only the n = 100 cells, after the whole grid: all three of its programs come from the
    cache. (Before the checks' error codes depended on their messages alone, its two mechanism programs held
    other codes, since the n = 20 programs were traced first the first time, and were compiled again.)"""
    part = tmp_path / "part.toml"
    part.write_text(CONFIG.replace("n = [20, 100]", "n = [100]"))
    second = _sweep(part, tmp_path / "part.jsonl", first_sweep.cache)
    assert second["num_computed"] == 4
    assert (second["num_programs_compiled"], second["num_programs_loaded"]) == (0, 3), second


def test_the_plan_refuses_what_a_run_refuses(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(CONFIG.replace("epsilon = [0.5, 2.0]", "epsilon = [-1.0]"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", "sweep", str(bad), "--plan"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "epsilon" in proc.stderr
