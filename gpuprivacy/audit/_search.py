"""Seeded random search for neighbouring pairs that make a mechanism leak the most."""

from __future__ import annotations

from typing import NamedTuple

import jax

from gpuprivacy._checks import check_int, check_key
from gpuprivacy.audit._core import audit
from gpuprivacy.audit._mechanism import AuditableMechanism
from gpuprivacy.audit._result import AuditResult


class NeighbourSearchResult(NamedTuple):
    """The most violating pair found, and the (selection-stage) audit that found it.

    Re-audit ``dataset`` / ``neighbour`` with fresh samples before reporting:
    the selection-stage bound is maximised over candidates and is optimistic.
    """

    dataset: object
    neighbour: object
    selection_audit: AuditResult
    num_candidates: int


def search_neighbours(mechanism: AuditableMechanism, key, *, num_candidates: int = 20, num_samples: int = 20_000,
                      confidence: float = 0.99, claim=None, delta=None) -> NeighbourSearchResult:
    """Tries ``num_candidates`` random neighbouring pairs and keeps the one with the largest bound.

    Pairs come from ``mechanism.random_dataset`` and ``mechanism.random_neighbour``
    (one row added, removed or changed), keyed by ``fold_in(key, i)``.
    """
    if mechanism.random_dataset is None or mechanism.random_neighbour is None:
        raise ValueError(f"{mechanism.name} defines no random_dataset / random_neighbour, so it cannot be searched; "
                         "audit its worst-case pairs instead.")
    key = check_key(key)
    num_candidates = check_int("num_candidates", num_candidates, minimum=1)
    best = None
    for i in range(num_candidates):
        k_data, k_neighbour, k_audit = jax.random.split(jax.random.fold_in(key, i), 3)
        x = mechanism.random_dataset(k_data)
        x_prime = mechanism.random_neighbour(k_neighbour, x)
        result = audit(mechanism, x, x_prime, claim=claim, num_samples=num_samples, confidence=confidence,
                       delta=delta, key=k_audit)
        if best is None or result.epsilon_lower > best[2].epsilon_lower:
            best = (x, x_prime, result)
    return NeighbourSearchResult(best[0], best[1], best[2], num_candidates)
