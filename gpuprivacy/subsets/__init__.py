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
