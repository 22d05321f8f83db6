"""Type aliases used on public signatures."""

from typing import Protocol

import jax

Array = jax.Array
Key = jax.Array  # a typed PRNG key from jax.random.key(seed)
KeepMask = jax.Array  # bool[k, n]; True means KEEP (STYLE rule 13)
Scores = jax.Array  # float[num_candidates]


class OracleFn(Protocol):
    """An untrusted statistic evaluated on one gathered subset.

    ``rows`` is ``[capacity, ...]``: the subset's rows in canonical order
    (ascending lexicographic order of the rows), then zero padding.
    ``valid`` is ``bool[capacity]`` and is True exactly on the first
    ``|subset|`` slots. The oracle never sees excluded rows, their
    positions, or the dataset size n.
    """

    def __call__(self, rows: Array, valid: Array) -> Array: ...
