"""Exact per-dataset error quantities of built-in mechanisms, for the study engine's ``exact`` metrics.

``EXACT_ERRORS[name](data, params) -> {quantity: scalar}`` (jnp, traceable, one dataset).
"""

from __future__ import annotations

from typing import Callable

EXACT_ERRORS: dict[str, Callable] = {}
