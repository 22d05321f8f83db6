"""The registry of auditable mechanisms.

Every public mechanism of gpuprivacy is registered here (with its worst-case
neighbours and claimed guarantee) and audited by ``tests/audit``; a registry
test fails when a public mechanism has no entry. Known-broken positive
controls are registered by the tests only, never by the package.
"""

from __future__ import annotations

from typing import Callable

from gpuprivacy._lru import LRUCache
from gpuprivacy._names import OLDER_NAMES, current_name, did_you_mean, format_name, format_value, parse_name
from gpuprivacy.audit._mechanism import AuditableMechanism

_ENTRIES: dict[str, Callable[..., AuditableMechanism]] = {}
_DEFAULTS: dict[str, dict] = {}
# Built mechanisms hold their compiled samplers: the 64 most recently used are kept.
_BUILT: LRUCache = LRUCache(64)
# Older names that still work (a registry name is part of the CLI: ``gpuprivacy audit NAME``); see gpuprivacy/_names.py.


def canonical_name(name: str) -> str:
    """The registry's name for ``name`` (an older name, or bracket parameters in another order, resolved).

    Raises ``ValueError`` naming the registered configurations when ``name`` is none of them.
    """
    canonical = current_name(name)
    if canonical in _ENTRIES:
        return canonical
    base = parse_name(canonical)[0]
    variants = [n for n in _ENTRIES if parse_name(n)[0] == base]
    if variants:
        raise ValueError(f"the auditor checks {base!r} in {len(variants)} configurations; name one: "
                         f"{', '.join(sorted(variants))}.")
    hint = did_you_mean(name, sorted(set(_ENTRIES) | set(OLDER_NAMES)))
    raise ValueError(f"no mechanism named {name!r} is registered with the auditor.{hint} Choose one of "
                     f"{registered()} (`gpuprivacy audit --list`).")


def register(name: str, factory: Callable[..., AuditableMechanism], **default_params) -> None:
    """Registers ``factory(**params) -> AuditableMechanism`` under ``name``.

    ``name`` is the mechanism's one name, with the parameters of this configuration in brackets where the
    auditor checks more than one (``"gaussian-mechanism[calibration=classic]"``); the bracket parameters are
    passed to ``factory``. ``default_params`` are CI-sized parameters used by ``gpuprivacy audit NAME`` and
    the registry tests when none are given.
    """
    base, fixed = parse_name(name)
    name = format_name(base, fixed)
    if name in _ENTRIES:
        raise ValueError(f"a mechanism named {name!r} is already registered with the auditor.")
    _ENTRIES[name] = factory
    _DEFAULTS[name] = {**default_params, **fixed}


def unregister(name: str) -> None:
    """Removes an entry (for tests that register temporary positive controls)."""
    name = current_name(name)
    _ENTRIES.pop(name, None)
    _DEFAULTS.pop(name, None)
    for cache_key in [k for k in _BUILT if k[0] == name]:
        del _BUILT[cache_key]


def registered() -> list[str]:
    """Names of every registered mechanism (positive controls included, if a test registered them)."""
    return sorted(_ENTRIES)


def get(name: str, **params) -> AuditableMechanism:
    """The auditable mechanism ``name`` built with ``params`` (defaults filled in)."""
    name = canonical_name(name)
    fixed = parse_name(name)[1]
    for k, v in params.items():
        if k in fixed and v != fixed[k]:
            raise ValueError(f"{name!r} is the configuration {k}={format_value(fixed[k])}; got {k}={v!r}. Name "
                             f"the configuration you want instead (`gpuprivacy audit --list`).")
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
    name = canonical_name(name)
    return dict(_DEFAULTS[name])
