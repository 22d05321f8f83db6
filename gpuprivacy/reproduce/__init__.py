"""Reproductions of published experiments: ``reproduce(name, quick=..., out_dir=...)``.

Each study writes a folder with ``report.md``, raw numbers (JSON and CSV),
PNG plots and ``metadata.json``. Plots need matplotlib
(``pip install gpuprivacy[plots]``), imported only when a study runs.
"""

from gpuprivacy.reproduce._parallel import StudyFailed as StudyFailed
from gpuprivacy.reproduce._registry import StudyInfo as StudyInfo
from gpuprivacy.reproduce._registry import list_studies as list_studies
from gpuprivacy.reproduce._registry import register_study as register_study
from gpuprivacy.reproduce._registry import reproduce as reproduce
from gpuprivacy.reproduce._rnm_bikes import rnm_bikes_config as rnm_bikes_config  # registers "rnm-bikes"
from gpuprivacy.reproduce._gaussian_selection._study import gaussian_selection_config as gaussian_selection_config
from gpuprivacy.reproduce._gaussian_selection._study import run_gaussian_selection_part as run_gaussian_selection_part
from gpuprivacy.reproduce._registry import resolve_study as resolve_study
from gpuprivacy.reproduce import _privacy_wrappers  # noqa: F401  (registers "linder2025-privacy-wrappers", alias "seed000")
from gpuprivacy.reproduce import _instance_optimality  # noqa: F401  (registers "durfee2025-piecewise-laplace", alias "seed001")
from gpuprivacy.reproduce._instance_optimality import (  # the seed-001 study's sweep of the data laws
    piecewise_laplace_dominance_config as piecewise_laplace_dominance_config)
from gpuprivacy.reproduce import _blackbox_estimation  # noqa: F401  (registers "steinke2025-blackbox-estimation", alias "seed002")
from gpuprivacy.reproduce import _private_median  # noqa: F401  (registers "tzamos2020-private-median", alias "seed003")

# Older names, kept so that existing scripts and notebooks keep working.
run_seed004_part = run_gaussian_selection_part
seed004_config = gaussian_selection_config
