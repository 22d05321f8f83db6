"""Privacy guarantees, conversions and composition."""

from gpuprivacy.accounting._guarantees import ApproxDP as ApproxDP
from gpuprivacy.accounting._guarantees import PureDP as PureDP
from gpuprivacy.accounting._guarantees import ZCDP as ZCDP
from gpuprivacy.accounting._guarantees import check_guarantee as check_guarantee
from gpuprivacy.accounting._guarantees import compose as compose
from gpuprivacy.accounting._guarantees import round_up as round_up
from gpuprivacy.accounting._guarantees import zcdp_delta_cks as zcdp_delta_cks
from gpuprivacy.accounting._guarantees import zcdp_epsilon_bun_steinke as zcdp_epsilon_bun_steinke
from gpuprivacy.accounting._guarantees import zcdp_epsilon_cks as zcdp_epsilon_cks

# Gaussian mechanism calibration (re-exported by gpuprivacy.mechanisms).
from gpuprivacy.accounting._gaussian_calibration import gaussian_delta_analytic as gaussian_delta_analytic
from gpuprivacy.accounting._gaussian_calibration import gaussian_sigma_analytic as gaussian_sigma_analytic
from gpuprivacy.accounting._gaussian_calibration import gaussian_sigma_classic as gaussian_sigma_classic
from gpuprivacy.accounting._gaussian_calibration import gaussian_sigma_discrete as gaussian_sigma_discrete
from gpuprivacy.accounting._gaussian_calibration import gaussian_sigma_zcdp as gaussian_sigma_zcdp

# Gaussian selection with pure DP (Lebensold et al. 2024): bounds, baselines, calibration.
from gpuprivacy.accounting._calibrate import CALIBRATION_BOUNDS as CALIBRATION_BOUNDS
from gpuprivacy.accounting._calibrate import calibrate_sigma as calibrate_sigma
from gpuprivacy.accounting._gaussian_selection import gaussian_at_epsilon as gaussian_at_epsilon
from gpuprivacy.accounting._gaussian_selection import gaussian_at_epsilon_capped as gaussian_at_epsilon_capped
from gpuprivacy.accounting._gaussian_selection import gaussian_at_epsilon_no_top as gaussian_at_epsilon_no_top
from gpuprivacy.accounting._gaussian_selection import gaussian_at_epsilon_table as gaussian_at_epsilon_table
from gpuprivacy.accounting._gaussian_selection import gaussian_rnm_epsilon as gaussian_rnm_epsilon
from gpuprivacy.accounting._rdp import DEFAULT_ORDERS as DEFAULT_ORDERS
from gpuprivacy.accounting._rdp import gaussian_epsilon_analytic as gaussian_epsilon_analytic
from gpuprivacy.accounting._rdp import gaussian_rdp as gaussian_rdp
from gpuprivacy.accounting._rdp import gaussian_rnm_epsilon_postprocessing as gaussian_rnm_epsilon_postprocessing
from gpuprivacy.accounting._rdp import rdp_to_dp_epsilon as rdp_to_dp_epsilon
from gpuprivacy.accounting._rdp import zhu_wang_at_epsilon as zhu_wang_at_epsilon
from gpuprivacy.accounting._rdp import zhu_wang_at_rdp as zhu_wang_at_rdp
