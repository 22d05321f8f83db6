"""The private-median study as a whole: runs its parts, writes its folder, and registers it as
"tzamos2020-private-median" (alias "seed003")."""

from __future__ import annotations

import json
import pathlib
import time

import jax
import numpy as np

from gpuprivacy.reproduce._private_median._analytic import part_constants, part_counterexamples, part_privacy
from gpuprivacy.reproduce._private_median._baselines import part_baselines
from gpuprivacy.reproduce._private_median._config import NAME, study_config
from gpuprivacy.reproduce._private_median._plots import write_plots
from gpuprivacy.reproduce._private_median._rates import part_rates
from gpuprivacy.reproduce._private_median._report import _json_default, _write_csv, render_report
from gpuprivacy.reproduce._private_median._sample_complexity import part_sample_complexity
from gpuprivacy.reproduce._registry import register_study


def run_study(study_dir: pathlib.Path, *, quick: bool, progress: bool) -> dict:
    """Runs every part into ``study_dir`` (the registry's runner); returns the metadata's summary."""
    config = study_config(quick)
    key = jax.random.key(config["seed"])
    wall = {}
    t0 = time.perf_counter()
    counter, curves = part_counterexamples()
    wall["counterexamples"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rates = part_rates(config, study_dir, progress)
    wall["rates"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    complexity_rows, fit = part_sample_complexity(config, rates)
    baseline_rows, notes = part_baselines(config, jax.random.fold_in(key, 2), progress)
    wall["baselines"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = dict(counterexamples=counter, rates=rates,
                   sample_complexity=dict(rows=complexity_rows, fit=fit),
                   baselines=dict(rows=baseline_rows, notes=notes), privacy=part_privacy(config),
                   constants=part_constants())
    wall["privacy_and_constants"] = time.perf_counter() - t0
    # Headline checks, recorded (the tests assert them): the shortcut fails, (3.6) holds.
    results["checks"] = dict(
        shortcut_violates=all(r["restricted_log_ratio"] > r["restricted_allowance"] for r in counter),
        general_holds=all(r["general_log_ratio"] <= r["general_allowance"] + 1e-9 for r in counter)
        and results["privacy"]["max_ratio_over_eps_d"] <= 1 + 1e-9,
        mean_overflow_rate=float(np.mean([r["overflow_rate"] for r in rates])),
        mean_fast_path_rate=float(np.mean([r["fast_path_rate"] for r in rates])))
    files = write_plots(study_dir, config, rates, baseline_rows, curves)
    _write_csv(study_dir / "rates.csv", rates)
    _write_csv(study_dir / "baselines.csv", baseline_rows)
    (study_dir / "results.json").write_text(json.dumps(dict(study=NAME, config=config, results=results, plots=files,
                                                            wall_s=wall), indent=1, default=_json_default) + "\n",
                                            encoding="utf-8")
    (study_dir / "report.md").write_text(render_report(config, results), encoding="utf-8")
    return json.loads(json.dumps(dict(seed=config["seed"], parameters=config, part_wall_s=wall,
                                      checks=results["checks"]), default=_json_default))


register_study(NAME, run_study, "Optimal private median (Tzamos et al. 2020): the Case-A counterexamples, "
               "error quantiles vs n on six admissible distributions, sample complexity vs Theorem 3.1, baselines, "
               "exact privacy checks", aliases=("seed003",), replace=True)
