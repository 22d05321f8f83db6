"""Black-box estimation over covering designs (Steinke & Steinke 2025).

Steinke & Steinke, *Privately Estimating Black-Box Statistics*: the robust
order statistics of a covering design's oracle values, the pure-DP
exponential-mechanism estimator, the zCDP noisy binary search and the
binary-output version. This module only re-exports.
"""

from gpuprivacy.mechanisms._covering._grid import MAX_GRID_POINTS as MAX_GRID_POINTS
from gpuprivacy.mechanisms._covering._grid import BlackboxInfo as BlackboxInfo
from gpuprivacy.mechanisms._covering._grid import GridValues as GridValues
from gpuprivacy.mechanisms._covering._binary import blackbox_binary as blackbox_binary
from gpuprivacy.mechanisms._covering._binary import blackbox_binary_from_values as blackbox_binary_from_values
from gpuprivacy.mechanisms._covering._binary import blackbox_binary_guarantee as blackbox_binary_guarantee
from gpuprivacy.mechanisms._covering._pure import blackbox_estimate as blackbox_estimate
from gpuprivacy.mechanisms._covering._pure import blackbox_estimate_from_values as blackbox_estimate_from_values
from gpuprivacy.mechanisms._covering._pure import blackbox_estimate_guarantee as blackbox_estimate_guarantee
from gpuprivacy.mechanisms._covering._pure import blackbox_estimate_probabilities as blackbox_estimate_probabilities
from gpuprivacy.mechanisms._covering._zcdp import blackbox_estimate_zcdp as blackbox_estimate_zcdp
from gpuprivacy.mechanisms._covering._zcdp import (
    blackbox_estimate_zcdp_from_values as blackbox_estimate_zcdp_from_values,
)
from gpuprivacy.mechanisms._covering._zcdp import blackbox_estimate_zcdp_guarantee as blackbox_estimate_zcdp_guarantee
from gpuprivacy.mechanisms._covering._zcdp import gdp_mu_for as gdp_mu_for
from gpuprivacy.mechanisms._covering._grid import grid_values as grid_values
from gpuprivacy.mechanisms._covering._grid import order_statistics_for as order_statistics_for
from gpuprivacy.mechanisms._covering._grid import output_grid as output_grid
from gpuprivacy.mechanisms._covering._pure import pure_scores as pure_scores
from gpuprivacy.mechanisms._covering._grid import to_grid as to_grid
from gpuprivacy.mechanisms._covering._zcdp import zcdp_rho_for as zcdp_rho_for

# The release kernels on precomputed grid values, public for the auditor's vectorised sampler
# (gpuprivacy.audit) so that it need not reach into the private _covering package.
from gpuprivacy.mechanisms._covering._binary import _binary_release as binary_release_kernel  # noqa: E402
from gpuprivacy.mechanisms._covering._pure import _pure_release as pure_release_kernel  # noqa: E402
from gpuprivacy.mechanisms._covering._zcdp import _zcdp_release as zcdp_release_kernel  # noqa: E402
