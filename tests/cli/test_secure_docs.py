"""docs/secure.md's table agrees with the CLI and the API.

Every ``gpuprivacy estimate --mechanism`` choice has a row; the rows marked
"yes" are exactly the choices the CLI runs with ``--secure`` and exactly the
public release functions that take ``secure``; every public release function
of ``gpuprivacy.mechanisms`` is named in the document.
"""

import inspect
import re
from pathlib import Path

import pytest

from gpuprivacy import mechanisms
from gpuprivacy.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "secure.md"
NO_CLI = "—"


def _table():
    """The rows of the table whose header has a ``CLI `--mechanism``` column, as dicts by header."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|") and "CLI `--mechanism`" in line)
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == len(header), f"a row of docs/secure.md has {len(cells)} cells, not {len(header)}: {line}"
        rows.append(dict(zip(header, cells)))
    return rows


def _secure(row):
    verdict = row["secure path"]
    assert verdict.startswith(("**yes**", "**no**")), f"the secure path cell must start with **yes** or **no**: {row}"
    return verdict.startswith("**yes**")


def _cli_name(row):
    cell = row["CLI `--mechanism`"]
    if cell == NO_CLI:
        return None
    match = re.fullmatch(r"`([a-z-]+)`", cell)
    assert match, f"the CLI cell must be one `name` or {NO_CLI}: {cell!r}"
    return match.group(1)


def _resolve(name):
    namespace, _, attribute = name.rpartition(".")
    module = getattr(mechanisms, namespace) if namespace else mechanisms
    return getattr(module, attribute)


def _api_functions(row):
    names = re.findall(r"`([a-z_][a-z_.]*)`", row["mechanism (API)"])
    return {_resolve(name) for name in names if "*" not in name}


def _public_release_functions():
    """{function: its public names} for the key-first functions of gpuprivacy.mechanisms and its family namespaces."""
    found = {}
    namespaces = [("", mechanisms)] + [(f"{name}.", module) for name, module in
                                       inspect.getmembers(mechanisms, inspect.ismodule) if not name.startswith("_")]
    for prefix, namespace in namespaces:
        for name, fn in inspect.getmembers(namespace, inspect.isfunction):
            if not name.startswith("_") and list(inspect.signature(fn).parameters)[:1] == ["key"]:
                found.setdefault(fn, set()).add(prefix + name)
    return found


def _cli_choices(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--data", "unused.csv", "--column", "x", "--statistic", "median", "--mechanism",
              "no-such-mechanism", "--epsilon", "1"])
    choices = re.search(r"invalid choice: .*\(choose from (.*)\)", capsys.readouterr().err).group(1)
    return {choice.strip().strip("'\"") for choice in choices.split(",")}


def _cli_runs_with_secure(capsys, tmp_path, name) -> bool:
    """Whether ``--secure`` gets past the option check (it is refused before the data is read)."""
    code = main(["estimate", "--data", str(tmp_path / "missing.csv"), "--column", "x", "--statistic", "median",
                 "--mechanism", name, "--epsilon", "1", "--secure"])
    err = capsys.readouterr().err
    assert code == 2  # the data file does not exist, so every run stops with an error
    if "does not use --secure" in err:
        assert "docs/secure.md" in err, err  # the refusal points to the table
        return False
    assert "no such file" in err, err
    return True


def test_the_table_has_a_row_for_every_cli_mechanism(capsys):
    choices = _cli_choices(capsys)
    assert {"laplace-mechanism", "gaussian-mechanism", "blackbox-estimate"} <= choices  # the parse works
    listed = [_cli_name(row) for row in _table() if _cli_name(row) is not None]
    assert sorted(listed) == sorted(choices)  # each choice exactly once


def test_yes_rows_are_exactly_the_cli_mechanisms_that_run_with_secure(capsys, tmp_path):
    choices = _cli_choices(capsys)
    runs = {name for name in choices if _cli_runs_with_secure(capsys, tmp_path, name)}
    assert "laplace-mechanism" in runs and "sens-o-matic" not in runs  # the detection works both ways
    marked = {_cli_name(row) for row in _table() if _secure(row) and _cli_name(row) is not None}
    assert marked == runs


def test_yes_rows_are_exactly_the_release_functions_that_take_secure():
    with_secure = {fn for fn in _public_release_functions() if "secure" in inspect.signature(fn).parameters}
    assert mechanisms.laplace_mechanism in with_secure  # the introspection works
    marked = set().union(*(_api_functions(row) for row in _table() if _secure(row)))
    assert marked == with_secure
    unmarked = set().union(*(_api_functions(row) for row in _table() if not _secure(row)))
    assert not unmarked & with_secure


def test_every_public_release_function_is_named_in_the_document():
    text = DOC.read_text()
    named = set(re.findall(r"`([a-z_][a-z_.]*)`", text))
    missing = sorted(min(names) for names in _public_release_functions().values() if not names & named)
    assert not missing, f"docs/secure.md does not say whether these releases have a secure path: {missing}"
