"""Study "lebensold2024-gaussian-selection": the offline report-noisy-max part on the datasets."""

from __future__ import annotations

import math
import pathlib

import jax
import numpy as np

from gpuprivacy import accounting, mechanisms
from gpuprivacy._progress import Progress
from gpuprivacy.reproduce._gaussian_selection._accounting_grids import _rnm_epsilon
from gpuprivacy.reproduce._gaussian_selection._config import RNM_LABELS, RNM_MECHANISMS
from gpuprivacy.reproduce._gaussian_selection._plots import plot_rnm
from gpuprivacy.reproduce._gaussian_selection._reference import (
    SPEC_BIKES_EQUAL_EPSILON,
    SPEC_BIKES_RNM,
    SPEC_BIKES_UNIFORM,
    SPEC_RNM_MC_NOISE,
    compare,
)
from gpuprivacy.reproduce._gaussian_selection._rnm_monte_carlo import _dataset_queries


# ---------------------------------------------------------------------------------------------
# Part: offline report noisy max (App. B.3).


def _accuracy(queries: np.ndarray, selected: np.ndarray) -> tuple[float, float]:
    """Eq. (39) with q_max = 1: 1 - mean(q_max_true - q_selected), and its standard error."""
    errors = queries.max() - queries[selected]
    return 1.0 - float(errors.mean()), float(errors.std(ddof=1)) / math.sqrt(errors.size)


def part_rnm_offline(config: dict, key, out_dir: pathlib.Path, progress: bool) -> dict:
    c = config["rnm_offline"]
    sigmas = np.array(c["sigmas"])
    trials = c["trials"]
    jobs = [(dataset, d) for dataset in c["datasets"] for d in dataset["d"]]
    pure_all = _rnm_epsilon(np.tile(sigmas, len(jobs)), np.repeat([d for _, d in jobs], sigmas.size),
                            np.repeat([1.0 / ds["population"] for ds, _ in jobs], sigmas.size), c["lower"], c["upper"])
    pure_all = pure_all.reshape(len(jobs), sigmas.size)
    records, summaries = [], []
    with Progress(len(jobs) * sigmas.size, "gaussian selection rnm_offline", enabled=progress) as bar:
        for job_index, (dataset, d) in enumerate(jobs):
            name, sensitivity = dataset["name"], 1.0 / dataset["population"]
            queries = _dataset_queries(config, name, d)
            job_key = jax.random.fold_in(key, job_index)
            pp = {conv: np.asarray(accounting.gaussian_rnm_epsilon_postprocessing(
                sigmas, d, sensitivity, c["delta"], conversion=conv)) for conv in ("analytic", "bbghs", "markov")}
            for i, sigma in enumerate(sigmas):
                eps_pure = float(pure_all[job_index, i])
                base = {"dataset": name, "d": d, "sensitivity": sensitivity, "sigma": float(sigma),
                        "epsilon_pure": eps_pure, "epsilon_pp_analytic": float(pp["analytic"][i]),
                        "epsilon_pp_bbghs": float(pp["bbghs"][i]), "epsilon_pp_markov": float(pp["markov"][i]),
                        "trials": trials}
                sigma_key = jax.random.fold_in(job_key, i)
                calls = {
                    "gaussian": (mechanisms.gaussian_report_noisy_max,
                                 dict(sigma=float(sigma), sensitivity=sensitivity, lower=c["lower"], upper=c["upper"])),
                    "laplace_standard": (mechanisms.laplace_report_noisy_max,
                                         dict(epsilon=eps_pure, sensitivity=sensitivity, calibration="standard")),
                    "laplace_post_processing": (mechanisms.laplace_report_noisy_max,
                                                dict(epsilon=eps_pure, sensitivity=sensitivity,
                                                     calibration="post_processing")),
                    "exponential_mechanism": (mechanisms.exponential_mechanism,
                                              dict(epsilon=eps_pure, sensitivity=sensitivity)),
                    "permute_and_flip": (mechanisms.permute_and_flip, dict(epsilon=eps_pure, sensitivity=sensitivity)),
                }
                for m_index, mechanism in enumerate(RNM_MECHANISMS):
                    fn, kwargs = calls[mechanism]
                    selected = np.asarray(mechanisms.run_trials(fn, jax.random.fold_in(sigma_key, m_index), trials,
                                                                queries, **kwargs).value)
                    accuracy, se = _accuracy(queries, selected)
                    records.append({**base, "mechanism": mechanism, "label": RNM_LABELS[mechanism],
                                    "epsilon": eps_pure, "accuracy": accuracy, "accuracy_se": se,
                                    "prob_true_argmax": float(np.mean(queries[selected] == queries.max()))})
                bar.update()
            summaries.append({"dataset": name, "d": d, "sensitivity": sensitivity,
                              "uniform_accuracy": 1.0 - float(np.mean(queries.max() - queries)),
                              "argmax": int(np.argmax(queries)), "top_gap": float(np.diff(np.sort(queries)[-2:])[0]),
                              "max_query": float(queries.max())})
    figures = []
    for dataset in c["datasets"]:
        path = out_dir / f"rnm_{dataset['name']}.png"
        plot_rnm(records, summaries, dataset, path)
        figures.append(path.name)
    rows = []
    for d, table in SPEC_BIKES_RNM.items():
        for sigma, (pure_text, pp_text, acc_text) in table.items():
            match = [r for r in records if r["dataset"] == "bikes" and r["d"] == d and r["sigma"] == sigma
                     and r["mechanism"] == "gaussian"]
            if not match:
                continue
            r = match[0]
            compare(rows, f"Bikes d = {d}, σ = {sigma}: pure ε_RNM", "App. B.3", r["epsilon_pure"], pure_text)
            compare(rows, f"Bikes d = {d}, σ = {sigma}: post-processing ε (analytic, δ = 1e-5)", "App. B.3",
                     r["epsilon_pp_analytic"], pp_text)
            compare(rows, f"Bikes d = {d}, σ = {sigma}: Gaussian RNM accuracy (MC)", "App. B.3", r["accuracy"], acc_text,
                     tolerance=SPEC_RNM_MC_NOISE + 3 * r["accuracy_se"],
                     note=f"{trials} trials; tolerance = 0.004 (the reference's MC noise) + 3 SE")
    for d, text in SPEC_BIKES_UNIFORM.items():
        summary = next((s for s in summaries if s["dataset"] == "bikes" and s["d"] == d), None)
        if summary is not None:
            compare(rows, f"Bikes d = {d}: uniform-random accuracy", "App. B.3", summary["uniform_accuracy"], text)
    for mechanism, text in SPEC_BIKES_EQUAL_EPSILON.items():
        match = [r for r in records if r["dataset"] == "bikes" and r["d"] == 365 and r["sigma"] == 0.1
                 and r["mechanism"] == mechanism]
        if match:
            r = match[0]
            compare(rows, f"Bikes d = 365, ε = ε_pure(σ = 0.1) = {r['epsilon']:.4f}: {RNM_LABELS[mechanism]} accuracy",
                     "App. B.3", r["accuracy"], text, tolerance=SPEC_RNM_MC_NOISE + 3 * r["accuracy_se"],
                     note=f"{trials} trials; tolerance = 0.004 + 3 SE")
    return {"records": records, "datasets": summaries, "comparisons": rows, "figures": figures}
