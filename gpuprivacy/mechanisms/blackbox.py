"""Black-box estimation over covering designs (seed 002).

Steinke & Steinke, *Privately Estimating Black-Box Statistics*: the robust
order statistics of a covering design's oracle values, the pure-DP
exponential-mechanism estimator, the zCDP noisy binary search and the
binary-output version. This module only re-exports.
"""

from gpuprivacy.mechanisms._covering._estimators import MAX_GRID_POINTS as MAX_GRID_POINTS
from gpuprivacy.mechanisms._covering._estimators import BlackboxInfo as BlackboxInfo
from gpuprivacy.mechanisms._covering._estimators import GridValues as GridValues
from gpuprivacy.mechanisms._covering._estimators import blackbox_binary as blackbox_binary
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_binary_from_values as blackbox_binary_from_values,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_binary_guarantee as blackbox_binary_guarantee,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_estimate as blackbox_estimate,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_estimate_from_values as blackbox_estimate_from_values,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_estimate_guarantee as blackbox_estimate_guarantee,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_estimate_probabilities as blackbox_estimate_probabilities,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_estimate_zcdp as blackbox_estimate_zcdp,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_estimate_zcdp_from_values as blackbox_estimate_zcdp_from_values,
)
from gpuprivacy.mechanisms._covering._estimators import (
    blackbox_estimate_zcdp_guarantee as blackbox_estimate_zcdp_guarantee,
)
from gpuprivacy.mechanisms._covering._estimators import gdp_mu_for as gdp_mu_for
from gpuprivacy.mechanisms._covering._estimators import grid_values as grid_values
from gpuprivacy.mechanisms._covering._estimators import (
    order_statistics_for as order_statistics_for,
)
from gpuprivacy.mechanisms._covering._estimators import output_grid as output_grid
from gpuprivacy.mechanisms._covering._estimators import pure_scores as pure_scores
from gpuprivacy.mechanisms._covering._estimators import to_grid as to_grid
from gpuprivacy.mechanisms._covering._estimators import zcdp_rho_for as zcdp_rho_for
