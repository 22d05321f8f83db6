"""What every ``gpuprivacy estimate`` entry shares: the :class:`Estimator` record and small helpers.

An estimator takes the loaded column, the library oracle, the parsed
arguments and a key, and returns a JSON-ready dict with at least ``value``
(the release) and ``guarantee``. Each family module (``_estimate_*.py``)
lists its entries in a module-level ``ESTIMATORS`` tuple; the one static
table of the CLI is built from those tuples in :mod:`gpuprivacy.cli._estimators`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class Estimator:
    """``gpuprivacy estimate --mechanism NAME``: ``run(key, data, oracle_fn, args) -> dict``.

    ``add_arguments(group)``, if given, adds the estimator's own options to an
    argparse argument group (give every option a default; each ``run`` reads
    only its own options).
    """

    name: str
    run: Callable
    help: str
    add_arguments: Callable | None = None
    options: tuple[str, ...] = ()  # the option dests (beyond data, statistic, epsilon, seed) that run() reads


def statistic_on_full_data(data, oracle_fn):
    from gpuprivacy import oracle, subsets

    return float(np.asarray(oracle.evaluate(oracle_fn, data, subsets.removals(data.shape[0], 0)))[0])


def make_key(seed):
    if seed is None:
        seed = int.from_bytes(np.random.SeedSequence().entropy.to_bytes(16, "little")[:8], "little") >> 1
    return jax.random.key(seed), seed
