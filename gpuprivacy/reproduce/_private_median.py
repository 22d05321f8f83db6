"""Study "tzamos2020-private-median": the optimal private median (Tzamos, Vlatakis-Gkaragkounis & Zadik, NeurIPS 2020).

The paper has no experiments. This study reproduces its
analytic content and runs the experiment suite of our own (labelled so):

* ``counterexamples``: the Case-A shortcut is not private (Lemma 3.2 of the paper fails; see docs/errata.md): exact
  log-density ratios of the restricted (3.4) vs the general (3.6) density, and their TV;
* ``constants``: analytic targets (C_min, Zhat and tails, lower-bound sample sizes);
* ``rates``: error quantiles of :func:`gpuprivacy.mechanisms.median.private_median` vs n for Uniform,
  Normal, Cauchy, Laplace, Student-t(3) and the Prop. 3.8 lower-bound mixture, over an epsilon grid;
  fast-path and overflow rates; runtime per trial. The part is a sweep config (:func:`rates_sweep_configs`;
  in full mode ``experiments/configs/private_median_rates.toml``, whose grid a test keeps equal to it) run by
  :func:`gpuprivacy.sweeps.run_sweep`: each (n, epsilon, distribution) is one cell, keyed by the seed and
  its own parameters (engine config keys since 2026-11-29; the numbers before that came from keys folded by
  grid position), the epsilons of an (n, distribution) on the same datasets, drawn on the device from
  :mod:`gpuprivacy.datasets` laws. The errors are the cell's ``population_abs_error_q50`` / ``_q90`` metrics
  and the routes the ``private-median-fast-path-rate`` / ``private-median-overflow-rate`` metrics (the
  releases' own ``nonprivate_route``); the sweep rows stay in the study folder (``rates_quick.jsonl``,
  ``rates.jsonl``), so a rerun of the same mode resumes;
* ``sample_complexity``: the n needed to reach (alpha, beta), with the constants of the Theorem 3.1
  rate fitted by nonnegative least squares;
* ``baselines``: on the same device-drawn datasets (one engine data key per distribution), the
  private median (3.6), the exponential-mechanism median (McSherry & Talwar 2007), the piecewise-Laplace
  and inverse-sensitivity medians (Durfee 2025) and the smooth-sensitivity median (Nissim, Raskhodnikova
  & Smith 2007), all run by the engine; the non-private median and the UNSAFE flattened-Laplace shortcut
  (labelled unsafe: accuracy only, it is not private) on those same datasets, redrawn from the engine's
  data keys;
* ``privacy``: the exact worst log-ratio over random and adversarial neighbours, relative to eps d_H.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import time

import jax
import numpy as np
from scipy import optimize

from gpuprivacy import datasets
from gpuprivacy._progress import Progress
from gpuprivacy.mechanisms import median
from gpuprivacy.reproduce._plots import figure, legend_outside, require_matplotlib, save_png, ticks_at, wrap_label
from gpuprivacy.reproduce._registry import register_study
from gpuprivacy.sweeps import (TARGETS, CellRequest, DataSpec, builtin_sweepables, plan_chunk, run_cells,
                               run_sweep)

NAME = "tzamos2020-private-median"
DISTRIBUTIONS = ("uniform", "normal", "cauchy", "laplace", "student_t3", "lower_bound_mixture")
# One (L, r) valid for every distribution (density >= L on [m - r, m + r]); R/r = 10.
MODEL = dict(min_density=0.15, radius=1.0, median_bound=10.0)


def study_config(quick: bool) -> dict:
    """All parameters of the study. Quick: a CI-sized grid (< 60 s on 2 CPU cores)."""
    if quick:
        return dict(seed=3, quick=True, constant=6.0, ns=[100, 1000, 10000], epsilons=[1.0], trials=200,
                    distributions=list(DISTRIBUTIONS), baseline_n=1000, baseline_trials=100, beta=0.1,
                    alphas=[0.1, 0.2, 0.4], privacy_pairs=8, **MODEL)
    return dict(seed=3, quick=False, constant=6.0, ns=[100, 300, 1000, 3000, 10000, 30000, 100000, 300000, 1000000],
                epsilons=[0.1, 0.25, 0.5, 1.0], trials=1000, max_trial_elements=10**8,
                distributions=list(DISTRIBUTIONS), baseline_n=10000,
                baseline_trials=500, beta=0.1, alphas=[0.02, 0.05, 0.1, 0.2, 0.4], privacy_pairs=40, **MODEL)


def _params(config, epsilon):
    return dict(epsilon=epsilon, min_density=config["min_density"], radius=config["radius"],
                median_bound=config["median_bound"], constant=config["constant"])


def sweep_datasets(config) -> dict[str, tuple[str, dict]]:
    """The study's :data:`DISTRIBUTIONS` as registered sweep datasets (``gpuprivacy sweep --list``):
    ``{distribution: (dataset name, its parameters)}``, each a :mod:`gpuprivacy.datasets` law with population
    median 0.

    The mixture is D_1 of Prop. 3.8 (Tzamos, Vlatakis-Gkaragkounis & Zadik 2020): mass 1/2 - L r at
    -(r + R) and at r + R, and 2 L r uniform on [-r, r].
    """
    return {
        "uniform": ("uniform", dict(low=-1.0, high=1.0)),
        "normal": ("normal", dict(loc=0.0, scale=1.0)),
        "cauchy": ("cauchy", dict(loc=0.0, scale=1.0)),
        "laplace": ("laplace", dict(loc=0.0, scale=1.0)),
        "student_t3": ("student-t", dict(df=3.0, loc=0.0, scale=1.0)),
        "lower_bound_mixture": ("lower-bound-mixture", dict(
            min_density=float(config["min_density"]), radius=float(config["radius"]),
            median_bound=float(config["median_bound"]), shift=0.0)),
    }


def data_spec(distribution, n, config):
    """The engine's :class:`~gpuprivacy.sweeps.DataSpec` for one of :data:`DISTRIBUTIONS` (the law of
    :func:`sweep_datasets`), drawn fresh for every trial on the device."""
    laws = sweep_datasets(config)
    if distribution not in laws:
        raise ValueError(f"unknown distribution {distribution!r}; the study's are {list(laws)}")
    law, params = laws[distribution]
    return DataSpec(distribution, int(n), params, distribution=datasets.distribution(law), fresh=True)


def _trials_at(config, n):
    """Trials at sample size n: all of them, except that the full run caps trials x n at
    ``max_trial_elements`` (>= 100 trials) so that n = 10^6 fits a CPU session; the rows record it."""
    cap = config.get("max_trial_elements")
    return config["trials"] if cap is None else min(config["trials"], max(100, cap // n))


# Data values per engine chunk at least (the chunk of the study's former host loop, 32 MB of float64 data).
# The private median routes each chunk's trials on the host, one call per chunk, and a call that meets a
# new number of non-certified trials compiles the full route for it: fewer, larger chunks compile fewer.
_CHUNK_VALUES = 4_000_000


def _chunk(n, trials):
    """Trials per engine chunk: the engine's plan for n or, where more, what fits ``_CHUNK_VALUES``; split
    evenly, so that no padding trial is drawn and run only to be dropped."""
    devices = jax.local_device_count()
    most = max(plan_chunk(n, trials, devices, jax.local_devices()[0].platform),
               _CHUNK_VALUES // n // devices * devices, devices)
    pieces = -(-trials // most)
    return -(-trials // (pieces * devices)) * devices


def _private_median():
    return builtin_sweepables()["private-median"]


def _key(key, *path):
    """``key`` folded with each index of ``path`` in turn: one independent branch per (part, role, cell)."""
    for index in path:
        key = jax.random.fold_in(key, index)
    return key


# Branches of a part's key: the datasets of a block of cells, and the mechanism noise of each cell.
_DATA, _NOISE = 0, 1


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


def rate_terms(n_alpha, alpha, beta, epsilon, config):
    """The three Theorem 3.1 terms (without constants): non-private, local privacy, range."""
    L, r, R = config["min_density"], config["radius"], config["median_bound"]
    return (math.log(1 / beta) / (L**2 * alpha**2), math.log(1 / beta) / (epsilon * L * alpha),
            math.log(R / alpha + 1) / (epsilon * L * r))


def part_sample_complexity(config, rates):
    """n needed for P(|error| >= alpha) <= beta (log-interpolated on the grid), and NNLS constants."""
    rows = []
    for dist in config["distributions"]:
        for eps in config["epsilons"]:
            sub = sorted((r for r in rates if r["distribution"] == dist and r["epsilon"] == eps), key=lambda r: r["n"])
            ns = np.array([r["n"] for r in sub], float)
            q = np.array([r["error_q90"] for r in sub])
            for alpha in config["alphas"]:
                reached = np.flatnonzero(q <= alpha)
                if reached.size == 0:
                    continue
                i = reached[0]
                if i == 0:
                    needed = ns[0]
                else:  # log-log interpolation between the bracketing grid points
                    x0, x1, y0, y1 = np.log(ns[i - 1]), np.log(ns[i]), np.log(q[i - 1]), np.log(q[i])
                    needed = float(np.exp(x0 + (np.log(alpha) - y0) * (x1 - x0) / (y1 - y0))) if y1 != y0 else ns[i]
                rows.append(dict(distribution=dist, epsilon=eps, alpha=alpha, n_needed=float(needed),
                                 censored_below=bool(i == 0),
                                 terms=rate_terms(needed, alpha, config["beta"], eps, config)))
    fit = {}
    usable = [r for r in rows if not r["censored_below"]]
    if len(usable) >= 3:
        design = np.array([r["terms"] for r in usable])
        target = np.array([r["n_needed"] for r in usable])
        weights = 1 / target  # relative error
        coef, _ = optimize.nnls(design * weights[:, None], target * weights)
        predicted = design @ coef
        fit = dict(constants=[float(c) for c in coef], num_points=len(usable),
                   median_ratio=float(np.median(target / np.maximum(predicted, 1e-300))),
                   max_ratio=float(np.max(np.maximum(target / np.maximum(predicted, 1e-300),
                                                     predicted / target))))
    return rows, fit


# The private baselines the engine runs: (row label, built-in sweepable name). Each gets the same clip rule,
# lower = -R, upper = R, clip = True, so no median is favoured by the range it is told.
CLIPPED_BASELINES = (
    ("exponential_mechanism_median", "exponential-mechanism-median"),
    ("piecewise_laplace_median", "piecewise-laplace-median"),
    ("inverse_sensitivity_median", "inverse-sensitivity-median"),
    ("smooth_sensitivity_median", "smooth-sensitivity-median"),
)
PRIVATE_MEDIAN_LABEL = "private_median (3.6)"
UNSAFE_LABEL = "UNSAFE flattened-Laplace shortcut"


def engine_datasets(spec, data_key, num_trials):
    """The datasets ``[num_trials, n]`` that :func:`gpuprivacy.sweeps.run_cells` draws for ``spec`` and ``data_key``.

    Trial i's dataset is drawn from ``jax.random.fold_in(data_key, i)`` (the engine's stated convention), so
    the non-private median and the UNSAFE shortcut, which are not public mechanisms and so not engine
    cells, see the engine's datasets.
    """
    # One trial at a time: the law's own compiled draw at shape (n,) is cheaper to compile than a batched
    # program, and draws the same bits (a trial's values depend on its key only).
    return np.stack([np.asarray(spec.distribution.draw(jax.random.fold_in(data_key, i), (spec.n,), **spec.params))
                     for i in range(num_trials)])


def _engine_baselines(requests, spec, trials, data_key, chunk, dist, notes):
    """``{label: CellTrials}`` of the engine's baselines on one distribution's datasets.

    All in one block (each chunk of data drawn once for every mechanism); if the block fails, each cell
    again alone on the same data key, so that a failing baseline is reported in the notes, not fatal.
    """
    try:
        cells = run_cells([request for _, request in requests], spec, trials, data_key=data_key, chunk=chunk,
                          exact=False)
        return {label: cell for (label, _), cell in zip(requests, cells)}
    except Exception:  # noqa: BLE001 - find which baseline failed, below
        pass
    out = {}
    for label, request in requests:
        try:
            (out[label],) = run_cells([request], spec, trials, data_key=data_key, chunk=chunk, exact=False)
        except Exception as err:  # noqa: BLE001 - a baseline's failure is reported, not fatal
            notes.append(f"{label} on {dist}: {type(err).__name__}: {str(err)[:160]}")
    return out


def quantile_se(values, q):
    """Standard error of the empirical ``q``-quantile of ``values``, distribution-free: half the distance
    between the empirical quantiles at ``q -+ sqrt(q (1 - q) / n)``, the order statistics one binomial
    standard deviation of the count below the quantile away (Woodruff, `Confidence intervals for medians
    and other position measures <https://doi.org/10.1080/01621459.1952.10483443>`_, JASA 1952). It needs
    no density estimate and exists for every law, heavy tails included (the baselines' errors need not
    have a mean, so the study reports quantiles, not means)."""
    values = np.asarray(values, dtype=np.float64)
    half = math.sqrt(q * (1 - q) / values.size)
    low, high = np.quantile(values, [max(0.0, q - half), min(1.0, q + half)])
    return float(high - low) / 2


def part_baselines(config, key, progress):
    """The baselines at ``baseline_n``: every mechanism of a distribution on the same datasets (one data key)."""
    n, trials = config["baseline_n"], config["baseline_trials"]
    eps = max(config["epsilons"])
    params = _params(config, eps)
    R = float(config["median_bound"])
    sweepables = builtin_sweepables()
    engine_runs = [(PRIVATE_MEDIAN_LABEL, _private_median(), params)]
    notes = []
    for label, name in CLIPPED_BASELINES:
        if name in sweepables:
            engine_runs.append((label, sweepables[name], dict(epsilon=float(eps), lower=-R, upper=R, clip=True)))
        else:  # pragma: no cover - the instance-optimal mechanisms absent
            notes.append(f"{label}: not a built-in sweepable mechanism ({name}); skipped")
    unsafe = jax.jit(jax.vmap(lambda k, x: median.unsafe_flattened_laplace_shortcut(k, x, **params)))
    rows = []
    with Progress(len(config["distributions"]), "private median baselines", enabled=progress) as bar:
        for di, dist in enumerate(config["distributions"]):
            spec, data_key = data_spec(dist, n, config), _key(key, _DATA, di)
            requests = [(label, CellRequest(mechanism, mechanism_params, _key(key, _NOISE, di, mi)))
                        for mi, (label, mechanism, mechanism_params) in enumerate(engine_runs)]
            cells = _engine_baselines(requests, spec, trials, data_key, _chunk(n, trials), dist, notes)
            data = engine_datasets(spec, data_key, trials)
            if cells:  # the cells share their datasets: one cell's targets, recomputed here, check them all
                label, cell = next(iter(cells.items()))
                request = dict(requests)[label]
                target = TARGETS[request.mechanism.target].statistic
                if not np.array_equal(jax.vmap(lambda row: target(row, request.params))(data), cell.targets):
                    raise RuntimeError(f"the datasets redrawn for {dist} are not those of the study engine's "
                                       f"{label} cell; the baselines would not be paired")
            for label, cell in cells.items():
                if not np.all(cell.valid):
                    notes.append(f"{label} on {dist}: {int(np.sum(~cell.valid))} of {trials} trials withheld")
            errors = {label: np.abs(cell.values - cell.population) for label, cell in cells.items()}
            # The population median is 0, so the non-private median's error is its absolute value.
            references = {"nonprivate_median": np.abs(np.sort(data, axis=1)[:, (n + 1) // 2 - 1])}
            try:
                unsafe_keys = jax.random.split(_key(key, _NOISE, di, len(engine_runs)), trials)
                references[UNSAFE_LABEL] = np.abs(np.asarray(unsafe(unsafe_keys, data)))
            except Exception as err:  # noqa: BLE001 - reported, not fatal
                notes.append(f"{UNSAFE_LABEL} on {dist}: {type(err).__name__}: {str(err)[:160]}")
            first = {k: errors.pop(k) for k in [PRIVATE_MEDIAN_LABEL] if k in errors}
            for label, e in {**first, **references, **errors}.items():
                rows.append(dict(distribution=dist, n=n, epsilon=eps, mechanism=label, trials=trials,
                                 error_q50=float(np.median(e)), error_q90=float(np.quantile(e, 1 - config["beta"])),
                                 private=not label.startswith(("UNSAFE", "nonprivate")),
                                 error_q50_se=quantile_se(e, 0.5), error_q90_se=quantile_se(e, 1 - config["beta"])))
            bar.update()
    return rows, sorted(set(notes))


def _max_log_ratio(x, y, params):
    px, py = median.private_median_pieces(x, **params), median.private_median_pieces(y, **params)
    points = np.unique(np.r_[px.left, px.right, py.left, py.right])
    points = np.r_[points, 0.5 * (points[1:] + points[:-1])]

    def at(p, w):
        i = np.clip(np.searchsorted(p.left, w, side="right") - 1, 0, p.left.size - 1)
        return p.log_left[i] + p.slope[i] * (w - p.left[i])
    return float(np.max(np.abs(at(px, points) - at(py, points))))


def part_counterexamples():
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=100.0, constant=6.0)
    x4, y4 = np.r_[np.zeros(24), np.full(24, 50.0)], np.r_[np.zeros(23), np.full(25, 50.0)]
    n, delta, K, l = 384, 1 / 32, 16, 192
    x5 = np.r_[-np.arange(l - 1, 0, -1) * delta, 0.0, np.arange(1, K + 2) * delta, 50 + np.arange(n - l - K - 1) * delta]
    y5 = x5.copy()
    y5[:2 * K + 3] = 50 - np.arange(1, 2 * K + 4) * delta
    rows, curves = [], {}
    for label, x, y in (("ties", x4, y4), ("no ties", x5, y5)):
        d = int(np.sum(x != y))
        support = median.median_parameters(len(x), **params).support
        grid = np.linspace(-support, support, 100_001)
        mid = 0.5 * (grid[1:] + grid[:-1])
        mx, my = median.nonprivate_median(x), median.nonprivate_median(y)
        flat = 3 * params["constant"] * params["radius"]
        # The restricted log-densities are piecewise linear with breakpoints m and m +- 3Cr: exact maximum.
        kinks = np.clip(np.r_[mx, my, mx - flat, mx + flat, my - flat, my + flat], -support, support)
        rx = median.flattened_laplace_log_density(mid, mx, len(x), **params)
        ry = median.flattened_laplace_log_density(mid, my, len(x), **params)
        restricted = float(np.max(np.abs(median.flattened_laplace_log_density(kinks, mx, len(x), **params)
                                         - median.flattened_laplace_log_density(kinks, my, len(x), **params))))
        gx = median.private_median_log_density(x, mid, **params)
        tv = 0.5 * float(np.sum(np.abs(np.exp(gx) - np.exp(rx))) * (grid[1] - grid[0]))
        rows.append(dict(pair=label, n=len(x), d_hamming=d, both_in_H=bool(
            median.typical_hulls(x, **params).distance == 0 and median.typical_hulls(y, **params).distance == 0),
            restricted_log_ratio=max(restricted, float(np.max(np.abs(rx - ry)))), restricted_allowance=params["epsilon"] * d / 2,
            general_log_ratio=_max_log_ratio(x, y, params), general_allowance=params["epsilon"] * d,
            tv_general_vs_restricted=tv))
        step = max(1, mid.size // 4000)
        curves[label] = dict(omega=mid[::step], general_x=gx[::step],
                             general_y=median.private_median_log_density(y, mid[::step], **params),
                             restricted_x=rx[::step], restricted_y=ry[::step])
    return rows, curves


def part_constants():
    base = dict(min_density=0.5, radius=1.0)
    table = []
    for n, c, R, eps in ((1000, 6, 10, 1.0), (1000, 6, 10, 0.1), (10000, 105, 1000, 1.0), (100, 6, 1e6, 0.5)):
        p = dict(base, constant=c, median_bound=R, epsilon=eps)
        table.append(dict(n=n, C=c, R=R, epsilon=eps, Zhat=math.exp(median.flattened_laplace_log_normalizer(n, **p)),
                          tail_0_1=median.flattened_laplace_tail(0.1, n, **p),
                          tail_0_5=median.flattened_laplace_tail(0.5, n, **p)))
    lower = [dict(alpha=a, beta=b, epsilon=e, L=L, r=1.0, R=R, **median.lower_bound_sample_sizes(
        alpha=a, beta=b, epsilon=e, min_density=L, radius=1.0, median_bound=R))
        for a, b, L, R, e in ((0.1, 0.05, 0.5, 10.0, 1.0), (0.01, 0.01, 0.25, 1000.0, 0.1))]
    return dict(theory_constant=median.THEORY_CONSTANT, restricted=table, lower_bounds=lower)


def part_privacy(config):
    rng = np.random.default_rng([config["seed"], 5])
    params = dict(epsilon=1.0, min_density=0.5, radius=1.0, median_bound=3.0, constant=2.0)
    worst = []
    for i in range(config["privacy_pairs"]):
        x = [rng.uniform(-1, 1, 41), np.r_[rng.uniform(-2.3, -2, 20), rng.uniform(2, 2.3, 21)],
             (np.arange(41) - 20) * 0.7, np.round(rng.normal(0, 1, 41) * 4) / 4][i % 4]
        y = x.copy()
        y[rng.integers(41)] = rng.choice([rng.uniform(-3, 3), 100.0, x[20]])
        worst.append(_max_log_ratio(x, y, params) / (params["epsilon"] * max(1, int(np.sum(x != y)))))
    return dict(pairs=len(worst), max_ratio_over_eps_d=float(np.max(worst)), mean=float(np.mean(worst)))


def plot_baselines(config, baselines):
    """The figure of ``baselines.png``: the 90% error quantile of every mechanism on every distribution, one
    colour per mechanism (hatched: not private), +-1 s.e. (:func:`quantile_se`), the legend beside the axes."""
    fig = figure(9.6, 4.4)
    ax = fig.add_subplot()
    distributions = config["distributions"]
    mechanisms = list(dict.fromkeys(r["mechanism"] for r in baselines))  # the rows' order: (3.6) first
    width = 0.8 / len(mechanisms)
    centres = np.arange(len(distributions), dtype=np.float64)
    for j, mech in enumerate(mechanisms):
        found = {r["distribution"]: r for r in baselines if r["mechanism"] == mech}
        vals = [found[d]["error_q90"] if d in found else np.nan for d in distributions]
        errs = [found[d].get("error_q90_se", np.nan) if d in found else np.nan for d in distributions]
        private = all(r["private"] for r in found.values())
        ax.bar(centres + (j - (len(mechanisms) - 1) / 2) * width, vals, width, yerr=errs, color=f"C{j}",
               hatch=None if private else "//", edgecolor="white" if private else "black", linewidth=0.5,
               error_kw=dict(ecolor="black", elinewidth=0.8, capsize=1.5),
               label=mech if private else f"{mech} (not private)")
    ax.set_yscale("log")
    ticks_at(fig, ax.xaxis, centres, [wrap_label(d) for d in distributions], fontsize=8)
    ax.set_xlim(-0.5, len(distributions) - 0.5)
    ax.set_ylabel(f"{1 - config['beta']:.0%} quantile of |error| (± 1 s.e.)")
    ax.set_title(f"baselines at n = {config['baseline_n']}, eps = {max(config['epsilons'])}, "
                 f"{config['baseline_trials']} datasets per distribution", fontsize=10)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    legend_outside(fig, ax, where="right", fontsize=7)
    return fig


def _plots(study_dir, config, rates, baselines, curves):
    Figure, Canvas = require_matplotlib()
    files = []
    for eps in config["epsilons"]:
        fig = Figure(figsize=(6.4, 4.2))
        ax = fig.add_subplot()
        for dist in config["distributions"]:
            sub = sorted((r for r in rates if r["distribution"] == dist and r["epsilon"] == eps), key=lambda r: r["n"])
            ax.loglog([r["n"] for r in sub], [r["error_q90"] for r in sub], marker="o", label=dist)
        ax.set_xlabel("n")
        ax.set_ylabel(f"{1 - config['beta']:.0%} quantile of |estimate - median|")
        ax.set_title(f"private median (3.6), eps = {eps}, C = {config['constant']}")
        ax.legend(fontsize=7)
        name = f"rates_eps{eps}.png"
        Canvas(fig).print_png(str(study_dir / name))
        files.append(name)
    save_png(plot_baselines(config, baselines), study_dir / "baselines.png")
    files.append("baselines.png")
    fig = Figure(figsize=(9, 3.6))
    for i, (label, c) in enumerate(curves.items()):
        ax = fig.add_subplot(1, 2, i + 1)
        ax.plot(c["omega"], c["general_x"], label="general (3.6), X")
        ax.plot(c["omega"], c["general_y"], label="general (3.6), Y")
        ax.plot(c["omega"], c["restricted_x"], "--", label="restricted (3.4), X")
        ax.plot(c["omega"], c["restricted_y"], "--", label="restricted (3.4), Y")
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("omega")
        ax.set_ylabel("log density")
        ax.legend(fontsize=6)
    Canvas(fig).print_png(str(study_dir / "counterexamples.png"))
    files.append("counterexamples.png")
    return files


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


def _report(config, results):
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


def _run_study(study_dir: pathlib.Path, *, quick: bool, progress: bool) -> dict:
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
    files = _plots(study_dir, config, rates, baseline_rows, curves)
    _write_csv(study_dir / "rates.csv", rates)
    _write_csv(study_dir / "baselines.csv", baseline_rows)
    (study_dir / "results.json").write_text(json.dumps(dict(study=NAME, config=config, results=results, plots=files,
                                                            wall_s=wall), indent=1, default=_json_default) + "\n",
                                            encoding="utf-8")
    (study_dir / "report.md").write_text(_report(config, results), encoding="utf-8")
    return json.loads(json.dumps(dict(seed=config["seed"], parameters=config, part_wall_s=wall,
                                      checks=results["checks"]), default=_json_default))


register_study(NAME, _run_study, "Optimal private median (Tzamos et al. 2020): the Case-A counterexamples, "
               "error quantiles vs n on six admissible distributions, sample complexity vs Theorem 3.1, baselines, "
               "exact privacy checks", aliases=("seed003",), replace=True)
