"""load_column: CSV, .npy, .npz and Parquet columns as float64, and every error naming the line/row and the fix."""

import sys

import numpy as np
import pytest

from gpuprivacy import datasets


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- CSV --------------------------------------------------------------------------------------------

def test_csv_reads_the_named_column_as_fresh_float64(tmp_path):
    path = _write(tmp_path, "data.csv", "id, x ,label\n1, 0.5 ,a\n\n2,-3,b\n3,1e3,c\n")
    values = datasets.load_column(path, "x")
    np.testing.assert_array_equal(values, [0.5, -3.0, 1000.0])
    assert values.dtype == np.float64 and values.flags.writeable and values.flags.owndata
    np.testing.assert_array_equal(datasets.load_column(str(path), "id"), [1.0, 2.0, 3.0])


def test_csv_single_column_needs_no_name_and_a_byte_order_mark_is_ignored(tmp_path):
    path = tmp_path / "one.csv"
    path.write_bytes("\ufeffvalue\n1\n2\n".encode("utf-8"))
    np.testing.assert_array_equal(datasets.load_column(path), [1.0, 2.0])
    np.testing.assert_array_equal(datasets.load_column(path, "value"), [1.0, 2.0])


# The CLI's own CSV cases (tests/cli/test_cli.py): the same problems give the same words here.
@pytest.mark.parametrize("content, column, match", [
    ("x\n1\nnan\n", "x", "not finite"),
    ("x\n1\nabc\n", "x", r"line 3, column 'x': 'abc' is not a number"),
    ("x\n", "x", "no data rows"),
    ("", "x", "empty"),
    ("x\n1\n2\n", "nope", r"column 'nope' is not in .*; its columns are \['x'\]"),
    ("x,x\n1,2\n", "x", "names column 'x' 2 times"),
    ("x\n0.2,9\n0.3\n", "x", r"line 2: 2 cell\(s\) under a header of 1 column\(s\)"),
    ("x,y\n1,2\n3\n", "x", r"line 3: 1 cell\(s\) under a header of 2 column\(s\)"),
    ("x,y\n1,2\n", None, r"has 2 columns \['x', 'y'\]; pass column=<name>"),
])
def test_csv_errors_name_the_line_and_the_fix(tmp_path, content, column, match):
    path = _write(tmp_path, "bad.csv", content)
    with pytest.raises(ValueError, match=match):
        datasets.load_column(path, column)


def test_csv_nonfinite_values_are_counted_with_the_first_line(tmp_path):
    path = _write(tmp_path, "data.csv", "x\n1\n2\ninf\n4\nnan\n-inf\n")
    with pytest.raises(ValueError, match=r"3 value\(s\) are not finite \(NaN or inf\); the first is 'inf' on line 4"
                                         r".*allow_nonfinite=True"):
        datasets.load_column(path, "x")
    values = datasets.load_column(path, "x", allow_nonfinite=True)
    assert values.shape == (6,) and np.isposinf(values[2]) and np.isnan(values[4]) and np.isneginf(values[5])


# --- NumPy ------------------------------------------------------------------------------------------

def test_npy_1d_and_2d_columns(tmp_path):
    np.save(tmp_path / "ints.npy", np.arange(4, dtype=np.int32))
    values = datasets.load_column(tmp_path / "ints.npy")
    assert values.dtype == np.float64 and values.tolist() == [0.0, 1.0, 2.0, 3.0]
    np.save(tmp_path / "table.npy", np.arange(6.0).reshape(3, 2))
    assert datasets.load_column(tmp_path / "table.npy", 1).tolist() == [1.0, 3.0, 5.0]
    np.save(tmp_path / "bools.npy", np.array([[True], [False]]))
    assert datasets.load_column(tmp_path / "bools.npy").tolist() == [1.0, 0.0]
    source = np.array([1.0, 2.0])
    np.save(tmp_path / "copy.npy", source)
    values = datasets.load_column(tmp_path / "copy.npy")
    values[0] = 9.0
    assert datasets.load_column(tmp_path / "copy.npy")[0] == 1.0


@pytest.mark.parametrize("array, column, error, match", [
    (np.arange(6.0).reshape(3, 2), None, ValueError, r"shape \(3, 2\); pass column=<index in 0..1>"),
    (np.arange(6.0).reshape(3, 2), 2, ValueError, r"column 2 is out of range.*0..1"),
    (np.arange(3.0), 0, ValueError, r"1-d array of shape \(3,\); pass column=None"),
    (np.zeros((2, 2, 2)), None, ValueError, r"shape \(2, 2, 2\).*Reshape or slice"),
    (np.arange(3.0), "x", TypeError, r"integer column index for a .npy file"),
    (np.array(["a", "b"]), None, TypeError, r"dtype <U1, not real numbers"),
    (np.array([1 + 2j]), None, TypeError, r"dtype complex128, not real numbers"),
    (np.zeros(0), None, ValueError, r"no data rows"),
    (np.array([0.0, 1.0, np.nan, 3.0, np.inf]), None, ValueError,
     r"2 value\(s\) are not finite \(NaN, inf or null\); the first is nan at row 2 \(0-based\)"),
])
def test_npy_errors(tmp_path, array, column, error, match):
    np.save(tmp_path / "bad.npy", array)
    with pytest.raises(error, match=match):
        datasets.load_column(tmp_path / "bad.npy", column)


def test_npy_object_arrays_are_refused_without_pickle(tmp_path):
    np.save(tmp_path / "objects.npy", np.array([1.0, None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"cannot be read without pickle.*np.save"):
        datasets.load_column(tmp_path / "objects.npy")


def test_npy_nonfinite_allowed_on_request(tmp_path):
    np.save(tmp_path / "nan.npy", np.array([1.0, np.nan]))
    values = datasets.load_column(tmp_path / "nan.npy", allow_nonfinite=True)
    assert values[0] == 1.0 and np.isnan(values[1])


def test_npz_needs_a_key_when_it_holds_several_arrays(tmp_path):
    np.savez(tmp_path / "many.npz", x=np.arange(3.0), y=np.ones(2, dtype=np.int64), table=np.zeros((2, 2)))
    assert datasets.load_column(tmp_path / "many.npz", "y").tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"holds 3 arrays \['x', 'y', 'table'\]; pass column=<key>"):
        datasets.load_column(tmp_path / "many.npz")
    with pytest.raises(ValueError, match=r"key 'z' is not in .*; its keys are \['x', 'y', 'table'\]"):
        datasets.load_column(tmp_path / "many.npz", "z")
    with pytest.raises(ValueError, match=r"\['table'\] has shape \(2, 2\); load_column reads a 1-d array"):
        datasets.load_column(tmp_path / "many.npz", "table")
    with pytest.raises(TypeError, match=r"the key \(str\) of an array"):
        datasets.load_column(tmp_path / "many.npz", 0)
    np.savez(tmp_path / "one.npz", only=np.arange(2))
    assert datasets.load_column(tmp_path / "one.npz").tolist() == [0.0, 1.0]


# --- files and formats ------------------------------------------------------------------------------

def test_missing_files_and_unknown_formats(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"none.csv: no such file"):
        datasets.load_column(tmp_path / "none.csv", "x")
    _write(tmp_path, "data.txt", "x\n1\n")
    with pytest.raises(ValueError, match=r"suffix '.txt'. Supported: .csv, .npy, .npz, .parquet, .pq"):
        datasets.load_column(tmp_path / "data.txt", "x")
    with pytest.raises(TypeError, match="path must be a file path"):
        datasets.load_column(3, "x")
    _write(tmp_path, "data.csv", "x\n1\n")
    with pytest.raises(TypeError, match="allow_nonfinite must be True or False"):
        datasets.load_column(tmp_path / "data.csv", "x", allow_nonfinite="yes")
    with pytest.raises(TypeError, match=r"header name \(str\) for a CSV file"):
        datasets.load_column(tmp_path / "data.csv", 0)


def test_parquet_without_pyarrow_says_how_to_install_it(tmp_path, monkeypatch):
    for name in ("pyarrow", "pyarrow.parquet"):  # as if it were not installed (None in sys.modules: ImportError)
        monkeypatch.setitem(sys.modules, name, None)
    path = tmp_path / "data.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(ImportError, match=r"needs pyarrow, which is not installed.*`pip install pyarrow`"):
        datasets.load_column(path, "x")


def test_parquet_columns_with_pyarrow(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"x": [1.5, 2.5, None], "n": [1, 2, 3], "s": ["a", "b", "c"]}), path)
    assert datasets.load_column(path, "n").tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match=r"1 value\(s\) are not finite \(NaN, inf or null\).*row 2"):
        datasets.load_column(path, "x")
    values = datasets.load_column(path, "x", allow_nonfinite=True)
    assert values[:2].tolist() == [1.5, 2.5] and np.isnan(values[2])
    with pytest.raises(TypeError, match="not real numbers"):
        datasets.load_column(path, "s")
    with pytest.raises(ValueError, match=r"has 3 columns"):
        datasets.load_column(path)
    with pytest.raises(ValueError, match=r"column 'z' is not in"):
        datasets.load_column(path, "z")
