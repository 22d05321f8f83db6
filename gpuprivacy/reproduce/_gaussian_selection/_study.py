"""Study "lebensold2024-gaussian-selection": Gaussian selection mechanisms with pure (ex-ante / ex-post) DP.

Reproduces the numerical content of Lebensold, Precup & Balle, "On the
Privacy of Selection Mechanisms with Gaussian Noise", AISTATS 2024 (arXiv
2402.06137v2), with the corrections listed in docs/errata.md:

* ``figure1``: ex-ante Zhu-Wang RDP + BBGHS vs ex-post
  :math:`\\varepsilon^{\\mathrm{post}}(t)` of Gaussian above threshold,
  the crossing time :math:`t^*`, and the stopping-time median / 80th
  percentile on the all-zero stream from the exact law
  :math:`P(T > k) = \\mathbb E_x[\\Phi((\\rho + \\sigma_X x)/\\sigma_Z)^k]`,
  checked by Monte Carlo of :func:`gpuprivacy.mechanisms.gaussian_above_threshold`;
* ``figure2``: :math:`\\varepsilon^{\\mathrm{post}}(t)` against the threshold
  (Lebensold et al. 2024, Fig. 1);
* ``figure3``: the pure epsilon of Gaussian report noisy max by quadrature vs
  Monte Carlo with common random numbers and importance sampling at the mode,
  batched on the device, next to the paper's plain Monte Carlo;
* ``figures7_8``: the pure RNM epsilon vs the post-processing baselines, and
  the difference over (sigma, d) (Lebensold et al. 2024, Sec. 2, App. B);
* ``rnm_offline``: offline report noisy max on UCI Bikes (Lebensold et al.
  2024, App. B.3) and on seeded synthetic energy stand-ins for LCL and NEAR
  (Lebensold et al. 2024, Sec. 4);
* ``fsrc_online``: the fully adaptive Gaussian sparse vector under filtered
  self-reporting composition vs the Whitehouse et al. filter on UCI Bikes
  (Fig. 4, 17, 18) and on the synthetic LCL stand-in.

Every number comes from the public API (:mod:`gpuprivacy.accounting`,
:mod:`gpuprivacy.mechanisms`, :mod:`gpuprivacy.datasets`); the only numerics
written here are the Monte Carlo estimators of Fig. 3 and the exact
stopping-time law of Fig. 1, which are checks, not accounting. The synthetic
energy stand-ins (Lebensold et al. 2024, Sec. 4) come from
:func:`gpuprivacy.datasets.synthetic_energy_queries`. Each part can be run
alone with :func:`run_gaussian_selection_part`; :func:`gaussian_selection_config` holds all
parameters.

The study is split by concern: ``_config`` (parameters and labels), ``_reference``
(reference values, comparison rows), one module per part (``_figures``,
``_accounting_grids``, ``_rnm_monte_carlo``, ``_rnm_offline``, ``_fsrc_online``), ``_plots``
and ``_report``.
"""

from __future__ import annotations

import json
import pathlib
import time

import jax

from gpuprivacy._progress import Progress
from gpuprivacy.reproduce._plots import require_matplotlib
from gpuprivacy.reproduce._registry import register_study
from gpuprivacy.reproduce._gaussian_selection._config import NAME, PARTS, gaussian_selection_config
from gpuprivacy.reproduce._gaussian_selection._figures import part_figure1, part_figure2, part_figure3, part_figures7_8
from gpuprivacy.reproduce._gaussian_selection._fsrc_online import part_fsrc_online
from gpuprivacy.reproduce._gaussian_selection._rnm_offline import part_rnm_offline
from gpuprivacy.reproduce._gaussian_selection._report import fsrc_rows, json_default, report_markdown, write_csv



# ---------------------------------------------------------------------------------------------
# Running parts, the report, and the registered study.


def run_gaussian_selection_part(part: str, out_dir, *, quick: bool = False, progress: bool = False,
                     config: dict | None = None) -> dict:
    """Runs one part of study ``lebensold2024-gaussian-selection``, writing its PNGs into ``out_dir``.

    Args:
      part: one of ``"figure1"``, ``"figure2"``, ``"figure3"``, ``"figures7_8"``,
        ``"rnm_offline"``, ``"fsrc_online"``.
      out_dir: folder for the PNGs (created if missing).
      quick: use :func:`gaussian_selection_config` ``(quick=True)`` (ignored when ``config`` is given).
      progress: progress bars on stderr (when it is a terminal).
      config: a full config from :func:`gaussian_selection_config`, possibly edited.

    Returns:
      The part's JSON-ready results: its numbers, ``"comparisons"`` (rows of ours vs the reference values)
      and ``"figures"`` (PNG file names), plus ``"wall_s"``.

    Raises:
      ValueError: for an unknown part.
      ImportError: without matplotlib (``pip install gpuprivacy[plots]``).
    """
    if part not in PARTS:
        raise ValueError(f"unknown gaussian-selection part {part!r}; pick one of {', '.join(PARTS)}.")
    require_matplotlib()
    config = gaussian_selection_config(quick=quick) if config is None else config
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = jax.random.fold_in(jax.random.key(config["seed"]), PARTS.index(part))
    t0 = time.perf_counter()
    if part == "figure1":
        result = part_figure1(config, key, out_dir)
    elif part == "figure2":
        result = part_figure2(config, key, out_dir)
    elif part == "figure3":
        result = part_figure3(config, key, out_dir)
    elif part == "figures7_8":
        result = part_figures7_8(config, key, out_dir)
    elif part == "rnm_offline":
        result = part_rnm_offline(config, key, out_dir, progress)
    else:
        result = part_fsrc_online(config, key, out_dir, progress)
    result["wall_s"] = time.perf_counter() - t0
    return json.loads(json.dumps(result, default=json_default))  # plain JSON types (no NumPy scalars)


def _run_study(study_dir: pathlib.Path, *, quick: bool, progress: bool) -> dict:
    config = gaussian_selection_config(quick=quick)
    results, wall = {}, {}
    with Progress(len(PARTS), "gaussian selection", enabled=progress) as bar:
        for part in PARTS:
            results[part] = run_gaussian_selection_part(part, study_dir, progress=progress, config=config)
            wall[part] = results[part]["wall_s"]
            bar.update()
    comparisons = [row for part in PARTS for row in results[part]["comparisons"]]
    write_csv(study_dir / "results.csv", comparisons)
    write_csv(study_dir / "rnm_offline.csv", results["rnm_offline"]["records"])
    write_csv(study_dir / "fsrc_runs.csv", fsrc_rows(results["fsrc_online"]))
    (study_dir / "results.json").write_text(json.dumps({
        "study": NAME, "quick": quick, "seed": config["seed"], "parts": results, "comparisons": comparisons,
        "num_comparisons_ok": sum(r["status"] == "ok" for r in comparisons),
    }, indent=1, default=json_default) + "\n", encoding="utf-8")
    (study_dir / "report.md").write_text(report_markdown(config, results, comparisons, wall), encoding="utf-8")
    return {"seed": config["seed"], "parameters": config, "part_wall_s": wall}


register_study(NAME, _run_study, "Gaussian selection with pure ex-ante/ex-post DP: Figs 1-3, 7-8, offline RNM "
               "(App. B.3) and online FSRC (Fig. 4) on UCI Bikes and synthetic energy stand-ins "
               "(Lebensold et al. 2024)", aliases=("seed004",), replace=True)
