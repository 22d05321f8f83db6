"""The files of the private-median study: ``report.md``, the CSV tables and the JSON encoding of its numbers."""

from __future__ import annotations

import csv

import numpy as np

from gpuprivacy.reproduce._private_median._rates import _rates_file, rates_sweep_configs

def _write_csv(path, rows):
    if not rows:
        path.write_text("", encoding="utf-8")
        return
    keys = list(rows[0])
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _table(rows, columns):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = []
        for c in columns:
            v = r[c]
            cells.append(f"{v:.4g}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_report(config, results):
    rates, counter = results["rates"], results["counterexamples"]
    fit = results["sample_complexity"]["fit"]
    lines = [
        "# Optimal private median (Tzamos, Vlatakis-Gkaragkounis & Zadik 2020)", "",
        f"Mode: {'quick' if config['quick'] else 'full'}; seed {config['seed']}; C = {config['constant']}; "
        f"L = {config['min_density']}, r = {config['radius']}, R = {config['median_bound']} for every distribution. "
        "The paper has no experiments; the suite below is ours.", "",
        "## The Case-A shortcut is not private (see docs/errata.md)", "",
        _table(counter, ["pair", "n", "d_hamming", "both_in_H", "restricted_log_ratio", "restricted_allowance",
                         "general_log_ratio", "general_allowance", "tv_general_vs_restricted"]), "",
        "The restricted flattened Laplace (3.4) exceeds its eps d/2 allowance on data sets that are both typical;"
        " the general density (3.6), which the library samples, stays within eps d. ![](counterexamples.png)", "",
        "## Error quantiles vs n", "",
        _table(rates, ["distribution", "n", "epsilon", "trials", "error_q50", "error_q90", "fast_path_rate",
                       "overflow_rate", "seconds_per_trial"]), "",
        "Each row is one cell of a sweep config run by the study engine (gpuprivacy.sweeps.run_sweep; full mode: "
        "experiments/configs/private_median_rates.toml, with trials capped at large n; the rows are in "
        f"{', '.join(f'`{_rates_file(config, sweep)}`' for sweep in rates_sweep_configs(config))}): every "
        "trial's dataset is drawn on the device from its own key (gpuprivacy.datasets laws, population median 0), "
        "every epsilon of a (n, distribution) sees the same datasets, error_q50 and error_q90 are the cell's "
        "population_abs_error quantiles, and the fast-path and overflow rates are the releases' own routes (the "
        "private-median route metrics). seconds_per_trial leaves out the engine's ahead-of-time compilation; that "
        "of the first distribution per (n, epsilon) includes the mechanism's JIT compilation.", "",
        *[f"![](rates_eps{eps}.png)" for eps in config["epsilons"]], "",
        "## Sample complexity vs the Theorem 3.1 rate", "",
        f"Fitted constants (NNLS, relative error) for n = c1 log(1/b)/(L^2 a^2) + c2 log(1/b)/(eps L a) + "
        f"c3 log(R/a + 1)/(eps L r): {fit.get('constants')} from {fit.get('num_points', 0)} points; median "
        f"measured/fitted ratio {fit.get('median_ratio')}, worst factor {fit.get('max_ratio')}.", "",
        "## Baselines", "",
        _table(results["baselines"]["rows"], ["distribution", "n", "epsilon", "mechanism", "error_q50", "error_q50_se",
                                              "error_q90", "error_q90_se", "private"]), "",
        f"Every mechanism of a distribution ran on the same {config['baseline_trials']} datasets, drawn on the "
        "device by the study engine (one data key per distribution); the private ones ran as engine cells, the "
        "clipped ones with lower = -R, upper = R, clip = true. The non-private median and the UNSAFE shortcut are "
        "not public mechanisms: they ran on those datasets redrawn from the engine's data keys (checked against "
        "the engine's own target medians). The UNSAFE shortcut is shown for accuracy only: it is not differentially "
        "private. The standard errors of the quantiles are distribution-free (Woodruff 1952: half the spread of the "
        "order statistics one binomial standard deviation either side); the errors of some baselines have no mean, "
        "so the study reports quantiles. ![](baselines.png)", "",
        *[f"- note: {note}" for note in results["baselines"]["notes"]], "",
        "## Exact privacy check", "",
        f"Worst exact log-ratio / (eps d_H) over {results['privacy']['pairs']} neighbour pairs: "
        f"{results['privacy']['max_ratio_over_eps_d']:.6f} (must be <= 1).", "",
        "## Constants", "",
        f"C_min of Lemma B.3 = {results['constants']['theory_constant']:.12f}", "",
        _table(results["constants"]["restricted"], ["n", "C", "R", "epsilon", "Zhat", "tail_0_1", "tail_0_5"]), "",
        _table(results["constants"]["lower_bounds"], ["alpha", "beta", "epsilon", "L", "R", "local", "range"]), "",
    ]
    return "\n".join(lines)


def _json_default(value):
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(type(value).__name__)
