"""What every ``gpuprivacy estimate`` entry shares: the :class:`Estimator` record and small helpers.

An estimator takes the loaded column, the library oracle, the parsed
arguments and a key, and returns a JSON-ready dict with at least ``value``
(the release) and ``guarantee``, the guarantee the release carries
(:func:`guarantee_json`; never recomputed by the CLI). Each family module (``_estimate_*.py``)
lists its entries in a module-level ``ESTIMATORS`` tuple; the one static
table of the CLI is built from those tuples in :mod:`gpuprivacy.cli._estimators`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import numpy as np

# Mechanisms that take an analyst's --oracle (laplace and gaussian only with --clamp).
ANY_ORACLE = ("sens-o-matic", "blackbox-estimate", "laplace-mechanism", "gaussian-mechanism")


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
    # The public release functions run() calls, under gpuprivacy.mechanisms (e.g. "wrappers.sens_o_matic"); the
    # first is the one the name is for (the name is its function name in kebab case, as in the study engine and
    # the auditor).
    releases: tuple[str, ...] = ()


def guarantee_json(release: Any) -> dict:
    """The guarantee ``release`` carries, as JSON: ``{"type": "PureDP", "epsilon": 1.0}``.

    Read off :attr:`gpuprivacy.mechanisms.Release.guarantee`, which the mechanism states from its
    validated parameters before it draws any noise (it refuses parameters whose guarantee cannot
    be stated), so the CLI prints exactly what the release says about itself.

    Raises:
      RuntimeError: if the release states no guarantee; its value is then not printed.
    """
    guarantee = release.guarantee
    if guarantee is None:
        raise RuntimeError("the mechanism returned a release without its guarantee; gpuprivacy does not print a "
                           "release whose guarantee it cannot state (this is a bug: please report it).")
    return {"type": type(guarantee).__name__,
            **{field.name: float(getattr(guarantee, field.name)) for field in dataclasses.fields(guarantee)}}


def statistic_on_full_data(data, oracle_fn):
    from gpuprivacy import oracle, subsets

    return float(np.asarray(oracle.evaluate(oracle_fn, data, subsets.removals(data.shape[0], 0)))[0])


def make_key(seed):
    if seed is None:
        seed = int.from_bytes(np.random.SeedSequence().entropy.to_bytes(16, "little")[:8], "little") >> 1
    return jax.random.key(seed), seed
