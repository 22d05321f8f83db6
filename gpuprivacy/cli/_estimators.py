"""Mechanisms that ``gpuprivacy estimate`` can run, by name.

An estimator takes the loaded column, the library oracle, the parsed
arguments and a key, and returns a JSON-ready dict with at least ``value``
(the release) and ``guarantee``. Seed issues register theirs with
:func:`register_estimator`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class Estimator:
    name: str
    run: Callable
    help: str
    add_arguments: Callable | None = None


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(name: str, run: Callable, help: str, add_arguments: Callable | None = None) -> None:
    """Makes ``gpuprivacy estimate --mechanism NAME`` call ``run(key, data, oracle_fn, args)``.

    ``add_arguments(group)``, if given, adds the estimator's own options to an
    argparse argument group of ``gpuprivacy estimate`` (e.g. ``--design``).
    Give every option a default; each ``run`` reads only its own options.
    """
    if name in ESTIMATORS:
        raise ValueError(f"an estimator named {name!r} is already registered.")
    ESTIMATORS[name] = Estimator(name, run, help, add_arguments)


def _statistic_on_full_data(data, oracle_fn):
    from gpuprivacy import oracle, subsets

    return float(np.asarray(oracle.evaluate(oracle_fn, data, subsets.removals(data.shape[0], 0)))[0])


def _require_sensitivity(args, mechanism):
    if args.sensitivity is None:
        raise ValueError(f"--mechanism {mechanism} adds noise calibrated to a sensitivity you declare: pass "
                         "--sensitivity X (the most one row can change the statistic). gpuprivacy does not check "
                         "this claim for the classic mechanisms; the black-box wrappers (seed 000) do.")
    return args.sensitivity


def _laplace(key, data, oracle_fn, args):
    from gpuprivacy import mechanisms

    sensitivity = _require_sensitivity(args, "laplace")
    exact = _statistic_on_full_data(data, oracle_fn)
    release = mechanisms.laplace_mechanism(key, exact, epsilon=args.epsilon, sensitivity=sensitivity,
                                           secure=args.secure)
    guarantee = mechanisms.laplace_mechanism_guarantee(epsilon=args.epsilon, sensitivity=sensitivity,
                                                       secure=args.secure)
    return {"value": float(release.value), "scale": float(release.info.scale),
            "guarantee": {"type": "PureDP", "epsilon": guarantee.epsilon}}


def _gaussian(key, data, oracle_fn, args):
    from gpuprivacy import mechanisms

    sensitivity = _require_sensitivity(args, "gaussian")
    if args.delta is None:
        raise ValueError("--mechanism gaussian needs --delta D in (0, 1), e.g. --delta 1e-6.")
    exact = _statistic_on_full_data(data, oracle_fn)
    release = mechanisms.gaussian_mechanism(key, exact, epsilon=args.epsilon, delta=args.delta,
                                            sensitivity=sensitivity, secure=args.secure)
    guarantee = mechanisms.gaussian_mechanism_guarantee(epsilon=args.epsilon, delta=args.delta,
                                                        sensitivity=sensitivity)
    return {"value": float(release.value), "sigma": float(release.info.sigma),
            "guarantee": {"type": "ApproxDP", "epsilon": guarantee.epsilon, "delta": guarantee.delta}}


register_estimator("laplace", _laplace, "statistic + Laplace noise with your declared --sensitivity")
register_estimator("gaussian", _gaussian, "statistic + analytic Gaussian noise (--delta) with your --sensitivity")


def make_key(seed):
    if seed is None:
        seed = int.from_bytes(np.random.SeedSequence().entropy.to_bytes(16, "little")[:8], "little") >> 1
    return jax.random.key(seed), seed


# The seed issues register their estimators at import (kept last: they import register_estimator).
from gpuprivacy.cli import _estimators_seed000  # noqa: E402,F401
from gpuprivacy.cli import _estimators_seed001  # noqa: E402,F401
from gpuprivacy.cli import _estimators_seed002  # noqa: E402,F401
from gpuprivacy.cli import _estimators_seed003  # noqa: E402,F401
