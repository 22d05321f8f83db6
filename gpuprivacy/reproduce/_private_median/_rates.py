"""The ``rates`` part of the private-median study: error quantiles of the private median (3.6) vs n.

The part is sweep configs (:func:`rates_sweep_configs`) run by :func:`gpuprivacy.sweeps.run_sweep`; each row
reads one cell's population-error quantiles and route metrics.
"""

from __future__ import annotations

import pathlib

from gpuprivacy.reproduce._private_median._config import _chunk, _trials_at, sweep_datasets
from gpuprivacy.sweeps import run_sweep

# The user metrics of the private median's routes, registered by gpuprivacy.sweeps at import: the fractions of
# a cell's trials whose release's info.nonprivate_route is the certified fast path / the full overflow route.
FAST_PATH_METRIC, OVERFLOW_METRIC = "private-median-fast-path-rate", "private-median-overflow-rate"
# The engine's population-error quantiles, by the quantile level 1 - beta that the study reports as error_q90.
_POPULATION_QUANTILES = {0.5: "population_abs_error_q50", 0.9: "population_abs_error_q90",
                         0.99: "population_abs_error_q99"}
RATES_NAME = "private_median_rates"


def rates_sweep_configs(config) -> list[dict]:
    """The rates part as sweep configs (dicts for :func:`gpuprivacy.sweeps.run_sweep`), one per number of trials.

    A config's ``trials`` is one number for its whole grid, and the full mode caps trials at large n
    (:func:`_trials_at`), so the grid is split by trials: the first config holds every n that runs all
    ``trials`` (in full mode, ``experiments/configs/private_median_rates.toml`` without its two largest n;
    tests/reproduce checks it), the others the capped n. Each config is private-median x epsilon x
    :func:`sweep_datasets` x n, with the route metrics.
    """
    groups: dict[int, list[int]] = {}
    for n in config["ns"]:
        groups.setdefault(_trials_at(config, n), []).append(int(n))
    laws = sweep_datasets(config)
    mechanism = {"name": "private-median", "epsilon": [float(e) for e in config["epsilons"]],
                 "min_density": float(config["min_density"]), "radius": float(config["radius"]),
                 "median_bound": float(config["median_bound"]), "constant": float(config["constant"])}
    out = []
    for trials, ns in sorted(groups.items(), key=lambda item: -item[0]):
        out.append({"name": RATES_NAME if trials == config["trials"] else f"{RATES_NAME}_trials{trials}",
                    "seed": int(config["seed"]), "trials": int(trials),
                    "metrics": [FAST_PATH_METRIC, OVERFLOW_METRIC], "mechanism": [dict(mechanism)],
                    "dataset": [{"name": laws[dist][0], "n": list(ns), **laws[dist][1]}
                                for dist in config["distributions"]]})
    return out


def _rates_file(config, sweep) -> str:
    """The JSON-lines rows of one rates sweep in the study folder: the quick and the full run keep their own files
    (a results file holds one config), so a rerun of the same mode into the folder resumes."""
    suffix = "" if sweep["trials"] == config["trials"] else f"_trials{sweep['trials']}"
    return f"rates{suffix}{'_quick' if config['quick'] else ''}.jsonl"


def part_rates(config, study_dir, progress):
    """Error quantiles of the private median: the sweeps of :func:`rates_sweep_configs` on the study engine.

    Every cell's keys come from the seed and the cell's own parameters (:func:`gpuprivacy.sweeps.cell_key`,
    :func:`gpuprivacy.sweeps.data_key`; engine config keys since 2026-11-29), and the cells of an (n,
    distribution), one per epsilon, share their datasets, drawn once (paired: differences across epsilon are
    the mechanism's, not the data's). Each row reads the cell's metrics: the population-error quantiles
    (the population median is 0), the route rates and the seconds per trial. The sweep rows stay in
    ``study_dir`` (:func:`_rates_file`).
    """
    level = round(1 - config["beta"], 12)
    if level not in _POPULATION_QUANTILES:
        raise ValueError(f"beta = {config['beta']!r}: the engine reports the population-error quantiles at "
                         f"{sorted(_POPULATION_QUANTILES)}; use beta = 0.1 or 0.01.")
    by_dataset = {law: dist for dist, (law, _) in sweep_datasets(config).items() if dist in config["distributions"]}
    found = {}
    for sweep in rates_sweep_configs(config):
        ns = sweep["dataset"][0]["n"]
        chunks = {_chunk(n, sweep["trials"]) for n in ns}
        # One chunk for every n where the study's plan agrees (quick mode: all trials at once), else the engine's.
        summary = run_sweep(sweep, results_path=pathlib.Path(study_dir) / _rates_file(config, sweep),
                            progress=progress, chunk=chunks.pop() if len(chunks) == 1 else None)
        for row in summary.rows:
            if row.get("status") != "ok":
                raise RuntimeError(f"rates cell {row['dataset']} {row['dataset_params']} epsilon "
                                   f"{row['mechanism_params']['epsilon']}: {row.get('status')}: {row.get('error')}")
            metrics, dist = row["metrics"], by_dataset[row["dataset"]]
            n, eps = row["dataset_params"]["n"], row["mechanism_params"]["epsilon"]
            found[n, eps, dist] = dict(
                distribution=dist, n=n, epsilon=eps, trials=row["num_trials"],
                error_q50=metrics[_POPULATION_QUANTILES[0.5]], error_q90=metrics[_POPULATION_QUANTILES[level]],
                fast_path_rate=metrics[FAST_PATH_METRIC], overflow_rate=metrics[OVERFLOW_METRIC],
                # The engine's wall time leaves out the programs it compiles ahead (the draw), but the
                # mechanism's own kernels compile on their first call: the first distribution of each n.
                seconds_per_trial=metrics["time_per_trial_s"],
                includes_compilation=dist == config["distributions"][0])
    return [found[n, float(eps), dist] for n in config["ns"] for eps in config["epsilons"]
            for dist in config["distributions"]]
