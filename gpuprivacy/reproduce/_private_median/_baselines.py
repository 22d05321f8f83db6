"""The ``baselines`` part of the private-median study: every median of the package on the same datasets.

The private ones run as study-engine cells on one data key per distribution; the non-private median and the
UNSAFE flattened-Laplace shortcut (not private: accuracy only) on those datasets, redrawn from the engine's
data keys. Quantiles carry distribution-free standard errors (:func:`quantile_se`).
"""

from __future__ import annotations

import math

import jax
import numpy as np

from gpuprivacy._progress import Progress
from gpuprivacy.mechanisms import median
from gpuprivacy.reproduce._private_median._config import _chunk, _params, data_spec
from gpuprivacy.sweeps import TARGETS, CellRequest, builtin_sweepables, run_cells

def _private_median_mechanism():
    """The private median (3.6) as the study engine's built-in sweepable mechanism."""
    return builtin_sweepables()["private-median"]


def _key(key, *path):
    """``key`` folded with each index of ``path`` in turn: one independent branch per (part, role, cell)."""
    for index in path:
        key = jax.random.fold_in(key, index)
    return key


# Branches of a part's key: the datasets of a block of cells, and the mechanism noise of each cell.
_DATA, _NOISE = 0, 1


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
    engine_runs = [(PRIVATE_MEDIAN_LABEL, _private_median_mechanism(), params)]
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
