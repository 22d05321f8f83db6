"""The command line keeps JAX's persistent compilation cache: the second run reads its programs back."""

import json
import os
import subprocess
import sys

import pytest

ARGS = ["estimate", "--column", "x", "--statistic", "median", "--mechanism", "piecewise-laplace", "--lower", "0",
        "--upper", "30", "--epsilon", "1", "--seed", "5", "--json"]


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("x\n" + "".join(f"{i}\n" for i in range(1, 21)))
    return path


def _run(csv_file, env_cache, home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env.update(XDG_CACHE_HOME=str(home), GPUPRIVACY_COMPILATION_CACHE=env_cache)
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", *ARGS, "--data", str(csv_file)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _files(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_rerun_reads_every_program_back_and_releases_the_same(csv_file, tmp_path):
    folder = tmp_path / "home" / "gpuprivacy" / "xla"  # the default: $XDG_CACHE_HOME/gpuprivacy/xla
    first = _run(csv_file, "", tmp_path / "home")
    written = _files(folder)
    assert written, "the first run cached no program"
    second = _run(csv_file, "", tmp_path / "home")
    assert _files(folder) == written  # nothing compiled (nothing new written) the second time
    assert second == first  # a cached executable releases bitwise the same


def test_the_cache_can_be_turned_off_or_moved(csv_file, tmp_path):
    off = _run(csv_file, "off", tmp_path / "home-off")
    assert _files(tmp_path / "home-off") == []
    moved = tmp_path / "elsewhere"
    assert _run(csv_file, str(moved), tmp_path / "home-moved") == off
    assert _files(moved) and _files(tmp_path / "home-moved") == []
