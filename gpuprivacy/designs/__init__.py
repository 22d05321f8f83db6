"""Covering designs as subset families (Steinke & Steinke 2025): constructions, an exact verifier, bounds and a planner."""

from gpuprivacy.designs._aggregate import DEFAULT_MAX_WORK as DEFAULT_MAX_WORK
from gpuprivacy.designs._aggregate import MAX_TRANSFORM_CHUNKS as MAX_TRANSFORM_CHUNKS
from gpuprivacy.designs._aggregate import AggregationPlan as AggregationPlan
from gpuprivacy.designs._aggregate import aggregation_plan as aggregation_plan
from gpuprivacy.designs._aggregate import hitting_counts as hitting_counts
from gpuprivacy.designs._aggregate import (
    robust_order_statistics as robust_order_statistics,
)
from gpuprivacy.designs._bounds import binomial_ratio as binomial_ratio
from gpuprivacy.designs._bounds import block_design_size as block_design_size
from gpuprivacy.designs._bounds import corollary_3_8_bounds as corollary_3_8_bounds
from gpuprivacy.designs._bounds import (
    oracle_calls_lower_bound as oracle_calls_lower_bound,
)
from gpuprivacy.designs._bounds import (
    random_cover_upper_bound as random_cover_upper_bound,
)
from gpuprivacy.designs._bounds import schonheim_bound as schonheim_bound
from gpuprivacy.designs._constructions import all_subsets_design as all_subsets_design
from gpuprivacy.designs._constructions import block_chunk_masks as block_chunk_masks
from gpuprivacy.designs._constructions import block_design as block_design
from gpuprivacy.designs._constructions import blow_up as blow_up
from gpuprivacy.designs._constructions import check_covering as check_covering
from gpuprivacy.designs._constructions import covering_strength as covering_strength
from gpuprivacy.designs._constructions import greedy_design as greedy_design
from gpuprivacy.designs._constructions import random_chunk_masks as random_chunk_masks
from gpuprivacy.designs._constructions import random_design as random_design
from gpuprivacy.designs._constructions import (
    sample_and_aggregate as sample_and_aggregate,
)
from gpuprivacy.designs._constructions import uncovered_t_subsets as uncovered_t_subsets
from gpuprivacy.designs._constructions import verify_covering as verify_covering
from gpuprivacy.designs._planner import DesignCandidate as DesignCandidate
from gpuprivacy.designs._planner import DesignPlan as DesignPlan
from gpuprivacy.designs._planner import plan_design as plan_design
from gpuprivacy.designs._planner import pure_tau as pure_tau
from gpuprivacy.designs._planner import required_t as required_t
from gpuprivacy.designs._planner import zcdp_search_parameters as zcdp_search_parameters
from gpuprivacy.designs._structure import ChunkStructure as ChunkStructure
from gpuprivacy.designs._structure import chunk_structure as chunk_structure
from gpuprivacy.designs._structure import keep_matrix as keep_matrix
