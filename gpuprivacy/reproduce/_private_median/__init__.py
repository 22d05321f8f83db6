"""Study "tzamos2020-private-median": the optimal private median (Tzamos, Vlatakis-Gkaragkounis & Zadik, NeurIPS 2020).

The paper has no experiments. This study reproduces its
analytic content and runs the experiment suite of our own (labelled so):

* ``counterexamples``: the Case-A shortcut is not private (Lemma 3.2 of the paper fails; see docs/errata.md): exact
  log-density ratios of the restricted (3.4) vs the general (3.6) density, and their TV;
* ``constants``: analytic targets (C_min, Zhat and tails, lower-bound sample sizes);
* ``rates``: error quantiles of :func:`gpuprivacy.mechanisms.median.private_median` vs n for Uniform,
  Normal, Cauchy, Laplace, Student-t(3) and the Prop. 3.8 lower-bound mixture, over an epsilon grid;
  fast-path and overflow rates; runtime per trial. The part is a sweep config (:func:`rates_sweep_configs`;
  in full mode ``experiments/configs/private_median_rates.toml``, whose grid a test keeps equal to it) run by
  :func:`gpuprivacy.sweeps.run_sweep`: each (n, epsilon, distribution) is one cell, keyed by the seed and
  its own parameters (engine config keys since 2026-11-29; the numbers before that came from keys folded by
  grid position), the epsilons of an (n, distribution) on the same datasets, drawn on the device from
  :mod:`gpuprivacy.datasets` laws. The errors are the cell's ``population_abs_error_q50`` / ``_q90`` metrics
  and the routes the ``private-median-fast-path-rate`` / ``private-median-overflow-rate`` metrics (the
  releases' own ``nonprivate_route``); the sweep rows stay in the study folder (``rates_quick.jsonl``,
  ``rates.jsonl``), so a rerun of the same mode resumes;
* ``sample_complexity``: the n needed to reach (alpha, beta), with the constants of the Theorem 3.1
  rate fitted by nonnegative least squares;
* ``baselines``: on the same device-drawn datasets (one engine data key per distribution), the
  private median (3.6), the exponential-mechanism median (McSherry & Talwar 2007), the piecewise-Laplace
  and inverse-sensitivity medians (Durfee 2025) and the smooth-sensitivity median (Nissim, Raskhodnikova
  & Smith 2007), all run by the engine; the non-private median and the UNSAFE flattened-Laplace shortcut
  (labelled unsafe: accuracy only, it is not private) on those same datasets, redrawn from the engine's
  data keys;
* ``privacy``: the exact worst log-ratio over random and adversarial neighbours, relative to eps d_H.
"""

# The study's own names, for tests and scripts (``from gpuprivacy.reproduce import _private_median as study``).
from gpuprivacy.reproduce._private_median._analytic import part_constants as part_constants
from gpuprivacy.reproduce._private_median._analytic import part_counterexamples as part_counterexamples
from gpuprivacy.reproduce._private_median._analytic import part_privacy as part_privacy
from gpuprivacy.reproduce._private_median._baselines import CLIPPED_BASELINES as CLIPPED_BASELINES
from gpuprivacy.reproduce._private_median._baselines import PRIVATE_MEDIAN_LABEL as PRIVATE_MEDIAN_LABEL
from gpuprivacy.reproduce._private_median._baselines import UNSAFE_LABEL as UNSAFE_LABEL
from gpuprivacy.reproduce._private_median._baselines import engine_datasets as engine_datasets
from gpuprivacy.reproduce._private_median._baselines import part_baselines as part_baselines
from gpuprivacy.reproduce._private_median._baselines import quantile_se as quantile_se
from gpuprivacy.reproduce._private_median._config import DISTRIBUTIONS as DISTRIBUTIONS
from gpuprivacy.reproduce._private_median._config import MODEL as MODEL
from gpuprivacy.reproduce._private_median._config import NAME as NAME
from gpuprivacy.reproduce._private_median._config import _trials_at as _trials_at
from gpuprivacy.reproduce._private_median._config import data_spec as data_spec
from gpuprivacy.reproduce._private_median._config import study_config as study_config
from gpuprivacy.reproduce._private_median._config import sweep_datasets as sweep_datasets
from gpuprivacy.reproduce._private_median._plots import plot_baselines as plot_baselines
from gpuprivacy.reproduce._private_median._rates import FAST_PATH_METRIC as FAST_PATH_METRIC
from gpuprivacy.reproduce._private_median._rates import OVERFLOW_METRIC as OVERFLOW_METRIC
from gpuprivacy.reproduce._private_median._rates import RATES_NAME as RATES_NAME
from gpuprivacy.reproduce._private_median._rates import part_rates as part_rates
from gpuprivacy.reproduce._private_median._rates import rates_sweep_configs as rates_sweep_configs
from gpuprivacy.reproduce._private_median._sample_complexity import part_sample_complexity as part_sample_complexity
from gpuprivacy.reproduce._private_median._sample_complexity import rate_terms as rate_terms
from gpuprivacy.reproduce._private_median._study import run_study as run_study  # registers the study
