"""``gpuprivacy study report RESULTS``: plots and a Markdown table from a sweep's results file alone."""

from __future__ import annotations

import json
import math
import os
import pathlib
import tempfile
from typing import Any

from gpuprivacy._plots import require_matplotlib
from gpuprivacy.sweeps._results import file_in_the_way, read_rows

_Z95 = 1.959963984540054  # two-sided 95% normal quantile, for the confidence bands


def _axes_of(row: dict) -> dict[str, Any]:
    """A row's grid coordinates, flat: the mechanism, the dataset, their parameters, the trials."""
    out = {"mechanism": row["mechanism"], "dataset": row["dataset"], "trials": row["num_trials"]}
    out.update({k: v for k, v in row.get("mechanism_params", {}).items()})
    out.update({k: v for k, v in row.get("dataset_params", {}).items()})
    return out


def _varying(coords: list[dict]) -> list[str]:
    keys = list(dict.fromkeys(k for c in coords for k in c))
    # A key that only some mechanisms have (e.g. smooth sensitivity's noise) varies only if it takes
    # several values where it is present.
    return [k for k in keys if len({json.dumps(c[k], sort_keys=True) for c in coords if k in c}) > 1]


def _default_metric(rows) -> str:
    for metric in ("mae", "selection_accuracy", "accuracy"):
        if any(r["metrics"].get(metric) is not None for r in rows):
            return metric
    return next(iter(rows[0]["metrics"]))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _label(keys, values) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values)) or "all cells"


def study_report(results: str | os.PathLike, *, x: str | None = None, metric: str | None = None,
                 out_dir: str | os.PathLike | None = None) -> dict:
    """Writes ``report.md`` (a table of every cell), one PNG plot and ``summary.json`` from a results file.

    The plot shows ``metric`` against the swept axis ``x`` with one line per mechanism (and per
    other non-numeric mechanism parameter that varies) and a shaded 95% confidence band
    (``metric`` +- 1.96 standard errors, where the results carry ``<metric>_se``); one panel per
    combination of the other varying axes (dataset, epsilon, ...). Axes are logarithmic when the
    values are positive and span a factor of 10 or more.

    Args:
      results: the JSON-lines file a sweep wrote (rows are checked by their digests).
      x: the horizontal axis; default the dataset's ``n`` if it varies, else the first varying
        numeric parameter.
      metric: default ``mae`` (errors), else ``selection_accuracy``, else ``accuracy``.
      out_dir: default ``<results stem>_report`` beside the results file.

    Returns:
      ``{"files": [paths written], "x": x, "metric": metric}``.

    Raises:
      FileNotFoundError: no such results file.
      ValueError: nothing to plot, an unknown ``x`` or ``metric``, or an output the report cannot write
        (``out_dir`` a file or read-only, one of the report's files a folder); checked before any plot.
    """
    results = pathlib.Path(results)
    rows = [r for r in read_rows(results) if isinstance(r.get("metrics"), dict)]
    if not rows:
        raise ValueError(f"{results} holds no sweep rows with metrics; run a sweep first (gpuprivacy sweep CONFIG).")
    digests = sorted({r["config_digest"] for r in rows if "config_digest" in r})
    if len(digests) > 1:  # files a sweep writes hold one config; a hand-made concatenation is not compared
        raise ValueError(f"{results} mixes the rows of {len(digests)} configs (config digests {', '.join(digests)}); "
                         "a report compares the cells of one config. Split the file by config_digest.")
    coords = [_axes_of(r) for r in rows]
    varying = _varying(coords)
    if x is None:
        numeric = [k for k in varying if all(_is_number(c.get(k)) for c in coords)]
        x = "n" if "n" in numeric else (numeric[0] if numeric else None)
        if x is None:
            raise ValueError(f"{results}: no numeric axis varies across the cells ({varying or 'none vary'}); "
                             "there is nothing to plot against. Pass --x with a parameter name.")
    elif not any(x in c for c in coords):
        raise ValueError(f"--x {x!r} is not an axis of {results}; its axes are {sorted(set().union(*coords))}.")
    metric = _default_metric(rows) if metric is None else metric
    if not any(metric in r["metrics"] for r in rows):
        raise ValueError(f"--metric {metric!r} is not in {results}; its metrics are {sorted(rows[0]['metrics'])}.")
    series_keys = ["mechanism"] + [k for k in varying if k not in ("mechanism", x, "trials")
                                   and any(isinstance(c.get(k), str) for c in coords) and k != "dataset"]
    panel_keys = [k for k in varying if k not in series_keys and k != x]
    out_dir = pathlib.Path(out_dir) if out_dir is not None else results.with_name(results.stem + "_report")
    blocked = file_in_the_way(out_dir)
    if blocked is not None:
        where = "is a file" if blocked == out_dir else f"cannot be created: {str(blocked)!r} is a file"
        raise ValueError(f"the report folder {str(out_dir)!r} {where}; pass --out with a folder name (it is created "
                         "if needed).")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create the report folder {str(out_dir)!r}: {err.strerror or err}. Pass --out "
                         "with a folder in a writable place.") from None
    plot_path, report_path, summary_path = (out_dir / f"{metric}_vs_{x}.png", out_dir / "report.md",
                                            out_dir / "summary.json")
    _check_writable(out_dir, (plot_path, report_path, summary_path))

    panels: dict[tuple, dict[tuple, list]] = {}
    for row, c in zip(rows, coords):
        if c.get(x) is None:
            continue
        panel = tuple(json.dumps(c.get(k)) for k in panel_keys)
        series = tuple(str(c.get(k)) for k in series_keys)
        value = row["metrics"].get(metric)
        se = row["metrics"].get(metric + "_se")
        panels.setdefault(panel, {}).setdefault(series, []).append((c[x], value, se))

    Figure, FigureCanvasAgg = require_matplotlib("gpuprivacy study report")
    cols = min(4, len(panels))
    nrows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * nrows), constrained_layout=True)
    canvas = FigureCanvasAgg(fig)
    for index, (panel, lines) in enumerate(sorted(panels.items())):
        ax = fig.add_subplot(nrows, cols, index + 1)
        xs_all, ys_all = [], []
        for series, points in sorted(lines.items()):
            points = sorted((p for p in points if p[1] is not None), key=lambda p: p[0])
            if not points:
                continue
            xs = [p[0] for p in points]
            ys = [p[1] for p in points]
            (line,) = ax.plot(xs, ys, marker="o", markersize=3, label=_label(series_keys, series))
            if all(p[2] is not None for p in points):
                lo = [y - _Z95 * p[2] for y, p in zip(ys, points)]
                hi = [y + _Z95 * p[2] for y, p in zip(ys, points)]
                ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color(), linewidth=0)
            xs_all += xs
            ys_all += ys
        if xs_all and min(xs_all) > 0 and max(xs_all) >= 10 * min(xs_all):
            ax.set_xscale("log")
        if ys_all and min(ys_all) > 0 and max(ys_all) >= 10 * min(ys_all):
            ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(metric)
        ax.set_title(_label(panel_keys, [json.loads(v) for v in panel]), fontsize=8)
        ax.grid(True, alpha=0.3)
        if not xs_all:  # every cell of the panel has the metric undefined (or infeasible): say so, draw nothing
            ax.text(0.5, 0.5, f"{metric}: no defined value here (see the table)", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8)
        if index == 0 and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    canvas.print_png(str(plot_path))

    table = _markdown_table(rows, coords, varying, metric)
    report_path.write_text(
        f"# {rows[0].get('sweep', results.stem)}: {metric} vs {x}\n\n"
        f"From `{results.name}` ({len(rows)} cells). Bands and +- are 95% normal intervals "
        f"({_Z95:.2f} standard errors).\n\n![{metric} vs {x}]({plot_path.name})\n\n{table}\n")
    summary_path.write_text(json.dumps({"results": str(results), "x": x, "metric": metric,
                                        "axes": varying, "cells": len(rows)}, indent=1) + "\n")
    return {"files": [report_path, plot_path, summary_path], "x": x, "metric": metric}


def _check_writable(out_dir: pathlib.Path, files) -> None:
    """Refuses, before any plot, a report folder this process cannot write in or a report file that is a folder."""
    for path in files:
        if path.is_dir():
            raise ValueError(f"cannot write the report file {str(path)!r}: it is a folder. Move it aside or pass "
                             "--out with another folder.")
        if path.exists() and not os.access(path, os.W_OK):
            raise ValueError(f"cannot write the report file {str(path)!r}: it is read-only. Make it writable or "
                             "pass --out with another folder.")
    try:
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as err:
        raise ValueError(f"cannot write in the report folder {str(out_dir)!r}: {err.strerror or err}. Pass --out "
                         "with a folder in a writable place.") from None


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _markdown_table(rows, coords, varying, metric) -> str:
    keys = [k for k in varying if k != "trials"] or ["mechanism"]
    header = keys + ["trials", metric, "guarantee ε", "guarantee δ", "released", "s/trial"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    order = sorted(range(len(rows)), key=lambda i: [json.dumps(coords[i].get(k), sort_keys=True) for k in keys])
    for i in order:
        m = rows[i]["metrics"]
        value = _fmt(m.get(metric))
        se = m.get(metric + "_se")
        if se is not None and m.get(metric) is not None:
            value += f" ± {_Z95 * se:.2g}"
        if m.get(metric) is None and rows[i].get("undefined_metrics") and metric in rows[i]["undefined_metrics"]:
            value = "undefined (the error has no mean; see abs_error_q50)"
        if rows[i].get("status") == "infeasible":  # the mechanism refused the cell; its row says why
            value = "infeasible: " + rows[i].get("error", "").replace("|", "/")[:120]
        cells = [_fmt(coords[i].get(k)) for k in keys] + [str(rows[i]["num_trials"]), value,
                                                           _fmt(m.get("epsilon")), _fmt(m.get("delta")),
                                                           _fmt(m.get("released")), _fmt(m.get("time_per_trial_s"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


