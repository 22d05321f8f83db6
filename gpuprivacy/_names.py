"""One name per mechanism, shared by the auditor, the study engine and the command line.

A mechanism's name is its public release function's name in kebab case (``laplace-mechanism`` is
:func:`gpuprivacy.mechanisms.laplace_mechanism`); where the auditor checks several configurations of one
mechanism, it names each with the parameters that make it in brackets (``gaussian-mechanism[calibration=classic]``).
The older names of :data:`OLDER_NAMES` keep working everywhere a name is read.
"""

from __future__ import annotations

import difflib
from typing import Iterable

# Older names -> current names (a configuration in brackets where the older name meant one).
OLDER_NAMES = {
    "laplace": "laplace-mechanism",
    "laplace-secure": "laplace-mechanism[secure=true]",
    "gaussian": "gaussian-mechanism",
    "gaussian-analytic": "gaussian-mechanism[calibration=analytic]",
    "gaussian-classic": "gaussian-mechanism[calibration=classic]",
    "gaussian-zcdp": "gaussian-mechanism-zcdp",
    "blackbox": "blackbox-estimate",
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


def format_value(value) -> str:
    """A bracket parameter's value as written in a name (booleans as ``true``/``false``)."""
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


def format_name(base: str, params: dict) -> str:
    """The inverse of :func:`parse_name`, parameters sorted (one spelling per configuration)."""
    if not params:
        return base
    return base + "[" + ",".join(f"{k}={format_value(v)}" for k, v in sorted(params.items())) + "]"


def current_name(name: str, *, known: Iterable[str] | None = None) -> str:
    """``name`` with an older name replaced and bracket parameters sorted.

    With ``known``, the names of a registry whose entries are whole mechanisms, not configurations (the
    command line's ``gpuprivacy estimate --mechanism``): underscores also read as hyphens (``private_median``,
    the Python name, is ``private-median``), an older name that means a configuration (``laplace-secure``) is
    not resolved (a configuration is the auditor's), and a name that is neither older nor in ``known`` comes
    back as it is, for the registry's own error to name.
    """
    spellings = (name,) if known is None else (name, name.replace("_", "-"))
    for spelling in spellings:
        older = OLDER_NAMES.get(spelling)
        if older is not None and (known is None or "[" not in older):
            return format_name(*parse_name(older))
    if known is None:
        return format_name(*parse_name(name))
    return spellings[1] if spellings[1] in known else name


def did_you_mean(name, known: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for a misspelt, underscored or older ``name`` among ``known`` ('' when none is close)."""
    if not isinstance(name, str):
        return ""
    known = list(known)
    older = OLDER_NAMES.get(name)
    for candidate in (name.replace("_", "-"), name.replace("-", "_"), older, older and parse_name(older)[0]):
        if candidate and candidate != name and candidate in known:
            return f" Did you mean {candidate!r}?"
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
