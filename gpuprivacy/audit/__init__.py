"""Privacy auditing: empirical lower bounds on epsilon, checked against every mechanism's claim."""

from gpuprivacy.audit import _classic  # noqa: F401  (registers the classic mechanisms)
from gpuprivacy.audit import _wrappers  # noqa: F401  (privacy wrappers)
from gpuprivacy.audit import _instance_optimal  # noqa: F401  (piecewise Laplace, inverse sensitivity)
from gpuprivacy.audit import _covering  # noqa: F401  (black-box estimation over covering designs)
from gpuprivacy.audit import _median  # noqa: F401  (private median)
from gpuprivacy.audit import _gaussian_selection  # noqa: F401  (Gaussian selection mechanisms, Lebensold et al. 2024)
from gpuprivacy.audit._confidence import clopper_pearson as clopper_pearson
from gpuprivacy.audit._core import audit as audit
from gpuprivacy.audit._mechanism import AuditableMechanism as AuditableMechanism
from gpuprivacy.audit._result import AuditResult as AuditResult
from gpuprivacy.audit._result import claimed_epsilon_at as claimed_epsilon_at
from gpuprivacy.audit._streams import SAMPLES_PER_CALL as SAMPLES_PER_CALL
from gpuprivacy.audit._registry import canonical_name as canonical_name
from gpuprivacy.audit._registry import default_params as default_params
from gpuprivacy.audit._registry import get as get
from gpuprivacy.audit._registry import parse_name as parse_name
from gpuprivacy.audit._registry import register as register
from gpuprivacy.audit._registry import registered as registered
from gpuprivacy.audit._registry import unregister as unregister
from gpuprivacy.audit._search import NeighbourSearchResult as NeighbourSearchResult
from gpuprivacy.audit._search import search_neighbours as search_neighbours
