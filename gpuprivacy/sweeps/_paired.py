"""Paired differences between the cells of a block: mechanisms compared on the same datasets, trial by trial.

What is paired. The cells of a block share their datasets: trial ``j`` of every cell runs on the dataset
drawn from ``fold_in(data_key, j)``, whatever the mechanism and its parameters (common random numbers,
:func:`gpuprivacy.sweeps.data_key`). Two cells A and B of a block are *comparable* when

* both estimate the same real-valued statistic: their per-trial targets are equal on every trial
  (the same statistic of the same datasets; e.g. a median and the ``nonprivate`` baseline with
  ``statistic = "median"``, or a quantile at q = 0.5 and a median), and
* their common privacy parameters (``epsilon``, ``delta``, ``rho``, where both set them) are equal.
  The ``nonprivate`` baseline has none, so it pairs with every cell of its statistic.

Over the trials ``j`` where both released (``m`` of them), with :math:`e^A_j` the error of A's release
against the statistic of trial j's data (the mean over coordinates of :math:`|e|` for a vector),

.. math::

    d_j = |e^A_j| - |e^B_j|, \\qquad \\bar d = \\frac1m \\sum_j d_j, \\qquad
    \\mathrm{se} = \\frac{s_d}{\\sqrt m}, \\qquad
    w = \\frac1m \\sum_j 1[|e^A_j| < |e^B_j|], \\qquad \\mathrm{se}_w = \\sqrt{w(1-w)/m},

and the same against the population value where the data law states one. A negative :math:`\\bar d`
favours A; :math:`w` is the fraction of trials A wins outright (ties, e.g. two exact releases, count for
neither; ``tie_rate`` says how many).

Exact per-dataset errors. Where both cells carry their mechanisms' exact expected absolute errors per
dataset (a sweep with ``exact = true``: :math:`a^A_j = E[|M_A(x_j) - f(x_j)| \\mid x_j]`, the closed form on
trial j's dataset, no mechanism noise), the pair also compares those, over the same ``m`` datasets:

.. math::

    \\bar\\delta = \\frac1m \\sum_j (a^A_j - a^B_j), \\qquad
    \\mathrm{se}_\\delta = \\frac{s_\\delta}{\\sqrt m}, \\qquad
    \\delta_{\\max} = \\max_j (a^A_j - a^B_j), \\qquad
    \\mathrm{dominance} = \\frac1m \\sum_j 1[a^A_j \\le a^B_j + \\tau \\max(|a^A_j|, |a^B_j|)],

with the relative tolerance :math:`\\tau = 10^{-12}` (``EXACT_TIE_RTOL``): two closed forms that agree
mathematically on a dataset (PLM and INV on a degenerate one) may differ in the last bits, and count as a
tie, i.e. for A. The dominance is the fraction of datasets on which A's exact expected error is at most
B's (Durfee 2025, Thm 2 claims 1 for A = piecewise Laplace, B = inverse sensitivity), and
:math:`\\delta_{\\max} < 0` says A is strictly better on every one of them. These involve no mechanism
noise: :math:`\\bar\\delta \\pm 1.96\\,\\mathrm{se}_\\delta` is an interval for the mean over the data law
of the difference of the exact errors (CLT over i.i.d. datasets).

Why the interval is valid. With fresh data the trials are i.i.d.: trial j's dataset and both cells'
noise are drawn from keys of trial j alone, independent across j, so :math:`(d_j)` are i.i.d. and
:math:`\\bar d \\pm 1.96\\,\\mathrm{se}` is a 95% CLT interval for :math:`E|e^A| - E|e^B|` (one pair per
trial; with ``fresh = false`` every trial sees one dataset, and the interval is conditional on it).
Pairing removes the dataset-to-dataset variation both errors share, so it is usually much narrower
than the unpaired :math:`\\sqrt{\\mathrm{se}_A^2 + \\mathrm{se}_B^2}` (and never needs independence of A
and B). Where either release's error has no mean (Cauchy noise, unclamped) :math:`E|e^A| - E|e^B|`
does not exist: the mean difference and its interval are null with a note; the win rate, a mean of
bounded indicators, stays.

Cells computed in different runs (a resumed sweep: a block finished before the kill, another after)
are not paired: pairs are formed inside a block, while its per-trial errors are in memory. Rerun the
sweep into a fresh results file to pair them.
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np

from gpuprivacy.sweeps._mechanisms import PRIVACY_PARAMETERS

# Two-sided 95% normal quantile: intervals are estimate +- Z95 standard errors.
Z95 = 1.959963984540054
# Exact expected errors within this relative amount of each other are a tie (counted for A in the dominance):
# two closed forms equal in exact arithmetic differ by a few ulps (module docstring).
EXACT_TIE_RTOL = 1e-12
# The per-trial exact quantity the pairs compare (CellTrials.exact's key).
EXACT_FIELD = "expected_abs_error"
# Targets are compared in float64; equal statistics computed by two compiled programs may differ in the last
# bits (a sum fused differently), never by more than this relative amount.
_TARGET_RTOL = 1e-9


class PairedCell(NamedTuple):
    """One cell of a block, as the pairing reads it.

    Attributes:
      cell_id, mechanism, params: the cell (its id, mechanism name and mechanism parameters).
      values: ``[T, ...]`` releases; targets: ``[T, ...]`` the statistic of each trial's data.
      valid: ``[T]`` bool, released (False: withheld).
      population: the population value of the statistic, or None.
      no_mean: the release's error has no mean (its mean differences are undefined).
      real: the target is real-valued (index targets, selections, are not paired).
      exact: the mechanism's exact per-dataset quantities, ``{name: [T]}`` (``CellTrials.exact``; empty or
        None without ``exact = true``); the pair compares their ``expected_abs_error`` where both have it.
    """

    cell_id: str
    mechanism: str
    params: dict
    values: np.ndarray
    targets: np.ndarray
    valid: np.ndarray
    population: float | None
    no_mean: bool = False
    real: bool = True
    exact: dict | None = None


def abs_errors(values, reference) -> np.ndarray:
    """``[T]`` per-trial absolute errors: the mean over coordinates of ``|values - reference|``.

    ``values``: ``[T, ...]``; ``reference``: ``[T, ...]`` (per-trial statistics) or a scalar (the population).
    """
    values = np.asarray(values, np.float64)
    num = values.shape[0]
    diff = values.reshape(num, -1) - np.asarray(reference, np.float64).reshape(num if np.ndim(reference) else 1, -1)
    return np.abs(diff).mean(axis=1)


def mean_difference(abs_a, abs_b) -> tuple[float, float, int]:
    """``(mean, se, m)`` of :math:`d_j = a_j - b_j` over the ``m`` pairs given (NaN where undefined)."""
    d = np.asarray(abs_a, np.float64) - np.asarray(abs_b, np.float64)
    m = int(d.size)
    if m == 0:
        return math.nan, math.nan, 0
    se = float(np.std(d, ddof=1)) / math.sqrt(m) if m > 1 else math.nan
    return float(np.mean(d)), se, m


def win_rate(abs_a, abs_b) -> tuple[float, float, float]:
    """``(w, se, ties)``: the fraction of pairs with ``a < b``, its binomial standard error, the fraction tied."""
    a, b = np.asarray(abs_a, np.float64), np.asarray(abs_b, np.float64)
    if a.size == 0:
        return math.nan, math.nan, math.nan
    w = float(np.mean(a < b))
    return w, math.sqrt(w * (1.0 - w) / a.size), float(np.mean(a == b))


def exact_dominance(exact_a, exact_b, *, rtol: float = EXACT_TIE_RTOL) -> tuple[float, float]:
    """``(dominance, max_difference)`` of exact per-dataset errors: the fraction of pairs with
    :math:`a_j \\le b_j + \\tau \\max(|a_j|, |b_j|)` (ties within the relative tolerance ``rtol`` count for A)
    and :math:`\\max_j (a_j - b_j)`; NaN for no pairs. A NaN error compares as not dominating.

    Examples:
      >>> exact_dominance([1.0, 3.0, 2.0], [2.0, 2.0, 2.0])  # a <= b on the first and the tied third
      (0.6666666666666666, 1.0)
    """
    a, b = np.asarray(exact_a, np.float64), np.asarray(exact_b, np.float64)
    if a.size == 0:
        return math.nan, math.nan
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite: NaN, not a warning
        slack = rtol * np.maximum(np.abs(a), np.abs(b))
        dominance = float(np.mean(a <= b + np.where(np.isfinite(slack), slack, 0.0)))
        return dominance, float(np.max(a - b))


def _exact_values(cell: PairedCell) -> np.ndarray | None:
    values = (cell.exact or {}).get(EXACT_FIELD)
    return None if values is None else np.asarray(values, np.float64).reshape(-1)


def comparable(a: PairedCell, b: PairedCell) -> bool:
    """Whether A and B estimate the same statistic on the same trials under the same privacy parameters."""
    if not (a.real and b.real) or a.targets.shape != b.targets.shape:
        return False
    privacy_a, privacy_b = dict(_privacy(a.params)), dict(_privacy(b.params))
    if any(privacy_a[p] != privacy_b[p] for p in privacy_a.keys() & privacy_b.keys()):
        return False
    ta, tb = np.asarray(a.targets, np.float64), np.asarray(b.targets, np.float64)
    return bool(np.allclose(ta, tb, rtol=_TARGET_RTOL, atol=0.0, equal_nan=True))


def _number(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def pair(a: PairedCell, b: PairedCell) -> dict:
    """The paired comparison of A with B (see the module docstring), as stored in A's row."""
    both = np.asarray(a.valid, bool).reshape(-1) & np.asarray(b.valid, bool).reshape(-1)
    abs_a, abs_b = abs_errors(a.values, a.targets)[both], abs_errors(b.values, b.targets)[both]
    mean, se, m = mean_difference(abs_a, abs_b)
    w, w_se, ties = win_rate(abs_a, abs_b)
    entry = {"versus_cell": b.cell_id, "versus_mechanism": b.mechanism, "versus_params": dict(b.params),
             "trials": m, "abs_error_difference": mean, "abs_error_difference_se": se,
             "win_rate": w, "win_rate_se": w_se, "tie_rate": ties}
    if a.population is not None and b.population is not None \
            and math.isclose(a.population, b.population, rel_tol=_TARGET_RTOL):
        pop_a, pop_b = abs_errors(a.values, a.population)[both], abs_errors(b.values, a.population)[both]
        entry["population_abs_error_difference"], entry["population_abs_error_difference_se"], _ = \
            mean_difference(pop_a, pop_b)
        entry["population_win_rate"], entry["population_win_rate_se"], _ = win_rate(pop_a, pop_b)
    else:
        entry.update(dict.fromkeys(("population_abs_error_difference", "population_abs_error_difference_se",
                                    "population_win_rate", "population_win_rate_se"), math.nan))
    exact_a, exact_b = _exact_values(a), _exact_values(b)
    if exact_a is not None and exact_b is not None and exact_a.shape == exact_b.shape == both.shape:
        ea, eb = exact_a[both], exact_b[both]
        entry["expected_abs_error_difference"], entry["expected_abs_error_difference_se"], _ = \
            mean_difference(ea, eb)
        entry["expected_abs_error_dominance"], entry["expected_abs_error_max_difference"] = exact_dominance(ea, eb)
    if a.no_mean or b.no_mean:
        for key in ("abs_error_difference", "abs_error_difference_se", "population_abs_error_difference",
                    "population_abs_error_difference_se"):
            entry[key] = math.nan
        which = " and ".join(c.mechanism for c in (a, b) if c.no_mean)
        entry["note"] = (f"mean differences undefined: the error of {which} has no mean (Cauchy noise, unclamped); "
                         "the win rate is defined")
    return {k: (_number(v) if isinstance(v, float) else v) for k, v in entry.items()}


def paired_entries(cells: list[PairedCell]) -> list[list[dict]]:
    """For each cell of a block, its paired comparisons with every comparable other cell (in block order)."""
    out: list[list[dict]] = [[] for _ in cells]
    for i, a in enumerate(cells):
        for j, b in enumerate(cells):
            if i != j and comparable(a, b):
                out[i].append(pair(a, b))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Reading them back: one record per pair, and the report's table.


def _privacy(params: dict) -> tuple:
    """The cell's privacy parameters that are set (a None default, e.g. delta of a pure-DP release, is not)."""
    return tuple((p, params[p]) for p in PRIVACY_PARAMETERS if (params or {}).get(p) is not None)


def _dataset_key(row: dict) -> str:
    return json.dumps([row.get("dataset"), row.get("dataset_params"), row.get("num_trials")], sort_keys=True)


def paired_records(rows) -> list[dict]:
    """One flat record per (cell, comparable cell): the cell's identity and parameters, then the pair's fields
    (the other cell's parameters as ``versus_<name>``). For :func:`gpuprivacy.sweeps.read_paired`."""
    out = []
    for row in rows:
        for entry in row.get("paired") or ():
            record = {k: row.get(k) for k in ("sweep", "cell_id", "mechanism", "dataset", "num_trials", "n")}
            for key, value in (row.get("mechanism_params") or {}).items():
                record[key] = value
            for key, value in (row.get("dataset_params") or {}).items():
                record[key if key not in record else f"dataset_{key}"] = value
            for key, value in entry.items():
                if key == "versus_params":
                    record.update({f"versus_{k}": v for k, v in value.items()})
                else:
                    record[key] = value
            out.append(record)
    return out


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _interval(mean, se, *, undefined: bool) -> str:
    if undefined:
        return "undefined"
    if mean is None:
        return "n/a"
    if se is None:
        return _fmt(mean)
    return f"{_fmt(mean)} [{_fmt(mean - Z95 * se)}, {_fmt(mean + Z95 * se)}]"


def _params_text(params: dict) -> str:
    shown = {k: v for k, v in (params or {}).items() if k not in PRIVACY_PARAMETERS and v is not None}
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or "-"


def paired_table(rows, reference: str | None = None) -> str:
    """The report's "## Paired differences" section (Markdown), or "" when no row has paired data.

    Per dataset cell (dataset, its parameters, trials) and privacy parameters, each mechanism versus the
    reference on the same datasets: the mean difference of |error| (against each trial's statistic and,
    where stated, the population value) with its 95% interval (estimate +- 1.96 standard errors),
    "undefined" where the mean does not exist, and the win rate P(|error| < |error of the reference|)
    with its 95% interval.

    Args:
      rows: the results file's rows (dicts, as :func:`gpuprivacy.sweeps.run_sweep` writes them).
      reference: the mechanism every other is compared with; default ``"nonprivate"`` when present, else,
        in each group, the mechanism with the smallest ``mae``.
    """
    rows = [row for row in rows if row.get("status") == "ok" and row.get("paired")]
    if not rows:
        return ""
    if reference is None and any(row.get("mechanism") == "nonprivate" for row in rows):
        reference = "nonprivate"
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault((_dataset_key(row), _privacy(row.get("mechanism_params"))), []).append(row)
    lines = ["## Paired differences", "",
             "Each mechanism against the reference on the same datasets, trial by trial (common random numbers), "
             "over the trials where both released: the mean of |error| - |error of the reference| with its 95% "
             f"interval (+-{Z95:.2f} standard errors of the paired differences; negative favours the mechanism), and "
             "the win rate P(|error| < |error of the reference|) with its 95% interval. \"undefined\": an error "
             "with no mean (Cauchy noise). Cells computed in different runs (a resumed sweep) are not paired.", ""]
    found = False
    for (data_key, privacy), members in groups.items():
        if reference is not None:
            pairs = [(row, entry) for row in members if row.get("mechanism") != reference
                     for entry in row["paired"] if entry["versus_mechanism"] == reference]
        else:
            candidates = [row for row in members if (row.get("metrics") or {}).get("mae") is not None]
            if not candidates:
                continue
            best = min(candidates, key=lambda row: row["metrics"]["mae"])
            pairs = [(row, entry) for row in members if row is not best
                     for entry in row["paired"] if entry["versus_cell"] == best["cell_id"]]
        if not pairs:
            continue
        found = True
        first = pairs[0][0]
        data_params = ", ".join(f"{k}={v}" for k, v in (first.get("dataset_params") or {}).items())
        privacy_text = ", ".join(f"{k}={v}" for k, v in privacy) or "no privacy parameter"
        lines += [f"### {first.get('dataset')} ({data_params}), {first.get('num_trials')} trials; {privacy_text}", "",
                  "| mechanism | parameters | versus | trials | mean abs error difference [95% CI] | "
                  "population abs error difference [95% CI] | win rate [95% CI] |",
                  "|---|---|---|---|---|---|---|"]
        for row, entry in pairs:
            undefined = "note" in entry
            versus_text = f"{entry['versus_mechanism']} ({_params_text(entry.get('versus_params'))})"
            difference = _interval(entry.get("abs_error_difference"), entry.get("abs_error_difference_se"),
                                   undefined=undefined)
            has_population = entry.get("population_win_rate") is not None
            population = _interval(entry.get("population_abs_error_difference"),
                                   entry.get("population_abs_error_difference_se"),
                                   undefined=undefined) if has_population else "n/a"
            win = _interval(entry.get("win_rate"), entry.get("win_rate_se"), undefined=False)
            lines.append(f"| {row.get('mechanism')} | {_params_text(row.get('mechanism_params'))} | {versus_text} | "
                         f"{entry.get('trials')} | {difference} | {population} | {win} |")
        lines.append("")
    return "\n".join(lines) if found else ""
