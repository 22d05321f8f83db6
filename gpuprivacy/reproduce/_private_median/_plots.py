"""The figures of the private-median study: error rates vs n, the baselines, the Case-A counterexamples."""

from __future__ import annotations

import numpy as np

from gpuprivacy.reproduce._plots import figure, legend_outside, require_matplotlib, save_png, ticks_at, wrap_label

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


def write_plots(study_dir, config, rates, baselines, curves):
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
