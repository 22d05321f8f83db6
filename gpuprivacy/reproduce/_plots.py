"""Plotting helpers shared by the reproductions: lazy matplotlib (one implementation: :mod:`gpuprivacy._plots`),
a constrained-layout figure, a legend outside the data, ticks at given values that never overlap, and a
check of all three (:func:`layout_problems`) that the tests run on every plot they draw.
"""

from __future__ import annotations

import functools
import math
import textwrap

import numpy as np

from gpuprivacy._plots import require_matplotlib as _require

require_matplotlib = functools.partial(_require, "gpuprivacy.reproduce")


def figure(width: float, height: float, *, dpi: int = 100):
    """A ``Figure`` with constrained layout (labels and outside legends get room) and an Agg canvas attached."""
    Figure, Canvas = require_matplotlib()
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    Canvas(fig)
    return fig


def save_png(fig, path) -> None:
    """Draws ``fig`` (its layout settled) and writes it as a PNG."""
    fig.canvas.print_png(str(path))


def legend_outside(fig, ax, *, where: str = "right", fontsize: float = 8, **kwargs):
    """One legend for ``ax``'s labelled artists, placed outside every axes (constrained layout makes room),
    so that it never covers data. ``where`` is ``"right"`` (a column beside the axes) or ``"bottom"``.
    The entries keep the order in which the artists were added (matplotlib lists error bars last)."""
    locations = {"right": "outside right upper", "bottom": "outside lower center"}
    if where not in locations:
        raise ValueError(f"where must be one of {sorted(locations)}, got {where!r}.")
    handles, labels = ax.get_legend_handles_labels()
    order = {id(artist): i for i, artist in enumerate(ax.get_children() + list(ax.containers))}
    rank = [min(order.get(id(part), len(order)) for part in [h, *_parts(h)]) for h in handles]
    pairs = sorted(zip(rank, range(len(handles)), handles, labels))
    handles, labels = [p[2] for p in pairs], [p[3] for p in pairs]
    if where == "bottom":
        kwargs.setdefault("ncols", min(len(labels), 3) or 1)
    return fig.legend(handles, labels, loc=locations[where], fontsize=fontsize, **kwargs)


def _parts(handle) -> list:
    """The artists of a container handle (an errorbar's line, a bar's patches), else none."""
    from matplotlib.container import Container

    if not isinstance(handle, (Container, tuple, list)):
        return []
    return [leaf for part in handle if part is not None for leaf in [part, *_parts(part)]]


def plain_label(value) -> str:
    """A tick label for a value as a person writes it: ``15``, ``0.25``, ``1e+06`` (no 10^x mathtext)."""
    if isinstance(value, str):
        return value
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e6 else f"{value:.3g}"


def wrap_label(label: str, width: int = 12) -> str:
    """A category label broken onto lines of at most ``width`` characters (underscores read as spaces)."""
    return "\n".join(textwrap.wrap(label.replace("_", " "), width)) or label


def ticks_at(fig, axis, values, labels=None, *, max_ticks: int = 8, fontsize: float | None = None) -> None:
    """Major ticks of ``axis`` (``ax.xaxis`` / ``ax.yaxis``) at exactly ``values``, no minor ticks, plain labels.

    More than ``max_ticks`` values are thinned evenly (the first and the last kept). Call it after the
    axis scale is set (setting a scale resets the tickers). If the labels still overlap once the figure is
    laid out, the x labels are rotated by 30 degrees and, failing that, thinned by half until they do not.
    """
    from matplotlib import ticker

    values = [float(v) for v in values]
    labels = [plain_label(v) for v in values] if labels is None else [str(label) for label in labels]
    if max_ticks < 2:
        raise ValueError(f"max_ticks must be >= 2 (the first and the last value), got {max_ticks!r}.")
    if len(labels) != len(values):
        raise ValueError(f"labels must match values one to one, got {len(labels)} labels for {len(values)} values.")
    keep = _thinned(len(values), max_ticks)
    while True:
        axis.set_major_locator(ticker.FixedLocator([values[i] for i in keep]))
        axis.set_major_formatter(ticker.FixedFormatter([labels[i] for i in keep]))
        axis.set_minor_locator(ticker.NullLocator())
        if fontsize is not None:
            axis.set_tick_params(labelsize=fontsize)
        if not _overlapping(fig, axis) or len(keep) <= 2:
            return
        if axis.axis_name == "x" and not axis.get_ticklabels()[0].get_rotation():
            axis.set_tick_params(labelrotation=30)
            for label in axis.get_ticklabels():
                label.set_horizontalalignment("right")
                label.set_rotation_mode("anchor")
            continue
        keep = _thinned(len(values), max(2, len(keep) // 2))


def _thinned(count: int, most: int) -> list[int]:
    if count <= most:
        return list(range(count))
    step = math.ceil((count - 1) / (most - 1))
    keep = list(range(0, count, step))
    if keep[-1] != count - 1:
        keep[-1] = count - 1
    return keep


def _drawn_labels(axis) -> list:
    """The tick labels ``axis`` draws: visible, non-empty, at ticks inside the view limits (the locator's
    ticks outside them keep labels that are never drawn)."""
    transform = axis.get_transform()
    low, high = sorted(np.ravel(transform.transform(np.asarray(axis.get_view_interval(), dtype=float))))
    slack = 1e-9 * max(high - low, 1e-300)
    out = []
    for ticks in (axis.get_major_ticks(len(axis.get_majorticklocs())),
                  axis.get_minor_ticks(len(axis.get_minorticklocs()))):
        for tick in ticks:
            loc = tick.get_loc()
            if loc is None:
                continue
            where = float(np.ravel(transform.transform(np.asarray([loc], dtype=float)))[0])
            if not low - slack <= where <= high + slack:
                continue
            out += [label for label in (tick.label1, tick.label2) if label.get_visible() and label.get_text()]
    return out


def _overlapping(fig, axis) -> bool:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [label.get_window_extent(renderer) for label in _drawn_labels(axis)]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def layout_problems(fig) -> list[str]:
    """What makes ``fig`` hard to read, after drawing it: tick labels that overlap each other or leave the
    figure, and legends that overlap an axes (any legend inside an axes counts, even over an empty corner:
    a legend placed outside every axes covers no data whatever the data are). An empty list: none of these."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    problems = []
    for n, ax in enumerate(fig.axes):
        for axis in (ax.xaxis, ax.yaxis):
            texts = _drawn_labels(axis)
            boxes = [t.get_window_extent(renderer) for t in texts]
            for t, box in zip(texts, boxes):
                if not (page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0
                        and box.y1 <= page.y1 + 1):
                    problems.append(f"axes {n} {axis.axis_name} tick label {t.get_text()!r} leaves the figure")
            for i, (a, box_a) in enumerate(zip(texts, boxes)):
                for b, box_b in zip(texts[i + 1:], boxes[i + 1:]):
                    if box_a.overlaps(box_b):
                        problems.append(f"axes {n} {axis.axis_name} tick labels {a.get_text()!r} and "
                                        f"{b.get_text()!r} overlap")
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    for legend in (lg for lg in legends if lg is not None):
        box = legend.get_window_extent(renderer)
        for n, ax in enumerate(fig.axes):
            if box.overlaps(ax.get_window_extent(renderer)):
                problems.append(f"a legend covers the data area of axes {n}")
    return problems
