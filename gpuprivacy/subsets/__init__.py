"""Subset families as tensors: keep masks, kept indices, or lazily unranked removals."""

from gpuprivacy.subsets._combinatorics import colex_rank as colex_rank
from gpuprivacy.subsets._combinatorics import colex_unrank as colex_unrank
from gpuprivacy.subsets._combinatorics import count_removals as count_removals
from gpuprivacy.subsets._combinatorics import removal_index as removal_index
from gpuprivacy.subsets._combinatorics import removal_set as removal_set
from gpuprivacy.subsets._families import SubsetFamily as SubsetFamily
from gpuprivacy.subsets._families import check_family_size as check_family_size
from gpuprivacy.subsets._families import from_indices as from_indices
from gpuprivacy.subsets._families import from_keep_masks as from_keep_masks
from gpuprivacy.subsets._families import partition as partition
from gpuprivacy.subsets._families import random_subsets as random_subsets
from gpuprivacy.subsets._families import removals as removals
from gpuprivacy.subsets._powerset import POWERSET_MAX_N as POWERSET_MAX_N
from gpuprivacy.subsets._powerset import bitmask_to_removal_index as bitmask_to_removal_index
from gpuprivacy.subsets._powerset import child_ranks as child_ranks
from gpuprivacy.subsets._powerset import largest_depth_within as largest_depth_within
from gpuprivacy.subsets._powerset import largest_n_within as largest_n_within
from gpuprivacy.subsets._powerset import level_reduce as level_reduce
from gpuprivacy.subsets._powerset import level_removed_sets as level_removed_sets
from gpuprivacy.subsets._powerset import levels_closure_max as levels_closure_max
from gpuprivacy.subsets._powerset import plan_queries as plan_queries
from gpuprivacy.subsets._powerset import popcounts as popcounts
from gpuprivacy.subsets._powerset import query_count as query_count
from gpuprivacy.subsets._powerset import subset_max as subset_max
