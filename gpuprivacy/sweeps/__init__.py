"""Parameter sweeps: a TOML grid in, one resumable JSON-lines row per cell out.

Config format (TOML, or a dict of the same shape)::

    name = "rnm-bikes"          # optional; default: the config file's stem
    seed = 20240213             # required, 0 <= seed < 2**63
    trials = 1000               # required, int >= 1 or a list of them (a grid axis)

    [mechanism]                 # or several [[mechanism]] tables (their cells are united)
    name = "report-noisy-max"   # a registered sweep mechanism, or a list of them
    noise = ["laplace", "gumbel", "exponential"]
    epsilon = [0.01, 0.1, 1.0]  # a list is always a grid axis
    monotonic = false

    [dataset]                   # or several [[dataset]] tables
    name = "bikes-daily"
    d = [90, 365]

Mechanisms: every public mechanism of :mod:`gpuprivacy.mechanisms` that the auditor
knows, by its name in kebab case (``gpuprivacy sweep --list`` shows them with their
parameters), run by the study engine (:func:`run_cell`, :func:`run_cells`): data drawn
on the device, the same datasets for every mechanism and parameter of the sweep
(:func:`data_key`), privacy parameters traced, trials chunked and split over devices.
Also the summarising ``report-noisy-max`` cell (``epsilon`` required, ``noise`` =
laplace | gumbel | exponential, ``monotonic``). Datasets: the distributions of
:mod:`gpuprivacy.datasets` (``n`` and their parameters as axes, ``fresh`` per trial or
per cell), ``bikes-daily`` and ``synthetic-uniform``. Optional top-level keys:
``metrics = [...]`` (registered metrics), ``coverage_radius``, ``exact = true`` (the
mechanisms' exact error quantities). Add mechanisms, datasets and metrics with
:func:`register_mechanism`, :func:`register_sweep_dataset` and :func:`register_metric`;
see docs/studies.md.
"""

from gpuprivacy.sweeps._builtins import report_noisy_max_cell as report_noisy_max_cell  # registers built-ins
from gpuprivacy.sweeps._config import SweepCell as SweepCell
from gpuprivacy.sweeps._config import SweepConfigError as SweepConfigError
from gpuprivacy.sweeps._config import expand_sweep as expand_sweep
from gpuprivacy.sweeps._provenance import environment_info as environment_info
from gpuprivacy.sweeps._provenance import utc_timestamp as utc_timestamp
from gpuprivacy.sweeps._registry import REQUIRED as REQUIRED
from gpuprivacy.sweeps._registry import SweepData as SweepData
from gpuprivacy.sweeps._registry import SweepParameter as SweepParameter
from gpuprivacy.sweeps._registry import list_sweep_datasets as list_sweep_datasets
from gpuprivacy.sweeps._registry import list_sweep_mechanisms as list_sweep_mechanisms
from gpuprivacy.sweeps._registry import describe_sweepables as describe_sweepables
from gpuprivacy.sweeps._registry import register_mechanism as register_mechanism
from gpuprivacy.sweeps._metrics import register_metric as register_metric
from gpuprivacy.sweeps._metrics import list_metrics as list_metrics
from gpuprivacy.sweeps._trials import CellTrials as CellTrials
from gpuprivacy.sweeps._trials import run_cell as run_cell
from gpuprivacy.sweeps._trials import run_cells as run_cells
from gpuprivacy.sweeps._trials import CellRequest as CellRequest
from gpuprivacy.sweeps._trials import plan_chunk as plan_chunk
from gpuprivacy.sweeps._mechanisms import TARGETS as TARGETS
from gpuprivacy.sweeps._mechanisms import builtin_sweepables as builtin_sweepables
from gpuprivacy.sweeps._metrics import cell_metrics as cell_metrics
from gpuprivacy.sweeps._trials import DataSpec as DataSpec
from gpuprivacy.sweeps._report import study_report as study_report
from gpuprivacy.sweeps._registry import register_sweep_dataset as register_sweep_dataset
from gpuprivacy.sweeps._registry import register_sweep_mechanism as register_sweep_mechanism
from gpuprivacy.sweeps._frame import flat_rows as flat_rows
from gpuprivacy.sweeps._frame import read_results as read_results
from gpuprivacy.sweeps._frame import paired_rows as paired_rows
from gpuprivacy.sweeps._frame import read_paired as read_paired
from gpuprivacy.sweeps._paired import paired_table as paired_table
from gpuprivacy.sweeps._paired import exact_dominance as exact_dominance
from gpuprivacy.sweeps._nonprivate import NotPrivate as NotPrivate
from gpuprivacy.sweeps._results import SweepResultsError as SweepResultsError
from gpuprivacy.sweeps._run import SweepSummary as SweepSummary
from gpuprivacy.sweeps._run import SweepMemoryWarning as SweepMemoryWarning
from gpuprivacy.sweeps._run import cell_key as cell_key
from gpuprivacy.sweeps._run import data_key as data_key
from gpuprivacy.sweeps._run import run_sweep as run_sweep
from gpuprivacy.sweeps._plan import SweepDryRun as SweepDryRun
from gpuprivacy.sweeps._plan import dry_run as dry_run
