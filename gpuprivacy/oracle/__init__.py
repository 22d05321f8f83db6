"""Batched evaluation of untrusted oracles over subset families, and ready oracles."""

from gpuprivacy.oracle._evaluate import SUBSETS_AXIS as SUBSETS_AXIS
from gpuprivacy.oracle._evaluate import canonical_order as canonical_order
from gpuprivacy.oracle._evaluate import default_mesh as default_mesh
from gpuprivacy.oracle._evaluate import evaluate as evaluate
from gpuprivacy.oracle._evaluate import gather_subset as gather_subset
from gpuprivacy.oracle._evaluate import initialize_distributed as initialize_distributed
from gpuprivacy.oracle._library import ORACLES as ORACLES
from gpuprivacy.oracle._library import clipped_mean as clipped_mean
from gpuprivacy.oracle._library import count as count
from gpuprivacy.oracle._library import least_squares as least_squares
from gpuprivacy.oracle._library import logistic_regression as logistic_regression
from gpuprivacy.oracle._library import mean as mean
from gpuprivacy.oracle._library import median as median
from gpuprivacy.oracle._library import oracle_by_name as oracle_by_name
from gpuprivacy.oracle._library import quantile as quantile
from gpuprivacy.oracle._library import sum_ as sum_
from gpuprivacy.oracle._library import trimmed_mean as trimmed_mean
from gpuprivacy.oracle._library import variance as variance
from gpuprivacy.oracle._levels import DEFAULT_CAPACITY as DEFAULT_CAPACITY
from gpuprivacy.oracle._levels import DEFAULT_MAX_QUERIES as DEFAULT_MAX_QUERIES
from gpuprivacy.oracle._levels import check_capacity as check_capacity
from gpuprivacy.oracle._levels import evaluate_levels as evaluate_levels
from gpuprivacy.oracle._isolation import padded_oracle as padded_oracle
from gpuprivacy.oracle._levels import split_levels as split_levels
from gpuprivacy.oracle._levels import to_powerset as to_powerset
from gpuprivacy.oracle._levels import evaluate_powerset as evaluate_powerset
