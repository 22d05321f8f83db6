"""Study "linder2025-privacy-wrappers": privacy wrappers for untrusted black-box functions (Linder et al.).

The paper has no empirical tables, so the study reports: (1) achieved depth and query counts against the lower-bound
brackets of §6 across epsilon, (2) accuracy vs epsilon of every wrapper and
baseline on the average application (App. A.1) on a small dataset (power
set), (3) the feasibility table Q(n, D) with the time per query measured on
this machine.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import sys
import time

import jax
import numpy as np

from gpuprivacy import oracle, subsets
from gpuprivacy.mechanisms import run_trials, wrappers
from gpuprivacy.reproduce._plots import require_matplotlib
from gpuprivacy.reproduce._registry import register_study

NAME = "linder2025-privacy-wrappers"
SEED = 20260000
FULL_EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
QUICK_EPSILONS = (2.0, 16.0)
TABLE_N = (16, 20, 24, 28, 32, 64, 128, 1000)
TABLE_D = (1, 2, 3, 4, 6, 8, 12, 16, 24)


def depth_rows(epsilons) -> list[dict]:
    """Achieved depth vs the §6 bracket for each wrapper (parameters only, exact)."""
    rows = []
    for eps in epsilons:
        for k in (2**8, 2**16):
            lam_s, lam = wrappers.sens_o_matic_depths(epsilon=eps, beta=0.05, grid_size=k)
            bracket = math.log(k / 0.05) / eps
            rows.append(dict(wrapper="sens_o_matic", epsilon=eps, setting=f"k=2^{int(math.log2(k))}, beta=0.05",
                             depth_low=lam_s, depth_high=lam, bracket=bracket, ratio=lam / bracket,
                             log_queries_over_log_n=_log_q(1000, lam)))
        tau = wrappers.subset_extension_tau(epsilon=eps, delta=1e-6)
        bracket = math.log(1e6) / eps
        rows.append(dict(wrapper="subset_extension", epsilon=eps, setting="delta=1e-6", depth_low=19 * tau,
                         depth_high=21 * tau, bracket=bracket, ratio=21 * tau / bracket,
                         log_queries_over_log_n=_log_q(1000, 21 * tau)))
        tau_t = wrappers.tahoe_tau(epsilon=eps, delta=1e-6)
        rows.append(dict(wrapper="tahoe", epsilon=eps, setting="delta=1e-6", depth_low=math.floor(4 * tau_t),
                         depth_high=math.floor(6 * tau_t), bracket=bracket, ratio=6 * tau_t / bracket,
                         log_queries_over_log_n=_log_q(1000, math.floor(6 * tau_t))))
        try:
            tau_d = wrappers.double_monotonization_tau(r=1000.0, c=1.0, epsilon=eps, beta=0.05)
            high = math.ceil(tau_d + 4 / eps * math.log(2 / 0.05))
            bracket_d = math.log(1000 / 0.05) / eps
            rows.append(dict(wrapper="double_monotonization", epsilon=eps, setting="r/c=1000, beta=0.05",
                             depth_low=tau_d, depth_high=high, bracket=bracket_d, ratio=high / bracket_d,
                             log_queries_over_log_n=_log_q(1000, high)))
        except ValueError:
            pass
    for rc in (1.0, 4.0, 10.0):
        tau = wrappers.small_diameter_tau(r=rc, c=1.0)
        rows.append(dict(wrapper="small_diameter_subset_extension", epsilon=None, setting=f"r/c={rc:g}",
                         depth_low=2 * tau, depth_high=2 * tau, bracket=rc, ratio=2 * tau / rc,
                         log_queries_over_log_n=_log_q(1000, 2 * tau)))
    return rows


def _log_q(n, depth):
    return math.log(subsets.query_count(n, depth)) / math.log(n)


def _mechanisms(x, grid):
    diam = float(np.ptp(x))
    return {
        "sens_o_matic": (wrappers.sens_o_matic, dict(grid=grid, beta=0.1)),
        "subset_extension": (wrappers.subset_extension, dict(c=diam, delta=1e-6)),
        "tahoe": (wrappers.tahoe, dict(c=diam, delta=1e-6)),
        "small_diameter": (wrappers.small_diameter_subset_extension, dict(r=1.0, c=diam)),
        "cummings_durfee": (wrappers.cummings_durfee, dict(c=diam)),
        "white_box_laplace": (wrappers.white_box_laplace, dict(sensitivity=1.0)),
    }


def accuracy_rows(epsilons, num_trials, n, progress=False) -> list[dict]:
    """Mean absolute error of each wrapper on avg(x) (App. A.1), x uniform in [0.3, 0.7], power set."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0.3, 0.7, size=n)
    truth = float(x.mean())
    grid = np.linspace(0.0, 1.0, 41)
    fn = wrappers.average_oracle(0.5)  # public convention avg(empty) = 0.5, the centre of the range
    rows = []
    key = jax.random.key(SEED)
    for name, (mechanism, params) in _mechanisms(x, grid).items():
        for eps in epsilons:
            key, sub = jax.random.split(key)
            start = time.perf_counter()
            out = run_trials(mechanism, sub, num_trials, x, oracle_fn=fn, epsilon=eps, **params)
            values = np.asarray(out.value)
            seconds = time.perf_counter() - start
            bot = np.isnan(values)
            error = np.abs(values[~bot] - truth)
            rows.append(dict(wrapper=name, epsilon=eps, n=n, num_trials=num_trials,
                             mean_abs_error=float(error.mean()) if error.size else None,
                             median_abs_error=float(np.median(error)) if error.size else None,
                             bot_rate=float(bot.mean()), seconds=seconds))
            if progress:
                # stderr: stdout carries only the CLI's output (one JSON object with --json).
                print(f"  {name} eps={eps}: mean |error| {rows[-1]['mean_abs_error']}", file=sys.stderr, flush=True)
    return rows


def feasibility(n_rate: int) -> dict:
    """Time per query of the mean oracle on the power set of n_rate rows, and Q(n, D) with projected times."""
    x = np.linspace(0.0, 1.0, n_rate)
    oracle.evaluate_levels(oracle.mean, x, depth=n_rate).block_until_ready()  # compile
    start = time.perf_counter()
    oracle.evaluate_levels(oracle.mean, x, depth=n_rate).block_until_ready()
    seconds = time.perf_counter() - start
    per_query = seconds / 2**n_rate
    table = [dict(n=n, depth=d, queries=subsets.query_count(n, d),
                  projected_seconds=subsets.query_count(n, d) * per_query) for n in TABLE_N for d in TABLE_D]
    return dict(rate_n=n_rate, rate_queries=2**n_rate, rate_seconds=seconds, seconds_per_query=per_query,
                table=table)


def _plot(accuracy, depths, path_acc, path_depth):
    Figure, Canvas = require_matplotlib()
    fig = Figure(figsize=(6.4, 4.2))
    Canvas(fig)
    ax = fig.add_subplot()
    for name in dict.fromkeys(r["wrapper"] for r in accuracy):
        rows = [r for r in accuracy if r["wrapper"] == name and r["mean_abs_error"] is not None]
        ax.plot([r["epsilon"] for r in rows], [r["mean_abs_error"] for r in rows], marker="o", label=name)
    ax.set(xscale="log", yscale="log", xlabel="epsilon", ylabel="mean |output - avg(x)|",
           title=f"Average of {accuracy[0]['n']} points (App. A.1), power set")
    ax.legend(fontsize=7)
    fig.savefig(path_acc, dpi=110)
    fig = Figure(figsize=(6.4, 4.2))
    Canvas(fig)
    ax = fig.add_subplot()
    for name in ("sens_o_matic", "subset_extension", "tahoe", "double_monotonization"):
        rows = [r for r in depths if r["wrapper"] == name and "2^16" not in r["setting"]]
        ax.plot([r["epsilon"] for r in rows], [r["ratio"] for r in rows], marker="o", label=name)
    ax.set(xscale="log", xlabel="epsilon", ylabel="max depth / bracket (1/eps) ln(...)",
           title="Achieved depth over the Sec. 6 lower-bound bracket")
    ax.legend(fontsize=7)
    fig.savefig(path_depth, dpi=110)


def _report(depths, accuracy, feas, quick) -> str:
    lines = ["# Linder et al. (2025): privacy wrappers for untrusted black-box functions", "",
             f"Mode: {'quick' if quick else 'full'}. Linder, Raskhodnikova, Smith & Steinke, arXiv:2503.19268.", "",
             "## Achieved depth vs the lower-bound bracket (Linder et al. 2025, Secs. 5-6)", "",
             "| wrapper | epsilon | setting | depth | bracket | depth/bracket | log Q(1000,D)/log 1000 |",
             "|---|---|---|---|---|---|---|"]
    for r in depths:
        eps = "-" if r["epsilon"] is None else f"{r['epsilon']:g}"
        lines.append(f"| {r['wrapper']} | {eps} | {r['setting']} | {r['depth_low']}..{r['depth_high']} | "
                     f"{r['bracket']:.2f} | {r['ratio']:.1f} | {r['log_queries_over_log_n']:.1f} |")
    lines += ["", "## Accuracy on the average (App. A.1)", "",
              "| wrapper | epsilon | mean abs error | median abs error | BOT rate |", "|---|---|---|---|---|"]
    for r in accuracy:
        mean = "-" if r["mean_abs_error"] is None else f"{r['mean_abs_error']:.4g}"
        median = "-" if r["median_abs_error"] is None else f"{r['median_abs_error']:.4g}"
        lines.append(f"| {r['wrapper']} | {r['epsilon']:g} | {mean} | {median} | {r['bot_rate']:.3f} |")
    lines += ["", "With the paper's constants the claimed-sensitivity wrappers add Laplace noise of scale "
              f"600c/eps (Subset-Extension), 108 c ln(1/delta0)/eps^2 (TAHOE), 10c/eps (Small-Diameter): at n = "
              f"{accuracy[0]['n']} the only honest claim is c = diam(x), so they are far from the white-box "
              "reference; Sens-o-Matic needs no c and stays within the range of f on N_lam(x) (with lam >= n "
              "that range is wide: its error need not fall with epsilon).", "",
              "## Feasibility: Q(n, D) and projected time", "",
              f"Measured: mean oracle on the power set of n = {feas['rate_n']} ({feas['rate_queries']} queries) in "
              f"{feas['rate_seconds']:.3f} s = {feas['seconds_per_query']:.3g} s per query on this machine.", "",
              "| n | " + " | ".join(f"D={d}" for d in TABLE_D) + " |", "|---" * (len(TABLE_D) + 1) + "|"]
    for n in TABLE_N:
        cells = [r for r in feas["table"] if r["n"] == n]
        lines.append(f"| {n} | " + " | ".join(f"{r['queries']:.3g} ({_time(r['projected_seconds'])})" for r in cells)
                     + " |")
    lines += ["", "Plots: accuracy.png, depth_ratio.png.", ""]
    return "\n".join(lines)


def _time(seconds):
    for unit, size in (("y", 365.25 * 86400), ("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.2g} {unit}"
    return f"{seconds:.2g} s"


def run_study(study_dir: pathlib.Path, *, quick: bool, progress: bool) -> dict:
    epsilons = QUICK_EPSILONS if quick else FULL_EPSILONS
    num_trials = 200 if quick else 2000
    n = 8 if quick else 12
    depths = depth_rows(FULL_EPSILONS)
    accuracy = accuracy_rows(epsilons, num_trials, n, progress=progress)
    feas = feasibility(16 if quick else 20)
    with open(study_dir / "accuracy.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(accuracy[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(accuracy)
    (study_dir / "results.json").write_text(json.dumps(dict(study=NAME, quick=quick, depths=depths,
                                                            accuracy=accuracy, feasibility=feas), indent=2) + "\n")
    _plot(accuracy, depths, study_dir / "accuracy.png", study_dir / "depth_ratio.png")
    (study_dir / "report.md").write_text(_report(depths, accuracy, feas, quick), encoding="utf-8")
    return {"seed": SEED, "parameters": dict(epsilons=list(epsilons), num_trials=num_trials, n=n)}


register_study(NAME, run_study, "privacy wrappers (Linder et al.): depth vs lower bounds, accuracy vs epsilon "
               "on the average, feasibility of Q(n, D)", aliases=("seed000",), replace=True)
