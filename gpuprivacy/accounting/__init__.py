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
