"""The device mesh of the subset engine: one axis, ``"subsets"``, over every device of every process.

:func:`gpuprivacy.oracle.evaluate` and the power-set path split their subsets along this axis with
``shard_map``; :func:`initialize_distributed` extends it over the devices of several processes.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh

SUBSETS_AXIS = "subsets"


def default_mesh() -> Mesh:
    """A one-axis mesh named ``"subsets"`` over every device of every process."""
    return Mesh(np.asarray(jax.devices()), (SUBSETS_AXIS,))


def initialize_distributed(coordinator_address: str, num_processes: int, process_id: int, **kwargs) -> None:
    """Joins a multi-host run (a thin wrapper over :func:`jax.distributed.initialize`).

    Call it in every process before any other JAX work; afterwards
    :func:`~gpuprivacy.oracle.evaluate` shards subsets over the devices of all processes and
    every process receives all values. On CPU, JAX uses gloo collectives.
    """
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, **kwargs)
