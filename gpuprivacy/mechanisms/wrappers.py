"""Privacy wrappers for untrusted black-box functions (Linder et al. 2025).

Linder et al., *Privately Evaluating Untrusted Black-Box Functions*: Shifted
Inverse, Sens-o-Matic, Subset Extension, Small-Diameter Subset Extension,
the Lipschitz filter, Double-Monotonization, and the baselines. This module
only re-exports; the code lives in ``gpuprivacy/mechanisms/_wrappers*.py``.
"""

from gpuprivacy.mechanisms._wrappers._applications import average_oracle as average_oracle
from gpuprivacy.mechanisms._wrappers._applications import convex_minimizer_oracle as convex_minimizer_oracle
from gpuprivacy.mechanisms._wrappers._applications import edge_density_oracle as edge_density_oracle
from gpuprivacy.mechanisms._wrappers._applications import gnp_adjacency as gnp_adjacency
from gpuprivacy.mechanisms._wrappers._applications import induced_subgraph_oracle as induced_subgraph_oracle
from gpuprivacy.mechanisms._wrappers._baselines import BaselineInfo as BaselineInfo
from gpuprivacy.mechanisms._wrappers._baselines import cummings_durfee as cummings_durfee
from gpuprivacy.mechanisms._wrappers._baselines import cummings_durfee_guarantee as cummings_durfee_guarantee
from gpuprivacy.mechanisms._wrappers._baselines import lipschitz_extension as lipschitz_extension
from gpuprivacy.mechanisms._wrappers._baselines import white_box_laplace as white_box_laplace
from gpuprivacy.mechanisms._wrappers._baselines import white_box_laplace_guarantee as white_box_laplace_guarantee
from gpuprivacy.mechanisms._wrappers._bounded_range import DoubleMonotonizationInfo as DoubleMonotonizationInfo
from gpuprivacy.mechanisms._wrappers._bounded_range import SmallDiameterInfo as SmallDiameterInfo
from gpuprivacy.mechanisms._wrappers._bounded_range import double_monotonization as double_monotonization
from gpuprivacy.mechanisms._wrappers._bounded_range import (
    double_monotonization_cap_delta as double_monotonization_cap_delta,
)
from gpuprivacy.mechanisms._wrappers._bounded_range import (
    double_monotonization_guarantee as double_monotonization_guarantee,
)
from gpuprivacy.mechanisms._wrappers._bounded_range import double_monotonization_tau as double_monotonization_tau
from gpuprivacy.mechanisms._wrappers._bounded_range import lipschitz_filter as lipschitz_filter
from gpuprivacy.mechanisms._wrappers._bounded_range import proxy_p as proxy_p
from gpuprivacy.mechanisms._wrappers._bounded_range import (
    small_diameter_subset_extension as small_diameter_subset_extension,
)
from gpuprivacy.mechanisms._wrappers._bounded_range import (
    small_diameter_subset_extension_guarantee as small_diameter_subset_extension_guarantee,
)
from gpuprivacy.mechanisms._wrappers._bounded_range import small_diameter_tau as small_diameter_tau
from gpuprivacy.mechanisms._wrappers._common import NONRESPONSE as NONRESPONSE
from gpuprivacy.mechanisms._wrappers._common import round_to_grid as round_to_grid
from gpuprivacy.mechanisms._wrappers._common import sanitise_real as sanitise_real
from gpuprivacy.mechanisms._wrappers._sens_o_matic import SensOMaticInfo as SensOMaticInfo
from gpuprivacy.mechanisms._wrappers._sens_o_matic import sens_o_matic as sens_o_matic
from gpuprivacy.mechanisms._wrappers._sens_o_matic import sens_o_matic_cap_delta as sens_o_matic_cap_delta
from gpuprivacy.mechanisms._wrappers._sens_o_matic import sens_o_matic_depths as sens_o_matic_depths
from gpuprivacy.mechanisms._wrappers._sens_o_matic import sens_o_matic_guarantee as sens_o_matic_guarantee
from gpuprivacy.mechanisms._wrappers._shifted_inverse import ShiftedInverseInfo as ShiftedInverseInfo
from gpuprivacy.mechanisms._wrappers._shifted_inverse import shifted_inverse as shifted_inverse
from gpuprivacy.mechanisms._wrappers._shifted_inverse import shifted_inverse_depth as shifted_inverse_depth
from gpuprivacy.mechanisms._wrappers._shifted_inverse import shifted_inverse_guarantee as shifted_inverse_guarantee
from gpuprivacy.mechanisms._wrappers._shifted_inverse import shifted_inverse_scores as shifted_inverse_scores
from gpuprivacy.mechanisms._wrappers._subset_extension import SubsetExtensionInfo as SubsetExtensionInfo
from gpuprivacy.mechanisms._wrappers._subset_extension import proxy_t as proxy_t
from gpuprivacy.mechanisms._wrappers._subset_extension import stability_floor as stability_floor
from gpuprivacy.mechanisms._wrappers._subset_extension import subset_extension as subset_extension
from gpuprivacy.mechanisms._wrappers._subset_extension import (
    subset_extension_guarantee as subset_extension_guarantee,
)
from gpuprivacy.mechanisms._wrappers._subset_extension import subset_extension_tau as subset_extension_tau
from gpuprivacy.mechanisms._wrappers._subset_extension import tahoe as tahoe
from gpuprivacy.mechanisms._wrappers._subset_extension import tahoe_guarantee as tahoe_guarantee
from gpuprivacy.mechanisms._wrappers._subset_extension import tahoe_tau as tahoe_tau
from gpuprivacy.mechanisms._wrappers._subset_extension import truncation_width as truncation_width
