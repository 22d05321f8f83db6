"""The registry of auditable mechanisms.

Every public mechanism of gpuprivacy is registered here (with its worst-case
neighbours and claimed guarantee) and audited by ``tests/audit``; a registry
test fails when a public mechanism has no entry. Known-broken positive
controls are registered by the tests only, never by the package.
"""

from __future__ import annotations

import difflib
from typing import Callable

from gpuprivacy._lru import LRUCache
from gpuprivacy.audit._core import AuditableMechanism

_ENTRIES: dict[str, Callable[..., AuditableMechanism]] = {}
_DEFAULTS: dict[str, dict] = {}
# Built mechanisms hold their compiled samplers: the 64 most recently used are kept.
_BUILT: LRUCache = LRUCache(64)
# One name per mechanism across the auditor, the study engine and the CLI: the public release function's
# name in kebab case (``laplace-mechanism`` for :func:`gpuprivacy.mechanisms.laplace_mechanism`), and, where
# the auditor checks more than one configuration of it, the parameters that make each one in brackets
# (``gaussian-mechanism[calibration=classic]``). The older names keep working as aliases (a registry name is
# part of the CLI: ``gpuprivacy audit NAME``).
_ALIASES = {
    "laplace": "laplace-mechanism",
    "laplace-secure": "laplace-mechanism[secure=true]",
    "gaussian-analytic": "gaussian-mechanism[calibration=analytic]",
    "gaussian-classic": "gaussian-mechanism[calibration=classic]",
    "gaussian-zcdp": "gaussian-mechanism-zcdp",
    "report-noisy-max-exponential": "report-noisy-max[noise=exponential]",
    "report-noisy-max-gumbel": "report-noisy-max[noise=gumbel]",
    "report-noisy-max-laplace": "report-noisy-max[noise=laplace]",
    "laplace-report-noisy-max-standard": "laplace-report-noisy-max[calibration=standard]",
    "laplace-report-noisy-max-post-processing": "laplace-report-noisy-max[calibration=post_processing]",
    "plm-median": "piecewise-laplace-median",
    "inv-median": "inverse-sensitivity-median",
    "plm-clipped-mean": "piecewise-laplace-clipped-mean",
    "inv-clipped-mean": "inverse-sensitivity-clipped-mean",
    "plm-count": "piecewise-laplace-count",
    "inv-count": "inverse-sensitivity-count",
    "plm-vector-l2": "piecewise-laplace-vector[norm=l2]",
    "smooth-sensitivity-median-cauchy": "smooth-sensitivity-median[noise=cauchy]",
    "smooth-sensitivity-median-laplace": "smooth-sensitivity-median[noise=laplace]",
    "seed001-smooth-median-cauchy": "smooth-sensitivity-median[noise=cauchy]",
    "seed001-smooth-median-laplace": "smooth-sensitivity-median[noise=laplace]",
    "seed001-laplace-median": "laplace-median",
}


def _parse_value(text: str):
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _format_value(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def parse_name(name: str) -> tuple[str, dict]:
    """``"gaussian-mechanism[calibration=classic]"`` -> ``("gaussian-mechanism", {"calibration": "classic"})``.

    The first part is the mechanism's one name (its release function's name in kebab case, the name the study
    engine and the CLI use); the bracket, if any, names the parameters that make this configuration of it
    (``true``/``false`` are booleans, numbers are numbers, anything else a string).
    """
    if not isinstance(name, str):
        raise TypeError(f"a mechanism name is a string, got {name!r} ({type(name).__name__}).")
    base, bracket, rest = name.partition("[")
    if not bracket:
        return name, {}
    if not rest.endswith("]") or not base:
        raise ValueError(f"a mechanism name with parameters reads NAME[KEY=VALUE,...], got {name!r}; for example "
                         "'gaussian-mechanism[calibration=classic]'.")
    params = {}
    for item in filter(None, rest[:-1].split(",")):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"in the mechanism name {name!r}, {item!r} is not KEY=VALUE; for example "
                             "'gaussian-mechanism[calibration=classic]'.")
        params[key.strip()] = _parse_value(value.strip())
    return base, params


def _format_name(base: str, params: dict) -> str:
    if not params:
        return base
    return base + "[" + ",".join(f"{k}={_format_value(v)}" for k, v in sorted(params.items())) + "]"


def _canonical(name: str) -> str:
    name = _ALIASES.get(name, name)
    base, params = parse_name(name)
    return _format_name(base, params)  # parameters in one order, whatever order they were written in


def canonical_name(name: str) -> str:
    """The registry's name for ``name`` (an older name, or bracket parameters in another order, resolved).

    Raises ``ValueError`` naming the registered configurations when ``name`` is none of them.
    """
    canonical = _canonical(name)
    if canonical in _ENTRIES:
        return canonical
    base = parse_name(canonical)[0]
    variants = [n for n in _ENTRIES if parse_name(n)[0] == base]
    if variants:
        raise ValueError(f"the auditor checks {base!r} in {len(variants)} configurations; name one: "
                         f"{', '.join(sorted(variants))}.")
    close = difflib.get_close_matches(name, sorted(set(_ENTRIES) | set(_ALIASES)), n=3)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
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
    name = _format_name(base, fixed)
    if name in _ENTRIES:
        raise ValueError(f"a mechanism named {name!r} is already registered with the auditor.")
    _ENTRIES[name] = factory
    _DEFAULTS[name] = {**default_params, **fixed}


def unregister(name: str) -> None:
    """Removes an entry (for tests that register temporary positive controls)."""
    name = _canonical(name)
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
            raise ValueError(f"{name!r} is the configuration {k}={_format_value(fixed[k])}; got {k}={v!r}. Name "
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
