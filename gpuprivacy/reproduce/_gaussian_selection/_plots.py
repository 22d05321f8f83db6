"""Study "lebensold2024-gaussian-selection": plots (object-oriented matplotlib, Agg canvas; see _plots.require_matplotlib)."""

from __future__ import annotations


import numpy as np

from gpuprivacy.reproduce._plots import require_matplotlib
from gpuprivacy.reproduce._gaussian_selection._config import DATASET_LABELS, RNM_LABELS, RNM_MECHANISMS




def _figure(width=6.4, height=4.4, **kwargs):
    Figure, FigureCanvasAgg = require_matplotlib()
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained", **kwargs)
    FigureCanvasAgg(fig)
    return fig


def plot_figure1_curves(curves, t, path, c):
    fig = _figure(13.0, 4.2)
    axes = fig.subplots(1, len(c["thresholds"]), sharey=True)
    colours = {0.2: "tab:blue", 0.3: "tab:orange"}
    for ax, rho in zip(axes, c["thresholds"], strict=True):
        for curve in (cv for cv in curves if cv["threshold"] == rho):
            colour = colours.get(curve["sigma"], "tab:green")
            ax.plot(t, curve["epsilon_post"], color=colour, label=f"ex-post ε_post(t), σX = {curve['sigma']}")
            ax.axhline(curve["ex_ante_bbghs"], color=colour, linestyle="--", linewidth=1,
                       label=f"ex-ante Zhu-Wang + BBGHS ({curve['ex_ante_bbghs']:.4f})")
            ax.axhline(curve["ex_ante_markov"], color=colour, linestyle=":", linewidth=1,
                       label=f"ex-ante Zhu-Wang + Markov ({curve['ex_ante_markov']:.4f})")
            if curve["t_star"] is not None:
                ax.plot([curve["t_star"]], [curve["epsilon_post"][curve["t_star"] - 1]], marker="o", color=colour,
                        markersize=6, linestyle="none", label=f"t* = {curve['t_star']}")
            for stat, marker in (("median", "v"), ("p80", "^")):
                if curve[stat] is not None and curve[stat] <= t[-1]:
                    ax.plot([curve[stat]], [0.0], marker=marker, color=colour, markersize=7, linestyle="none",
                            clip_on=False, label=f"{'median' if stat == 'median' else '80th pct'} T = {curve[stat]}")
        ax.set_xscale("log")
        ax.set_xlabel("stopping time t")
        ax.set_title(f"ρ = {rho}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="upper left")
        ax.set_ylim(bottom=0.0)
    axes[0].set_ylabel("ε")
    fig.suptitle(f"Gaussian AT: ex-post vs ex-ante (Δ = {c['sensitivity']}, δ = {c['delta']}, σZ = √3 σX, "
                 "[a, b] = [0, 1]); ▼/▲ = median / 80th pct of T on the all-zero stream", fontsize=10)
    fig.savefig(path, format="png")


def plot_figure1_heatmap(heat, path, c):
    from matplotlib.colors import TwoSlopeNorm

    post = np.array(heat["epsilon_post"])
    ante = np.array(heat["ex_ante_bbghs"])
    diff = np.maximum(ante[:, :, None] - post, -1.0)  # clipped below at -1, as the paper
    sigmas, times = np.array(heat["sigmas"]), np.array(heat["times"])
    limit = float(np.max(np.abs(diff))) or 1e-12
    fig = _figure(13.0, 4.2)
    axes = fig.subplots(1, len(heat["thresholds"]), sharey=True)
    for k, (ax, rho) in enumerate(zip(axes, heat["thresholds"], strict=True)):
        image = ax.pcolormesh(sigmas, times, diff[k].T, cmap="coolwarm_r", shading="nearest",
                              norm=TwoSlopeNorm(vcenter=0.0, vmin=-limit, vmax=limit))
        for stat, style in (("median", dict(color="blue", linestyle="--")), ("p80", dict(color="red"))):
            values = np.array([np.nan if v is None else v for v in heat[stat][k]], dtype=np.float64)
            ax.plot(sigmas, np.clip(values, times.min(), times.max()), linewidth=2,
                    label=f"{'median' if stat == 'median' else '80th pct'} stopping time (exact)", **style)
        ax.set_title(f"ρ = {rho}", fontsize=10)
        ax.set_xlabel("σX (σZ = √3 σX)")
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("stopping time t")
    fig.colorbar(image, ax=list(axes), label="ex-ante (BBGHS) − ex-post ε  (blue: ex-post smaller)")
    fig.suptitle("Fig. 1: ex-ante minus ex-post ε of Gaussian AT (Δ = 1e-3, δ = 1e-5)", fontsize=10)
    fig.savefig(path, format="png")


def plot_figure2(result, c, path):
    fig = _figure()
    ax = fig.add_subplot()
    post = np.array(result["epsilon_post"])
    colours = _colours("viridis", len(result["times"]))
    for i, t in enumerate(result["times"]):
        ax.plot(result["thresholds"], post[i], marker="o", markersize=2.5, color=colours[i], label=f"t = {t}")
    ax.set_xlabel("threshold ρ")
    ax.set_ylabel("ex-post ε_post(t)")
    ax.set_yscale("log")
    ax.set_title(f"Fig. 2: ε_post vs ρ (σX = {c['sigma_threshold']}, σZ = √3 σX, Δ = {c['sensitivity']}, "
                 "[0, 1])", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.savefig(path, format="png")


def _colours(name, count, low=0.15, high=0.85):
    from matplotlib import colormaps

    cmap = colormaps[name]
    return [cmap(x) for x in np.linspace(low, high, max(count, 1))]


def plot_figure3(result, c, path):
    records = result["records"]
    d = np.array([r["d"] for r in records])
    quad = np.array([r["quadrature"] for r in records])
    mc = np.array([r["mc"] for r in records])
    se = np.array([r["mc_se"] for r in records])
    plain = np.array([np.nan if r["plain_mean"] is None else r["plain_mean"] for r in records])
    plain_sd = np.array([np.nan if r["plain_sd"] is None else r["plain_sd"] for r in records])
    fig = _figure(12.0, 4.4)
    left, right = fig.subplots(1, 2)
    left.plot(d, quad, color="tab:green", linewidth=2, label="numerical integration (gpuprivacy.accounting)")
    left.errorbar(d, mc, yerr=2 * se, color="black", marker="o", markersize=3, linestyle="none", capsize=2,
                  label=f"MC, CRN + importance sampling ({result['mc_samples']:.1e} samples, ± 2 SE)")
    left.errorbar(d, plain, yerr=plain_sd, color="tan", marker="s", markersize=3, linestyle="none", capsize=2,
                  label=f"MC as in the paper (plain, independent; {result['plain_repeats']} repeats of "
                        f"{result['plain_samples_per_repeat']:.1e}, ± 1 sd)")
    left.set_xscale("log")
    # The paper-style estimator's spread reaches far outside this range at large d (right panel).
    left.set_ylim(0.0, 2.0 * float(np.max(quad)))
    left.set_xlabel("number of candidates d")
    left.set_ylabel("ε_RNM (plain-MC error bars clipped)")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=7)
    left.set_title(f"Fig. 3: Gaussian RNM, σ = {c['sigma']}, Δ = {c['sensitivity']}, [0, 1]", fontsize=10)
    right.plot(d, np.abs(mc - quad), marker="o", color="black", label="|CRN+IS MC − quadrature|")
    right.plot(d, se, linestyle="--", color="black", label="CRN+IS standard error")
    right.plot(d, np.abs(plain - quad), marker="s", color="tan", label="|plain MC mean − quadrature|")
    right.plot(d, plain_sd, linestyle="--", color="tan", label="plain MC sd over repeats")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("number of candidates d")
    right.set_ylabel("error in ε")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=7)
    fig.savefig(path, format="png")


def plot_figure7(data, c, path):
    fig = _figure(12.0, 4.4)
    left, right = fig.subplots(1, 2)
    pure = np.array(data["pure"])
    colours = _colours("plasma", len(data["sigmas"]))
    for i, sigma in enumerate(data["sigmas"]):
        left.plot(data["d"], pure[i], marker="o", markersize=3, color=colours[i], label=f"σ = {sigma}")
        for conversion, style in (("analytic", "-"), ("bbghs", "--"), ("markov", ":")):
            if conversion in data:
                right.plot(data["d"], np.array(data[conversion])[i], linestyle=style, color=colours[i],
                           label=f"σ = {sigma}" if conversion == "analytic" else None)
    left.set_title(f"pure ε_RNM (Thm 8, log of the ratio), Δ = {c['sensitivity']}", fontsize=10)
    right.set_title(f"post-processing (δ = {c['delta']}): analytic (—), RDP+BBGHS (--), RDP+Markov (··)", fontsize=9)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("number of candidates d")
        ax.set_ylabel("ε")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    right.set_ylim(0.0, max(0.35, float(np.max(pure)) * 1.1))
    fig.suptitle("Fig. 7: pure vs post-processing accounting of Gaussian report noisy max", fontsize=10)
    fig.savefig(path, format="png")


def plot_figure8(data, c, path):
    from matplotlib.colors import SymLogNorm

    conversions = [k for k in ("analytic", "bbghs", "markov") if k in data]
    pure = np.array(data["pure"])
    diffs = [np.array(data[k]) - pure for k in conversions]
    limit = max(float(np.max(np.abs(x))) for x in diffs) or 1e-12
    fig = _figure(14.0, 4.4)
    axes = fig.subplots(1, len(conversions), sharey=True)
    names = {"analytic": "analytic Gaussian", "bbghs": "RDP + BBGHS", "markov": "RDP + Markov (zCDP)"}
    for ax, conversion, diff in zip(axes, conversions, diffs, strict=True):
        # Symmetric log scale: the differences range from ~1e-3 to ~1, and the sign change matters.
        image = ax.pcolormesh(data["d"], data["sigmas"], diff, cmap="coolwarm_r", shading="nearest",
                              norm=SymLogNorm(linthresh=1e-3, vmin=-limit, vmax=limit))
        if np.min(diff) < 0 < np.max(diff):
            ax.contour(data["d"], data["sigmas"], diff, levels=[0.0], colors="black", linewidths=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("number of candidates d")
        ax.set_title(f"{names[conversion]} − pure", fontsize=10)
    axes[0].set_ylabel("σ")
    fig.colorbar(image, ax=list(axes), label="post-processing ε − pure ε  (blue: pure bound tighter)")
    fig.suptitle(f"Fig. 8: difference of the RNM bounds (Δ = {c['sensitivity']}, δ = {c['delta']}); "
                 "black line: equal", fontsize=10)
    fig.savefig(path, format="png")


RNM_STYLES = {
    "gaussian": dict(color="tab:green"),
    "laplace_standard": dict(color="tab:blue"),
    "laplace_post_processing": dict(color="tab:cyan", linestyle="--"),
    "exponential_mechanism": dict(color="tab:orange"),
    "permute_and_flip": dict(color="tab:red", linestyle="-."),
}


def plot_rnm(records, summaries, dataset, path):
    ds = dataset["d"]
    fig = _figure(6.4 * len(ds), 4.6)
    axes = np.atleast_1d(fig.subplots(1, len(ds)))
    for ax, d in zip(axes, ds, strict=True):
        rows = [r for r in records if r["dataset"] == dataset["name"] and r["d"] == d]
        for mechanism in RNM_MECHANISMS:
            rs = sorted((r for r in rows if r["mechanism"] == mechanism), key=lambda r: r["epsilon"])
            acc = np.array([r["accuracy"] for r in rs])
            se = np.array([r["accuracy_se"] for r in rs])
            eps = np.array([r["epsilon"] for r in rs])
            label = RNM_LABELS[mechanism] + (", pure ε (Thm 8)" if mechanism == "gaussian" else "")
            ax.plot(eps, acc, marker="o", markersize=3, label=label, **RNM_STYLES[mechanism])
            ax.fill_between(eps, acc - se, acc + se, alpha=0.2, linewidth=0, color=RNM_STYLES[mechanism]["color"])
            if mechanism == "gaussian":
                pp = np.array([r["epsilon_pp_analytic"] for r in rs])
                order = np.argsort(pp)
                ax.plot(pp[order], acc[order], marker="s", markersize=3, color="darkgreen", linestyle=":",
                        label="Gaussian RNM, post-processing ε (analytic, δ = 1e-5)")
        summary = next(s for s in summaries if s["dataset"] == dataset["name"] and s["d"] == d)
        ax.axhline(summary["uniform_accuracy"], color="grey", linestyle="--", linewidth=1,
                   label=f"uniform random day ({summary['uniform_accuracy']:.4f})")
        ax.set_xscale("log")
        ax.set_xlabel("ε (pure DP; Gaussian pp curve: (ε, 1e-5)-DP)")
        ax.set_ylabel("accuracy, eq. (39)")
        ax.set_title(f"{DATASET_LABELS[dataset['name']]}, d = {d}, Δ = 1/{dataset['population']}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.savefig(path, format="png")


def plot_fsrc_scatter(result, c, path):
    fig = _figure(12.0, 4.6)
    left, right = fig.subplots(1, 2)
    entries = result["entries"]
    greens = _colours("Greens", len(entries), 0.45, 0.95)
    purples = _colours("Purples", len(entries), 0.45, 0.95)
    for k, entry in enumerate(entries):
        sx = entry["sigma_threshold"]
        left.scatter(entry["fsrc"]["per_run"]["spent"], entry["fsrc"]["per_run"]["f1"], s=12, color=greens[k],
                     marker="o", label=f"FSRC (ex-post), σX = {sx:g}")
        for conversion, marker in (("markov", "^"), ("bbghs", "v")):
            if conversion in entry["whitehouse"]:
                wh = entry["whitehouse"][conversion]
                left.scatter(wh["per_run"]["spent"], wh["per_run"]["f1"], s=12, color=purples[k], marker=marker,
                             label=f"Whitehouse filter ({conversion}), σX = {sx:g}")
        right.scatter(entry["fsrc_budget"]["per_run"]["spent"], entry["fsrc_budget"]["per_run"]["f1"], s=12,
                      color=greens[k], marker="o", label=f"FSRC, σX = {sx:g}")
        wh = entry["whitehouse_budget"]["markov"]
        right.scatter(wh["per_run"]["spent"], wh["per_run"]["f1"], s=12, color=purples[k], marker="^",
                      label=f"Whitehouse (markov), σX = {sx:g}")
    right.axvline(result["budget"], color="black", linestyle="--", linewidth=1, label=f"budget ε = {result['budget']}")
    left.set_title(f"{result['label']}: no budget (final spend), ρ = {result['threshold']}", fontsize=9)
    right.set_title(f"budget ε = {result['budget']}, δ = 1/{result['population']}", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("final privacy spend ε")
        ax.set_ylabel("F1 vs noiseless AT")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.savefig(path, format="png")


def plot_fsrc_spend(result, c, path):
    fig = _figure(12.0, 4.4)
    left, right = fig.subplots(1, 2)
    entries = result["entries"]
    greens = _colours("Greens", len(entries), 0.45, 0.95)
    purples = _colours("Purples", len(entries), 0.45, 0.95)
    steps = np.arange(1, result["num_days"] + 1)
    for k, entry in enumerate(entries):
        sx = entry["sigma_threshold"]
        left.plot(steps, entry["fsrc"]["spent_by_step_mean"], color=greens[k], label=f"FSRC, σX = {sx:g}")
        left.plot(steps, entry["whitehouse"]["markov"]["spent_by_step_mean"], color=purples[k], linestyle="--",
                  label=f"Whitehouse (markov), σX = {sx:g}")
        right.plot(steps, entry["fsrc_budget"]["spent_by_step_mean"], color=greens[k], label=f"FSRC, σX = {sx:g}")
        right.plot(steps, entry["whitehouse_budget"]["markov"]["spent_by_step_mean"], color=purples[k],
                   linestyle="--", label=f"Whitehouse (markov), σX = {sx:g}")
    right.axhline(result["budget"], color="black", linestyle=":", linewidth=1, label=f"budget ε = {result['budget']}")
    left.set_title(f"{result['label']}: spend over time, no budget (mean of {result['runs']} runs)", fontsize=9)
    right.set_title(f"budget ε = {result['budget']} (FSRC: admits a run while spend + ε_max < ε)", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("day")
        ax.set_ylabel("privacy spend ε")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.savefig(path, format="png")
