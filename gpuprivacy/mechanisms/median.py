"""Optimal private median (Tzamos et al. 2020).

*Optimal Private Median Estimation under Minimal Distributional
Assumptions*: the general density (3.6) with its certified fast path, and
the median baselines. This module only re-exports.
"""

from gpuprivacy.mechanisms._median._analysis import MedianPieces as MedianPieces
from gpuprivacy.mechanisms._median._analysis import TypicalHulls as TypicalHulls
from gpuprivacy.mechanisms._median._analysis import median_parameters as median_parameters
from gpuprivacy.mechanisms._median._analysis import private_median_cdf as private_median_cdf
from gpuprivacy.mechanisms._median._analysis import private_median_log_density as private_median_log_density
from gpuprivacy.mechanisms._median._analysis import private_median_pieces as private_median_pieces
from gpuprivacy.mechanisms._median._analysis import snap_to_lattice as snap_to_lattice
from gpuprivacy.mechanisms._median._analysis import typical_hamming as typical_hamming
from gpuprivacy.mechanisms._median._analysis import typical_hulls as typical_hulls
from gpuprivacy.mechanisms._median._exponential import ExponentialMedianInfo as ExponentialMedianInfo
from gpuprivacy.mechanisms._median._exponential import exponential_mechanism_median as exponential_mechanism_median
from gpuprivacy.mechanisms._median._exponential import (
    exponential_mechanism_median_guarantee as exponential_mechanism_median_guarantee,
)
from gpuprivacy.mechanisms._median._exponential import flattened_laplace_log_density as flattened_laplace_log_density
from gpuprivacy.mechanisms._median._exponential import (
    flattened_laplace_log_normalizer as flattened_laplace_log_normalizer,
)
from gpuprivacy.mechanisms._median._exponential import flattened_laplace_tail as flattened_laplace_tail
from gpuprivacy.mechanisms._median._exponential import lower_bound_sample_sizes as lower_bound_sample_sizes
from gpuprivacy.mechanisms._median._exponential import nonprivate_median as nonprivate_median

# UNSAFE, not differentially private (Tzamos et al. 2020, Lemma 3.2 fails; docs/errata.md): the paper's
# Case-A shortcut, public only so that studies can show it as the unsafe reference. Never a mechanism.
from gpuprivacy.mechanisms._median._exponential import (
    _flattened_laplace_shortcut as unsafe_flattened_laplace_shortcut,
)
from gpuprivacy.mechanisms._median._config import THEORY_CONSTANT as THEORY_CONSTANT
from gpuprivacy.mechanisms._median._config import MedianConfig as MedianConfig
from gpuprivacy.mechanisms._median._config import MedianParameterWarning as MedianParameterWarning
from gpuprivacy.mechanisms._median._private_median import ROUTE_NAMES as ROUTE_NAMES
from gpuprivacy.mechanisms._median._private_median import PrivateMedianInfo as PrivateMedianInfo
from gpuprivacy.mechanisms._median._private_median import PrivateMedianTrials as PrivateMedianTrials
from gpuprivacy.mechanisms._median._private_median import private_median as private_median
from gpuprivacy.mechanisms._median._private_median import private_median_guarantee as private_median_guarantee
from gpuprivacy.mechanisms._median._private_median import private_median_trials as private_median_trials
