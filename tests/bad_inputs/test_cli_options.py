"""CLI options that were silently ignored or replaced: each is an exit-2 message naming the option, the value and
the fix, before anything is computed. Table-driven: (extra argv, message fragments)."""

from __future__ import annotations

import pytest

from gpuprivacy.cli import main

CASES = [
    ("grid-points 0 (silently became 101)",
     ["--mechanism", "sens-o-matic", "--statistic", "mean", "--lower", "0", "--upper", "1", "--grid-points", "0"],
     ("--grid-points must be at least 2", "--grid-points 0")),
    ("rho with the pure-DP design (ignored; released PureDP)",
     ["--mechanism", "blackbox", "--statistic", "median", "--lower", "0", "--upper", "1", "--rho", "1"],
     ("--rho 1.0", "--variant pure", "--variant zcdp")),
]


@pytest.mark.parametrize("extra, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_ignored_or_replaced_option_is_an_error(tmp_path, capsys, extra, fragments):
    data = tmp_path / "x.csv"
    data.write_text("x\n" + "\n".join(str(i / 20) for i in range(20)) + "\n")
    code = main(["estimate", "--data", str(data), "--column", "x", "--epsilon", "1", *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and all(f in err for f in fragments), err


@pytest.mark.parametrize("array, column", [([[0.1, 5.0], [0.2, 6.0], [0.3, 7.0]], "0"), ([0.1, 0.2, 0.3], "-")])
def test_a_npy_column_is_read_by_index(tmp_path, capsys, array, column):
    import json

    import numpy as np

    path = tmp_path / "x.npy"
    np.save(path, np.asarray(array))
    code = main(["estimate", "--data", str(path), "--column", column, "--statistic", "count", "--mechanism", "laplace",
                 "--epsilon", "1", "--sensitivity", "1", "--json"])
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["column"] == column and out["statistic"] == "count" and np.isfinite(out["value"])


def test_a_npy_column_name_is_an_error(tmp_path, capsys):
    import numpy as np

    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    code = main(["estimate", "--data", str(tmp_path / "x.npy"), "--column", "x", "--statistic", "count",
                 "--mechanism", "laplace", "--epsilon", "1", "--sensitivity", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "column index" in err and "'x'" in err and "Traceback" not in err
