"""The registry of auditable mechanisms.

Every public mechanism of gpuprivacy is registered here (with its worst-case
neighbours and claimed guarantee) and audited by ``tests/audit``; a registry
test fails when a public mechanism has no entry. Known-broken positive
controls are registered by the tests only, never by the package.
"""

from __future__ import annotations

from typing import Callable

from gpuprivacy._lru import LRUCache
from gpuprivacy.audit._core import AuditableMechanism

_ENTRIES: dict[str, Callable[..., AuditableMechanism]] = {}
_DEFAULTS: dict[str, dict] = {}
# Built mechanisms hold their compiled samplers: the 64 most recently used are kept.
_BUILT: LRUCache = LRUCache(64)
# Older names that still work (a registry name is part of the CLI: ``gpuprivacy audit NAME``).
_ALIASES = {
    "seed001-smooth-median-cauchy": "smooth-sensitivity-median-cauchy",
    "seed001-smooth-median-laplace": "smooth-sensitivity-median-laplace",
    "seed001-laplace-median": "laplace-median",
}


def _canonical(name: str) -> str:
    return _ALIASES.get(name, name)


def register(name: str, factory: Callable[..., AuditableMechanism], **default_params) -> None:
    """Registers ``factory(**params) -> AuditableMechanism`` under ``name``.

    ``default_params`` are CI-sized parameters used by ``gpuprivacy audit NAME``
    and the registry tests when none are given.
    """
    if name in _ENTRIES:
        raise ValueError(f"a mechanism named {name!r} is already registered with the auditor.")
    _ENTRIES[name] = factory
    _DEFAULTS[name] = dict(default_params)


def unregister(name: str) -> None:
    """Removes an entry (for tests that register temporary positive controls)."""
    _ENTRIES.pop(name, None)
    _DEFAULTS.pop(name, None)
    for cache_key in [k for k in _BUILT if k[0] == name]:
        del _BUILT[cache_key]


def registered() -> list[str]:
    """Names of every registered mechanism (positive controls included, if a test registered them)."""
    return sorted(_ENTRIES)


def get(name: str, **params) -> AuditableMechanism:
    """The auditable mechanism ``name`` built with ``params`` (defaults filled in)."""
    name = _canonical(name)
    if name not in _ENTRIES:
        raise ValueError(f"no mechanism named {name!r} is registered with the auditor; choose one of "
                         f"{registered()}.")
    merged = {**_DEFAULTS[name], **params}
    try:
        cache_key = (name, tuple(sorted(merged.items())))
        hash(cache_key)
    except TypeError:  # unhashable parameters: build afresh
        return _ENTRIES[name](**merged)
    # Cached so that auditing the same entry again reuses its compiled sampler.
    if cache_key not in _BUILT:
        _BUILT[cache_key] = _ENTRIES[name](**merged)
    return _BUILT[cache_key]


def default_params(name: str) -> dict:
    name = _canonical(name)
    if name not in _DEFAULTS:
        raise ValueError(f"no mechanism named {name!r} is registered with the auditor.")
    return dict(_DEFAULTS[name])
