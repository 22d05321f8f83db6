"""gp.sweeps.read_results: a results file as one flat pandas DataFrame, one column per axis and metric."""

import json

import pytest

from gpuprivacy import sweeps

pandas = pytest.importorskip("pandas")


def test_one_row_per_cell_and_a_column_per_axis_and_metric(tmp_path):
    config = {"name": "frame", "seed": 2, "trials": 4,
              "mechanism": {"name": "laplace-median", "epsilon": [0.5, 1.0], "lower": -5.0, "upper": 5.0,
                            "clip": True},
              "dataset": {"name": "normal", "n": [7, 9]}}
    path = tmp_path / "frame.jsonl"
    summary = sweeps.run_sweep(config, results_path=path, progress=False)
    frame = sweeps.read_results(path)
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 4 == len(summary.rows)
    for column in ("mechanism", "dataset", "epsilon", "n", "num_trials", "seed", "config_digest", "mae", "mae_se",
                   "abs_error_q50", "guarantee", "guarantee_epsilon"):
        assert column in frame.columns, column
    assert not any(isinstance(v, dict) for v in frame.iloc[0].tolist())  # flat
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    by_id = frame.set_index("cell_id")
    for row in rows:
        assert by_id.loc[row["cell_id"], "mae"] == row["metrics"]["mae"]
        assert by_id.loc[row["cell_id"], "epsilon"] == row["mechanism_params"]["epsilon"]
        assert by_id.loc[row["cell_id"], "guarantee"] == row["guarantee"]["type"]
    assert sorted(frame.groupby("epsilon")["mae"].count().tolist()) == [2, 2]
    assert list(sweeps.flat_rows(path)[0]) == list(frame.columns)
