"""Reproductions of published experiments: ``reproduce(name, quick=..., out_dir=...)``.

Each study writes a folder with ``report.md``, raw numbers (JSON and CSV),
PNG plots and ``metadata.json``. Plots need matplotlib
(``pip install gpuprivacy[plots]``), imported only when a study runs.
"""

from gpuprivacy.reproduce._registry import StudyInfo as StudyInfo
from gpuprivacy.reproduce._registry import list_studies as list_studies
from gpuprivacy.reproduce._registry import register_study as register_study
from gpuprivacy.reproduce._registry import reproduce as reproduce
from gpuprivacy.reproduce._rnm_bikes import rnm_bikes_config as rnm_bikes_config  # registers "rnm-bikes"
from gpuprivacy.reproduce._seed004 import run_seed004_part as run_seed004_part, seed004_config as seed004_config
from gpuprivacy.reproduce import _seed000  # noqa: F401  (registers "seed000")
from gpuprivacy.reproduce import _seed001  # noqa: F401  (registers "seed001")
from gpuprivacy.reproduce import _seed002  # noqa: F401  (registers "seed002")
from gpuprivacy.reproduce import _seed003  # noqa: F401  (registers "seed003")
