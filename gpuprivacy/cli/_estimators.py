"""The one static table of ``gpuprivacy estimate`` mechanisms, by name.

Each family module lists its entries in ``ESTIMATORS``; this module only
collects them (the family modules import nothing from here, so there is no
registration at import time and no import cycle). Add an entry at run time
with :func:`register_estimator`.
"""

from __future__ import annotations

from typing import Callable

from gpuprivacy.cli import _estimate_classic
from gpuprivacy.cli import _estimate_covering
from gpuprivacy.cli import _estimate_instance_optimal
from gpuprivacy.cli import _estimate_median
from gpuprivacy.cli import _estimate_wrappers
from gpuprivacy._names import current_name
from gpuprivacy.cli._estimate_common import Estimator
from gpuprivacy.cli._estimate_common import make_key as make_key

ESTIMATORS: dict[str, Estimator] = {
    entry.name: entry
    for module in (_estimate_classic, _estimate_wrappers, _estimate_instance_optimal, _estimate_covering,
                   _estimate_median)
    for entry in module.ESTIMATORS
}


def canonical_estimator(name: str) -> str:
    """``--mechanism NAME`` with an older name resolved (``laplace`` -> ``laplace-mechanism``, gpuprivacy/_names.py)
    and underscores read as hyphens (``private_median``, the Python name, is ``private-median``): the
    registry form of :func:`gpuprivacy._names.current_name`, over the names of :data:`ESTIMATORS`."""
    return current_name(name, known=ESTIMATORS)


def register_estimator(name: str, run: Callable, help: str, add_arguments: Callable | None = None) -> None:
    """Makes ``gpuprivacy estimate --mechanism NAME`` call ``run(key, data, oracle_fn, args)``.

    ``add_arguments(group)``, if given, adds the estimator's own options to an
    argparse argument group of ``gpuprivacy estimate`` (e.g. ``--design``).
    Give every option a default; each ``run`` reads only its own options.
    """
    if name in ESTIMATORS:
        raise ValueError(f"an estimator named {name!r} is already registered.")
    ESTIMATORS[name] = Estimator(name, run, help, add_arguments)
