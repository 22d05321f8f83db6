"""``gpuprivacy study report RESULTS``: plots and a Markdown table from a sweep's results file alone."""

from __future__ import annotations

import itertools
import json
import math
import os
import pathlib
import tempfile
from typing import Any, NamedTuple, Sequence

from gpuprivacy._plots import require_matplotlib
from gpuprivacy.sweeps._paired import Z95, paired_table
from gpuprivacy.sweeps._results import file_in_the_way, read_rows

_Z95 = Z95  # two-sided 95% normal quantile, for the error bars and the table's +- (one constant with the pairs)


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
                 out_dir: str | os.PathLike | None = None, facet: Sequence[str] | None = None,
                 reference: str | None = None) -> dict:
    """Writes ``report.md`` (a table of every cell), one PNG plot and ``summary.json`` from a results file.

    The plot shows ``metric`` against the swept axis ``x``, one panel per combination of the
    ``facet`` axes. Each mechanism (with any non-numeric parameter that varies within it, e.g. the
    smooth-sensitivity median's ``noise``) has one colour and one marker in every panel; a parameter
    that is fixed within each mechanism (``clip``, ``lower``, ``radius``) is part of the mechanism
    and splits nothing. The other varying axes (e.g. ``epsilon`` when it is not a facet) are told
    apart by line style. Every point has a marker and, where the results carry ``<metric>_se``, a
    95% error bar (``metric`` +- 1.96 standard errors); series are shifted slightly along ``x`` so
    that coinciding points stay visible. One legend, below the panels, serves the whole figure.
    Axes are logarithmic when the values are positive and span a factor of 10 or more.

    Args:
      results: the JSON-lines file a sweep wrote (rows are checked by their digests).
      x: the horizontal axis; default the dataset's ``n`` if it varies, else the first varying
        numeric parameter.
      metric: default ``mae`` (errors), else ``selection_accuracy``, else ``accuracy``.
      out_dir: default ``<results stem>_report`` beside the results file.
      facet: the axes whose every combination gets a panel of its own; default ``("dataset",)``
        if the dataset varies, else one panel. ``()`` draws one panel.
      reference: the mechanism the "Paired differences" section compares every other with, on the same
        datasets (:func:`~gpuprivacy.sweeps.paired_table`); default ``nonprivate`` when the sweep has it,
        else the most accurate mechanism of each group. The section is there when the rows carry pairs.

    Returns:
      ``{"files": [paths written], "x": x, "metric": metric}``.

    Raises:
      FileNotFoundError: no such results file.
      ValueError: nothing to plot, an unknown ``x``, ``metric`` or ``facet`` axis, or an output the report cannot write
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
        # An axis some cells lack (the nonprivate baseline has no epsilon) is numeric if every value present is.
        numeric = [k for k in varying if all(_is_number(c[k]) for c in coords if c.get(k) is not None)]
        x = "n" if "n" in numeric else (numeric[0] if numeric else None)
        if x is None:
            raise ValueError(f"{results}: no numeric axis varies across the cells ({varying or 'none vary'}); "
                             "there is nothing to plot against. Pass --x with a parameter name.")
    elif not any(x in c for c in coords):
        raise ValueError(f"--x {x!r} is not an axis of {results}; its axes are {sorted(set().union(*coords))}.")
    metric = _default_metric(rows) if metric is None else metric
    if not any(metric in r["metrics"] for r in rows):
        raise ValueError(f"--metric {metric!r} is not in {results}; its metrics are {sorted(rows[0]['metrics'])}.")
    facet = _check_facet(facet, coords, varying, x, results)
    mechanisms = sorted({str(r.get("mechanism")) for r in rows})
    if reference is not None and reference not in mechanisms:
        raise ValueError(f"--reference {reference!r} is not a mechanism of {results}; its mechanisms are "
                         f"{mechanisms}.")
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

    layout = _plot_layout(rows, x=x, metric=metric, facet=facet)
    canvas = _draw(layout)
    canvas.print_png(str(plot_path))

    table = _markdown_table(rows, coords, varying, metric)
    paired = paired_table(rows, reference=reference)
    report_path.write_text(
        f"# {rows[0].get('sweep', results.stem)}: {metric} vs {x}\n\n"
        f"From `{results.name}` ({len(rows)} cells). Error bars and +- are 95% normal intervals "
        f"({_Z95:.2f} standard errors).\n\n![{metric} vs {x}]({plot_path.name})\n\n{table}\n"
        + (f"\n{paired}\n" if paired else ""))
    summary_path.write_text(json.dumps({"results": str(results), "x": x, "metric": metric,
                                        "axes": varying, "facet": list(facet), "cells": len(rows)}, indent=1) + "\n")
    return {"files": [report_path, plot_path, summary_path], "x": x, "metric": metric}


_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
            "#bcbd22")  # tab10, reordered so that the first few series differ most
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
_LINESTYLES = ("-", "--", ":", "-.", (0, (8, 2)), (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (3, 2, 1, 2, 1, 2, 1, 2)),
               (0, (10, 2, 2, 2)), (0, (2, 1)), (0, (12, 3, 1, 3, 1, 3)), (0, (4, 4)))
_FEW_TICKS = 8  # up to this many distinct x values get a tick each, labelled plainly


def _check_facet(facet, coords, varying, x, results) -> tuple[str, ...]:
    """The facet axes, validated: ``None`` means the dataset if it varies, else none."""
    if facet is None:
        return ("dataset",) if "dataset" in varying and x != "dataset" else ()
    facet = (facet,) if isinstance(facet, str) else tuple(facet)
    axes = sorted(set().union(*coords))
    for key in facet:
        if not isinstance(key, str) or not any(key in c for c in coords):
            raise ValueError(f"--facet {key!r} is not an axis of {results}; its axes are {axes} "
                             "(pass a comma-separated list of them, e.g. --facet dataset,epsilon).")
        if key == x:
            raise ValueError(f"--facet {key!r} is the horizontal axis (--x {x}); facet by another of {axes}.")
    if len(set(facet)) < len(facet):
        raise ValueError(f"--facet {','.join(facet)!r} names an axis twice; name each once.")
    return facet


def _sort_key(value):
    """Numbers in numeric order, before everything else in text order."""
    return (0, value, "") if _is_number(value) else (1, 0, json.dumps(value, sort_keys=True))


class _Line(NamedTuple):
    series: tuple  # the mechanism and its varying non-numeric parameters: colour and marker
    style: tuple   # the other varying axes that are neither x nor a facet: line style
    points: list   # (x, value or None, standard error or None), sorted by x


class _Layout(NamedTuple):
    """What the figure shows, decided from the rows alone (no matplotlib): panels, series and styles."""
    x: str
    metric: str
    facet: tuple[str, ...]
    facet_values: list[list]   # per facet key, its values in order
    panels: dict[tuple, list[_Line]]  # facet values -> lines, panels in order
    series_keys: list[str]
    style_keys: list[str]
    series: list[tuple]        # every series of the figure, sorted: index -> colour and marker
    styles: list[tuple]        # every style of the figure, sorted: index -> line style
    undefined: set[tuple]      # series whose metric is undefined (None) in every cell


def _plot_layout(rows: list[dict], *, x: str, metric: str, facet: Sequence[str] = ()) -> _Layout:
    """Splits the rows into panels (one per combination of ``facet``), series and line styles.

    A mechanism parameter that takes one value within each mechanism (``clip``, ``lower``,
    private-median's ``radius``) belongs to the mechanism and splits nothing, even when the
    mechanisms differ in it. One that varies within a mechanism splits its series (colour and
    marker) when it is not a number (smooth sensitivity's ``noise``), and is a line style when it is
    (``epsilon``), as is every other varying axis (the dataset and its parameters, the trials).
    """
    facet = tuple(facet)
    coords = [_axes_of(r) for r in rows]
    mechanism_keys = {k for r in rows for k in r.get("mechanism_params", {})}
    by_mechanism: dict[str, dict[str, set]] = {}
    for c in coords:
        for k, v in c.items():
            by_mechanism.setdefault(c["mechanism"], {}).setdefault(k, set()).add(json.dumps(v, sort_keys=True))
    within = {k for values in by_mechanism.values() for k, seen in values.items() if len(seen) > 1}
    free = [k for k in _varying(coords) if k not in (x, "mechanism") and k not in facet]
    series_keys = ["mechanism"] + [k for k in free if k in mechanism_keys and k in within
                                   and any(c.get(k) is not None and not _is_number(c[k]) for c in coords)]
    style_keys = [k for k in free if k not in series_keys and (k not in mechanism_keys or k in within)]

    # A cell that lacks a facet axis (the nonprivate baseline has no epsilon) is a reference for every value
    # of it: drawn in each of those panels, not in a panel of its own.
    present = {k: list({json.dumps(c[k], sort_keys=True): c[k] for c in coords if c.get(k) is not None}.values())
               or [None] for k in facet}
    panels: dict[tuple, dict[tuple, list]] = {}
    defined: dict[tuple, bool] = {}
    for row, c in zip(rows, coords):
        series = tuple(c.get(k) for k in series_keys)
        defined[series] = defined.get(series, False) or row["metrics"].get(metric) is not None
        if c.get(x) is None:
            continue
        style = tuple(c.get(k) for k in style_keys)
        point = (c[x], row["metrics"].get(metric), row["metrics"].get(metric + "_se"))
        for panel in itertools.product(*[[c[k]] if c.get(k) is not None else present[k] for k in facet]):
            panels.setdefault(panel, {}).setdefault((series, style), []).append(point)
    order = lambda values: [_sort_key(v) for v in values]  # noqa: E731
    series = sorted(defined, key=order)
    styles = sorted({style for lines in panels.values() for _, style in lines}, key=order)
    return _Layout(
        x=x, metric=metric, facet=facet,
        facet_values=[sorted({p[i] for p in panels}, key=_sort_key) for i in range(len(facet))],
        panels={p: [_Line(s, st, sorted(points, key=lambda q: _sort_key(q[0])))
                    for (s, st), points in sorted(panels[p].items(), key=lambda kv: order(kv[0][0] + kv[0][1]))]
                for p in sorted(panels, key=order)},
        series_keys=series_keys, style_keys=style_keys, series=series, styles=styles,
        undefined={s for s, ok in defined.items() if not ok})


def _tick_label(value) -> str:
    return f"{value:,.10g}".replace(",", "\u2009") if abs(value) >= 10_000 else f"{value:.10g}"


def _draw(layout: _Layout):
    """Draws ``layout`` on a new figure and returns its Agg canvas (``canvas.figure`` is the figure)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

    Figure, FigureCanvasAgg = require_matplotlib("gpuprivacy study report")
    x, metric, facet = layout.x, layout.metric, layout.facet
    if len(facet) == 2 and len(layout.facet_values[1]) <= 5:  # a grid: rows by the first key, columns by the second
        nrows, cols = len(layout.facet_values[0]), len(layout.facet_values[1])
        slots = {p: layout.facet_values[0].index(p[0]) * cols + layout.facet_values[1].index(p[1])
                 for p in layout.panels}
    else:
        cols = min(4, math.ceil(math.sqrt(len(layout.panels))) if len(layout.panels) > 3 else len(layout.panels))
        nrows = math.ceil(len(layout.panels) / cols)
        slots = {p: i for i, p in enumerate(layout.panels)}
    fig = Figure(figsize=(max(6.4, 3.6 * cols + 0.6), 2.9 * nrows + 0.4), layout="constrained")
    canvas = FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, cols, squeeze=False, sharex=True).ravel()

    xs_all = sorted({p[0] for lines in layout.panels.values() for line in lines for p in line.points}, key=_sort_key)
    numeric_x = all(_is_number(v) for v in xs_all) and bool(xs_all)
    log_x = numeric_x and min(xs_all) > 0 and max(xs_all) >= 10 * min(xs_all)
    # The dodge: series j of m is shifted by (j/(m-1) - 1/2) of 0.15 of the smallest gap between x
    # values (in decades on a log axis), so that coinciding points stay apart and never reach the next x.
    where = [math.log10(v) for v in xs_all] if log_x else list(xs_all) if numeric_x else []
    gaps = [b - a for a, b in zip(where, where[1:]) if b > a]
    width = 0.15 * min(gaps) if gaps else 0.0
    combos = [(s, st) for s in layout.series for st in layout.styles]
    shift = {combo: (width * (j / (len(combos) - 1) - 0.5) if len(combos) > 1 else 0.0)
             for j, combo in enumerate(combos)}

    def colour(series):
        return _COLOURS[layout.series.index(series) % len(_COLOURS)]

    def marker(series):
        return _MARKERS[layout.series.index(series) % len(_MARKERS)]

    def linestyle(style):
        return _LINESTYLES[layout.styles.index(style) % len(_LINESTYLES)]

    def series_label(series):
        return _label(layout.series_keys, series) if len(layout.series_keys) > 1 else str(series[0])

    zero_series = set()  # series with a value of exactly 0 on a log axis (not drawn there)
    for panel, lines in layout.panels.items():
        ax = axes[slots[panel]]
        ys_all = []
        for line in lines:
            points = [p for p in line.points if p[1] is not None]
            if not points:
                continue
            d = shift[(line.series, line.style)]
            xs = [p[0] * 10 ** d if log_x else p[0] + d if numeric_x else p[0] for p in points]
            ys = [p[1] for p in points]
            errors = [_Z95 * p[2] if p[2] is not None else math.nan for p in points]
            ax.errorbar(xs, ys, yerr=None if all(math.isnan(e) for e in errors) else errors,
                        color=colour(line.series), marker=marker(line.series), markersize=4,
                        linestyle=linestyle(line.style), linewidth=1.2, capsize=2.5, elinewidth=0.9,
                        label=series_label(line.series))
            ys_all += ys
        if log_x:
            ax.set_xscale("log")
        # Exact zeros (the nonprivate baseline's error against its own statistic) do not stop a log axis: they
        # cannot be drawn on it, and the legend says so.
        positive = [y for y in ys_all if y > 0]
        if positive and min(ys_all) >= 0 and max(positive) >= 10 * min(positive):
            ax.set_yscale("log")
            zero_series.update(line.series for line in lines
                               if any(p[1] == 0 for p in line.points if p[1] is not None))
        ax.set_title(_label(facet, panel) if facet else "", fontsize=9)
        ax.grid(True, alpha=0.3)
        if not ys_all:  # every cell of the panel has the metric undefined (or infeasible): say so, draw nothing
            ax.text(0.5, 0.5, f"{metric}: no defined value here\n(see the table)", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8)
    for index, ax in enumerate(axes):
        if index not in slots.values():
            ax.set_visible(False)
            continue
        if index // cols == nrows - 1 or index + cols not in slots.values():  # the lowest panel of its column
            ax.set_xlabel(x)
            ax.xaxis.set_tick_params(labelbottom=True)
        if index % cols == 0:
            ax.set_ylabel(metric)
    if numeric_x and len(xs_all) <= _FEW_TICKS:  # a tick at each value, labelled plainly (100, not 10^2)
        axes[0].xaxis.set_major_locator(FixedLocator(xs_all))
        axes[0].xaxis.set_minor_locator(NullLocator())
        axes[0].xaxis.set_major_formatter(FuncFormatter(lambda v, _: _tick_label(v)))
    elif numeric_x and not log_x:
        axes[0].xaxis.set_major_locator(MaxNLocator(nbins=6))
    if numeric_x and width and len(xs_all) > 1:  # room for the dodged points at both ends
        pad = 0.6 * width + (0.05 * (where[-1] - where[0]))
        lo, hi = where[0] - pad, where[-1] + pad
        axes[0].set_xlim(10 ** lo if log_x else lo, 10 ** hi if log_x else hi)

    series_handles = []
    for series in layout.series:
        label = series_label(series)
        if series in layout.undefined:
            label += f" ({metric} undefined: see the table)"
        elif series in zero_series:
            label += f" ({metric} = 0, off the log axis: see the table)"
        series_handles.append(Line2D([], [], color=colour(series), marker=marker(series), linestyle="-",
                                     label=label))
    style_handles = [Line2D([], [], color="0.3", linestyle=linestyle(style), linewidth=1.4,
                            label=_label(layout.style_keys, ["-" if v is None else v for v in style]))
                     for style in layout.styles] if len(layout.styles) > 1 else []
    bars = any(p[1] is not None and p[2] is not None
               for lines in layout.panels.values() for line in lines for p in line.points)
    note = "; ".join([metric] + ["bars: 95% intervals (1.96 standard errors)"] * bars
                     + [f"\npoints shifted slightly along {x} so that none hide"] * bool(width)
                     + [f"\nline styles repeat: split by --facet {','.join(layout.style_keys)}"]
                     * (len(style_handles) > len(_LINESTYLES))).replace("; \n", ";\n")
    # The widest legend that fits the figure; a figure too narrow for one column is widened.
    for ncols in range(min(len(series_handles) + bool(style_handles), 4), 0, -1):
        for old in list(fig.legends):
            old.remove()
        legend = fig.legend(handles=_legend_columns(series_handles, style_handles, ncols), loc="outside lower center",
                            ncols=ncols, fontsize=8, title=note, title_fontsize=8, frameon=False, handlelength=3.2)
        canvas.draw()
        room = fig.bbox.width - legend.get_window_extent(canvas.get_renderer()).width
        if room >= 0:
            break
    if room < 0:
        fig.set_figwidth(fig.get_figwidth() - room / fig.dpi + 0.2)
    # The panels keep their height: the figure grows by the legend's.
    fig.set_figheight(fig.get_figheight() + legend.get_window_extent(canvas.get_renderer()).height / fig.dpi)
    canvas.draw()
    for ax in axes:
        if ax.get_visible():
            _declutter_ticks(ax, canvas.get_renderer())
    return canvas


def _legend_columns(series_handles, style_handles, ncols):
    """The legend's handles in the order matplotlib fills ``ncols`` columns (down each column), padded
    with blanks so that the line styles have the last column to themselves."""
    if not style_handles or ncols < 2:
        return series_handles + style_handles
    from matplotlib.lines import Line2D

    per_column = max(math.ceil(len(series_handles) / (ncols - 1)), len(style_handles))
    blank = lambda: Line2D([], [], linestyle="none", label=" ")  # noqa: E731
    return (series_handles + [blank() for _ in range(per_column * (ncols - 1) - len(series_handles))]
            + style_handles + [blank() for _ in range(per_column - len(style_handles))])


def _declutter_ticks(ax, renderer, angle: float = 35.0) -> None:
    """Rotates, then thins, the x tick labels of ``ax`` until no two overlap."""
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    if len(labels) < 2:
        return
    boxes = [t.get_window_extent(renderer) for t in labels]
    if all(a.x1 + 3 <= b.x0 for a, b in zip(boxes, boxes[1:])):
        return
    for label in labels:  # rotated, two labels clear each other when their anchors are this far apart
        label.set_rotation(angle)
        label.set_horizontalalignment("right")
        label.set_rotation_mode("anchor")
    height = max(b.height for b in boxes)
    anchors = [b.x0 + b.width / 2 for b in boxes]
    need = 1.3 * height / math.sin(math.radians(angle))
    step = 1
    while any(b - a < need * step for a, b in zip(anchors, anchors[1:])) and step < len(labels):
        step *= 2  # keep every step-th label: the spacing between the kept ones grows by step
    for i, label in enumerate(labels):
        label.set_visible(i % step == 0)


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


