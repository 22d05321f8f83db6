"""Lazy access to matplotlib (an optional dependency: ``pip install gpuprivacy[plots]``)."""

from __future__ import annotations


def require_matplotlib(who: str = "gpuprivacy"):
    """Returns ``(Figure, FigureCanvasAgg)``; raises a clear ImportError without matplotlib.

    Uses the object-oriented API with the Agg canvas, never ``pyplot``, so it
    neither needs a display nor changes the caller's matplotlib backend.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(f"{who} draws its plots with matplotlib, which is not installed. "
                          "Install it with `pip install gpuprivacy[plots]` (or `pip install matplotlib`).") from err
    return Figure, FigureCanvasAgg
