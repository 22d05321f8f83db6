"""The study report's figure: one colour and marker per mechanism, one legend, panels by --facet only."""

import json

import pytest

pytest.importorskip("matplotlib")

from gpuprivacy.cli import main  # noqa: E402
from gpuprivacy.sweeps import _report, run_sweep  # noqa: E402


def row(mechanism, *, dataset="normal", n=100, epsilon=1.0, mae=0.1, se=0.01, **mechanism_params):
    """A results row as the report reads it (only the fields the figure uses)."""
    return {"mechanism": mechanism, "dataset": dataset, "num_trials": 50,
            "mechanism_params": {"epsilon": epsilon, **mechanism_params}, "dataset_params": {"n": n},
            "metrics": {"mae": mae, "mae_se": se}}


# Two mechanisms with public bounds and clipping, and one (like private-median) without: clip, lower and
# radius are fixed within each mechanism but differ between them.
MECHANISMS = {"alpha-median": {"clip": True, "lower": -5.0}, "beta-median": {"clip": True, "lower": -5.0},
              "gamma-median": {"clip": False, "radius": 0.5}}


def grid(datasets=("normal", "cauchy"), epsilons=(0.5, 1.0), ns=(100, 1000), se=0.01):
    return [row(m, dataset=d, n=n, epsilon=e, mae=0.1 * (i + 1) / n ** 0.5 / e, se=se, **params)
            for i, (m, params) in enumerate(MECHANISMS.items()) for d in datasets for e in epsilons for n in ns]


def draw(rows, facet, x="n"):
    layout = _report._plot_layout(rows, x=x, metric="mae", facet=facet)
    return layout, _report._draw(layout).figure


def lines_by_mechanism(fig):
    """Per visible panel, {series label: [(colour, marker, linestyle)]} of its data lines."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        found = {}
        for container in ax.containers:
            data = container.lines[0]
            found.setdefault(container.get_label(), []).append(
                (data.get_color(), data.get_marker(), data.get_linestyle()))
        out.append(found)
    return out


def test_a_mechanism_has_one_colour_and_marker_in_every_panel():
    rows = grid()
    rows = [r for r in rows if not (r["mechanism"] == "alpha-median" and r["dataset"] == "cauchy")]  # absent in one
    layout, fig = draw(rows, facet=("dataset", "epsilon"))
    panels = lines_by_mechanism(fig)
    assert len(panels) == 4
    styles = {}
    for found in panels:
        for label, seen in found.items():
            styles.setdefault(label, set()).update((colour, marker) for colour, marker, _ in seen)
    assert set(styles) == set(MECHANISMS)
    assert all(len(seen) == 1 for seen in styles.values()), styles
    assert len({next(iter(seen)) for seen in styles.values()}) == 3  # and the mechanisms differ
    assert layout.series == [(m,) for m in sorted(MECHANISMS)]  # assigned in sorted order, so reproducible


def test_one_legend_for_the_whole_figure_and_none_in_the_panels():
    _, fig = draw(grid(), facet=("dataset", "epsilon"))
    assert len(fig.legends) == 1
    assert all(ax.get_legend() is None for ax in fig.axes)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == sorted(MECHANISMS)


def test_parameters_fixed_within_each_mechanism_split_neither_panels_nor_series():
    layout, fig = draw(grid(epsilons=(1.0,)), facet=("dataset",))
    assert len(layout.panels) == 2 and layout.series_keys == ["mechanism"] and layout.style_keys == []
    for found in lines_by_mechanism(fig):
        assert set(found) == set(MECHANISMS)  # gamma-median (clip = false, its own radius) in every panel


def test_a_parameter_that_is_not_a_number_and_varies_within_a_mechanism_is_a_series_of_its_own():
    rows = grid(epsilons=(1.0,)) + [row("smooth-median", n=n, dataset=d, noise=noise, clip=True)
                                    for noise in ("cauchy", "laplace") for n in (100, 1000)
                                    for d in ("normal", "cauchy")]
    layout, _ = draw(rows, facet=("dataset",))
    assert layout.series_keys == ["mechanism", "noise"] and len(layout.panels) == 2
    assert ("smooth-median", "cauchy") in layout.series and ("smooth-median", "laplace") in layout.series


def test_facet_by_dataset_draws_epsilon_as_line_style_with_plain_ticks():
    layout, fig = draw(grid(epsilons=(0.5, 1.0, 2.0)), facet=("dataset",))
    assert len(layout.panels) == 2 and layout.style_keys == ["epsilon"]
    panels = lines_by_mechanism(fig)
    assert len(panels) == 2
    for label in MECHANISMS:
        per_panel = [sorted(found[label], key=str) for found in panels]
        assert per_panel[0] == per_panel[1]  # the same three line styles in both panels
        assert len({linestyle for _, _, linestyle in per_panel[0]}) == 3
    legend = [t.get_text() for t in fig.legends[0].get_texts() if t.get_text().strip()]
    assert legend == sorted(MECHANISMS) + ["epsilon=0.5", "epsilon=1.0", "epsilon=2.0"]
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_xticklabels() if t.get_visible()] == ["100", "1000"]


def test_error_bars_wherever_the_metric_has_a_standard_error():
    rows = grid(epsilons=(1.0,))
    for r in rows:
        if r["mechanism"] == "beta-median":
            r["metrics"]["mae_se"] = None
    _, fig = draw(rows, facet=("dataset",))
    for found_ax in fig.axes:
        bars = {c.get_label(): c.has_yerr for c in found_ax.containers}
        assert bars == {"alpha-median": True, "beta-median": False, "gamma-median": True}
        assert all(c.lines[0].get_marker() not in (None, "None", "") for c in found_ax.containers)


def test_coinciding_points_are_shifted_apart():
    rows = [row(m, n=n, mae=0.1, **params) for m, params in MECHANISMS.items() for n in (100, 1000)]
    _, fig = draw(rows, facet=())
    xs = [tuple(c.lines[0].get_xdata()) for c in fig.axes[0].containers]
    assert len(set(xs)) == 3


def test_many_x_values_never_give_overlapping_tick_labels():
    rows = [row("alpha-median", n=n) for n in range(1000, 61000, 2000)]
    _, fig = draw(rows, facet=())
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = sorted((t.get_window_extent(renderer) for t in fig.axes[0].get_xticklabels()
                    if t.get_visible() and t.get_text()), key=lambda b: b.x0)
    assert len(boxes) >= 2
    assert all(not a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def test_the_cli_facet_is_checked_and_written_to_the_summary(tmp_path, capsys):
    config = {"name": "facet-test", "seed": 1, "trials": 4,
              "mechanism": {"name": "laplace-median", "epsilon": [0.5, 1.0], "lower": -5.0, "upper": 5.0,
                            "clip": True},
              "dataset": {"name": "normal", "n": [50, 60]}}
    results = tmp_path / "r.jsonl"
    run_sweep(config, results_path=results, progress=False)
    assert main(["study", "report", str(results), "--facet", "dataset,eps", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "--facet 'eps' is not an axis" in err and "'epsilon'" in err and "'dataset'" in err, err
    assert not (tmp_path / "bad" / "mae_vs_n.png").exists()
    assert main(["study", "report", str(results), "--facet", "epsilon", "--out", str(tmp_path / "rep")]) == 0
    assert json.loads((tmp_path / "rep" / "summary.json").read_text())["facet"] == ["epsilon"]
    assert main(["study", "report", str(results), "--out", str(tmp_path / "default")]) == 0
    assert json.loads((tmp_path / "default" / "summary.json").read_text())["facet"] == []  # one dataset: one panel
    with pytest.raises(ValueError, match=r"--facet 'n' is the horizontal axis"):
        _report.study_report(results, facet=("n",), out_dir=tmp_path / "x")
