"""Differentially private mechanisms: pure functions ``(key, data, *, params) -> Release``.

Each mechanism handles one (unbatched) input; batch with ``jax.vmap`` or
:func:`run_trials`. Each has a ``*_guarantee`` function that returns its
privacy guarantee from the parameters alone.
"""

from gpuprivacy.mechanisms._calibration import gaussian_delta_analytic as gaussian_delta_analytic
from gpuprivacy.mechanisms._calibration import gaussian_sigma_analytic as gaussian_sigma_analytic
from gpuprivacy.mechanisms._calibration import gaussian_sigma_classic as gaussian_sigma_classic
from gpuprivacy.mechanisms._calibration import gaussian_sigma_discrete as gaussian_sigma_discrete
from gpuprivacy.mechanisms._calibration import gaussian_sigma_zcdp as gaussian_sigma_zcdp
from gpuprivacy.mechanisms._classic import GaussianInfo as GaussianInfo
from gpuprivacy.mechanisms._classic import LaplaceInfo as LaplaceInfo
from gpuprivacy.mechanisms._classic import gaussian_mechanism as gaussian_mechanism
from gpuprivacy.mechanisms._classic import gaussian_mechanism_guarantee as gaussian_mechanism_guarantee
from gpuprivacy.mechanisms._classic import gaussian_mechanism_zcdp as gaussian_mechanism_zcdp
from gpuprivacy.mechanisms._classic import gaussian_mechanism_zcdp_guarantee as gaussian_mechanism_zcdp_guarantee
from gpuprivacy.mechanisms._classic import laplace_mechanism as laplace_mechanism
from gpuprivacy.mechanisms._classic import laplace_mechanism_guarantee as laplace_mechanism_guarantee
from gpuprivacy.mechanisms._release import Release as Release
from gpuprivacy.mechanisms._release import run_trials as run_trials
from gpuprivacy.mechanisms._selection import NOISE_NAMES as NOISE_NAMES
from gpuprivacy.mechanisms._selection import SelectionInfo as SelectionInfo
from gpuprivacy.mechanisms._selection import exponential_mechanism as exponential_mechanism
from gpuprivacy.mechanisms._selection import exponential_mechanism_guarantee as exponential_mechanism_guarantee
from gpuprivacy.mechanisms._selection import exponential_mechanism_probabilities as exponential_mechanism_probabilities
from gpuprivacy.mechanisms._selection import permute_and_flip as permute_and_flip
from gpuprivacy.mechanisms._selection import permute_and_flip_guarantee as permute_and_flip_guarantee
from gpuprivacy.mechanisms._selection import permute_and_flip_probabilities as permute_and_flip_probabilities
from gpuprivacy.mechanisms._selection import report_noisy_max as report_noisy_max
from gpuprivacy.mechanisms._selection import report_noisy_max_guarantee as report_noisy_max_guarantee
from gpuprivacy.mechanisms._sparse_vector import NO_QUERY_ABOVE as NO_QUERY_ABOVE
from gpuprivacy.mechanisms._sparse_vector import AboveThresholdInfo as AboveThresholdInfo
from gpuprivacy.mechanisms._sparse_vector import SparseVectorInfo as SparseVectorInfo
from gpuprivacy.mechanisms._sparse_vector import above_threshold as above_threshold
from gpuprivacy.mechanisms._sparse_vector import above_threshold_guarantee as above_threshold_guarantee
from gpuprivacy.mechanisms._sparse_vector import sparse_vector as sparse_vector
from gpuprivacy.mechanisms._sparse_vector import sparse_vector_guarantee as sparse_vector_guarantee
from gpuprivacy.mechanisms._filters import DELTA_SCHEDULES as DELTA_SCHEDULES
from gpuprivacy.mechanisms._filters import PaperModeWarning as PaperModeWarning
from gpuprivacy.mechanisms._filters import SelfReportingFilterState as SelfReportingFilterState
from gpuprivacy.mechanisms._filters import WhitehouseFilterState as WhitehouseFilterState
from gpuprivacy.mechanisms._filters import self_reporting_filter_admit as self_reporting_filter_admit
from gpuprivacy.mechanisms._filters import self_reporting_filter_charge as self_reporting_filter_charge
from gpuprivacy.mechanisms._filters import self_reporting_filter_deltas as self_reporting_filter_deltas
from gpuprivacy.mechanisms._filters import self_reporting_filter_guarantee as self_reporting_filter_guarantee
from gpuprivacy.mechanisms._filters import self_reporting_filter_init as self_reporting_filter_init
from gpuprivacy.mechanisms._filters import self_reporting_filter_step as self_reporting_filter_step
from gpuprivacy.mechanisms._filters import whitehouse_filter_guarantee as whitehouse_filter_guarantee
from gpuprivacy.mechanisms._filters import whitehouse_filter_init as whitehouse_filter_init
from gpuprivacy.mechanisms._filters import whitehouse_filter_spend as whitehouse_filter_spend
from gpuprivacy.mechanisms._filters import whitehouse_filter_step as whitehouse_filter_step
from gpuprivacy.mechanisms._gaussian_selection import GaussianAboveThresholdInfo as GaussianAboveThresholdInfo
from gpuprivacy.mechanisms._gaussian_selection import LAPLACE_CALIBRATIONS as LAPLACE_CALIBRATIONS
from gpuprivacy.mechanisms._gaussian_selection import NO_STOPPING_TIME as NO_STOPPING_TIME
from gpuprivacy.mechanisms._gaussian_selection import gaussian_above_threshold as gaussian_above_threshold
from gpuprivacy.mechanisms._gaussian_selection import (
    gaussian_above_threshold_epsilon_post as gaussian_above_threshold_epsilon_post,
)
from gpuprivacy.mechanisms._gaussian_selection import (
    gaussian_above_threshold_guarantee as gaussian_above_threshold_guarantee,
)
from gpuprivacy.mechanisms._gaussian_selection import gaussian_report_noisy_max as gaussian_report_noisy_max
from gpuprivacy.mechanisms._gaussian_selection import (
    gaussian_report_noisy_max_guarantee as gaussian_report_noisy_max_guarantee,
)
from gpuprivacy.mechanisms._gaussian_selection import laplace_report_noisy_max as laplace_report_noisy_max
from gpuprivacy.mechanisms._gaussian_selection import (
    laplace_report_noisy_max_guarantee as laplace_report_noisy_max_guarantee,
)
from gpuprivacy.mechanisms._gaussian_sparse_vector import GaussianSparseVectorInfo as GaussianSparseVectorInfo
from gpuprivacy.mechanisms._gaussian_sparse_vector import ZHU_WANG_CONVERSIONS as ZHU_WANG_CONVERSIONS
from gpuprivacy.mechanisms._gaussian_sparse_vector import gaussian_sparse_vector as gaussian_sparse_vector
from gpuprivacy.mechanisms._gaussian_sparse_vector import (
    gaussian_sparse_vector_guarantee as gaussian_sparse_vector_guarantee,
)
from gpuprivacy.mechanisms._gaussian_sparse_vector import (
    gaussian_sparse_vector_whitehouse as gaussian_sparse_vector_whitehouse,
)
from gpuprivacy.mechanisms._gaussian_sparse_vector import (
    gaussian_sparse_vector_whitehouse_guarantee as gaussian_sparse_vector_whitehouse_guarantee,
)

# Seed-specific families live in their own public namespaces.
from gpuprivacy.mechanisms import blackbox as blackbox
from gpuprivacy.mechanisms import instance_optimal as instance_optimal
from gpuprivacy.mechanisms import median as median
from gpuprivacy.mechanisms import wrappers as wrappers
