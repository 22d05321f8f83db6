"""A parameter of a sweep mechanism or dataset, and the markers for its default."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Marks a :class:`SweepParameter` that every config must set."""


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""Marks a :class:`SweepParameter` left out of a cell unless the config sets it (the function's own
default applies; for defaults JSON cannot hold, such as ``lower = -inf``)."""



class SweepParameter(NamedTuple):
    """One parameter of a sweep mechanism or dataset.

    Attributes:
      check: validates one concrete value and returns its canonical form
        (e.g. ``1`` -> ``1.0`` for epsilon); raises ``ValueError`` or
        ``TypeError`` naming the problem. Runs before any cell is computed.
      default: value used when a config omits the key; :data:`REQUIRED` if
        there is none.
      example: a TOML snippet shown in error messages, e.g. ``"epsilon = [0.1, 1.0]"``.
    """

    check: Callable[[Any], Any]
    default: Any = REQUIRED
    example: str = ""
