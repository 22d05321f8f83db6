"""Every study alias the README documents runs its study (the study function stubbed: this checks the dispatch)."""

import pathlib
import re
import subprocess
import sys

import pytest

from gpuprivacy.reproduce import _registry, list_studies, register_study, reproduce

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _documented_aliases() -> dict[str, str]:
    """alias -> study, from the README's table of studies (`| `name` | `alias` | what |`)."""
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| `([a-z0-9-]+)` \|", (ROOT / "README.md").read_text(), flags=re.M)
    return {alias: name for name, alias in rows}


DOCUMENTED = _documented_aliases()


def test_the_readme_documents_every_registered_alias():
    registered = {alias: s.name for s in list_studies() for alias in s.aliases}
    assert DOCUMENTED == registered
    assert {"seed000", "seed001", "seed002", "seed003", "seed004"} <= set(DOCUMENTED)


@pytest.mark.parametrize("alias", sorted(DOCUMENTED))
def test_each_documented_alias_runs_its_study(alias, tmp_path, monkeypatch):
    ran = []
    study = _registry._STUDIES[DOCUMENTED[alias]]
    monkeypatch.setitem(_registry._STUDIES, DOCUMENTED[alias],
                        study._replace(fn=lambda folder, **kw: ran.append(folder.name) or {}))
    monkeypatch.setattr(_registry, "require_matplotlib", lambda: None)
    folders = reproduce(alias, quick=True, out_dir=tmp_path, progress=False)
    assert ran == [DOCUMENTED[alias]] and [f.name for f in folders] == ran


def test_a_study_cannot_list_its_own_name_as_an_alias():
    with pytest.raises(ValueError, match="lists its own name as an alias"):
        register_study("test-self-alias", lambda *a, **k: {}, "x", aliases=("test-self-alias",))


def test_the_cli_resolves_seed001():
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", "reproduce", "--list"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "seed001" in proc.stdout
