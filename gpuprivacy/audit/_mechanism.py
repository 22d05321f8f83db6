"""What the auditor audits: a mechanism as it drives it, and the neighbour relations of the claims.

See :mod:`gpuprivacy.audit._core` for the audit itself.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from gpuprivacy.accounting import check_guarantee

OUTPUT_KINDS = ("discrete", "real")


@dataclasses.dataclass(frozen=True)
class AuditableMechanism:
    """A mechanism as the auditor drives it.

    Attributes:
      name: registry name.
      sample: ``sample(key, dataset, num_samples) -> outputs[num_samples, ...]``
        (the DP-Auditorium / DP-Sniper / StatDP shape), batched on the device.
      claim: the guarantee the library reports for these parameters.
      output_kind: "discrete" (finite or countable outputs: selections,
        stopping times, bit vectors) or "real" (scalar real outputs).
      worst_case_pairs: neighbouring ``(x, x')`` pairs known to be hardest
        (from the papers' worst-case analyses), as arrays.
      random_dataset: ``(key) -> dataset`` for the neighbour search.
      random_neighbour: ``(key, dataset) -> neighbour`` (one row added,
        removed or changed, as the claim's neighbour relation says).
      output_range_size: number of possible outputs, when known (discrete).
      audits: names of the public mechanism functions this entry checks.
      positive_control: True for known-broken mechanisms kept to test the auditor.
      description: one line for listings.
      neighbours: the claim's neighbour relation, ``(x, x') -> None`` when they
        are neighbours, else the reason they are not; :func:`audit` refuses a
        pair outside it (a "violation" on non-neighbours would be a false alarm).
    """

    name: str
    sample: Callable[[Any, Any, int], Any]
    claim: Any
    output_kind: str
    worst_case_pairs: tuple = ()
    random_dataset: Callable | None = None
    random_neighbour: Callable | None = None
    output_range_size: int | None = None
    audits: tuple[str, ...] = ()
    positive_control: bool = False
    description: str = ""
    neighbours: Callable[[Any, Any], str | None] | None = None

    def __post_init__(self):
        if self.output_kind not in OUTPUT_KINDS:
            raise ValueError(f"output_kind must be one of {OUTPUT_KINDS}, got {self.output_kind!r}.")
        check_guarantee(self.claim)


def _shape_and_finite(x, x_prime, *, same_shape: bool = True) -> str | None:
    """The checks every relation over real datasets starts with (None when they pass)."""
    if same_shape and x.shape != x_prime.shape:
        return f"shapes {x.shape} and {x_prime.shape} differ"
    if not (np.isfinite(x).all() and np.isfinite(x_prime).all()):
        return "they hold NaN or inf"
    return None


def neighbours_within(sensitivity: float, lower: float = -math.inf, upper: float = math.inf, *, norm: str = "max"):
    """A neighbour relation for :class:`AuditableMechanism`: answer vectors of one shape, finite, inside the
    public range ``[lower, upper]``, within ``sensitivity`` of each other in the ``norm`` ("max", "l1", "l2")."""
    def check(x, x_prime):
        x, x_prime = np.asarray(x, np.float64), np.asarray(x_prime, np.float64)
        reason = _shape_and_finite(x, x_prime)
        if reason is not None:
            return reason
        if x.size and (min(x.min(), x_prime.min()) < lower or max(x.max(), x_prime.max()) > upper):
            return f"values leave the public range [{lower:.6g}, {upper:.6g}]"
        diff = np.abs(x - x_prime).ravel()
        gap = float({"max": np.max, "l1": np.sum, "l2": np.linalg.norm}[norm](diff)) if x.size else 0.0
        if gap > sensitivity * (1 + 1e-12):
            return f"a coordinate moves by {gap:.6g}, more than the sensitivity {sensitivity:.6g}"
        return None
    check.relation = "bounded"  # the name the study engine's rows give it (gpuprivacy.sweeps)
    return check


def _rows(x):
    x = np.asarray(x, np.float64)
    return x.reshape(x.shape[0], -1) if x.ndim else x.reshape(1, 1)


def _unmatched(a, b) -> int:
    """How many rows of ``a`` have no partner in ``b`` (as multisets)."""
    from collections import Counter

    left = Counter(map(tuple, _rows(a).tolist()))
    left.subtract(Counter(map(tuple, _rows(b).tolist())))
    return sum(v for v in left.values() if v > 0)


def neighbours_add_remove():
    """Add/remove neighbours: finite datasets whose sizes differ by one, the smaller inside the larger."""
    def check(x, x_prime):
        x, x_prime = np.asarray(x, np.float64), np.asarray(x_prime, np.float64)
        reason = _shape_and_finite(x, x_prime, same_shape=False)
        if reason is not None:
            return reason
        small, large = (x, x_prime) if len(x) <= len(x_prime) else (x_prime, x)
        if x.shape[1:] != x_prime.shape[1:] or len(large) - len(small) != 1 or _unmatched(small, large):
            return f"they are not one dataset plus one row (sizes {len(x)} and {len(x_prime)})"
        return None
    check.relation = "add-remove"  # the name the study engine's rows give it (gpuprivacy.sweeps)
    return check


def neighbours_swap():
    """Swap (replace-one) neighbours: finite datasets of one size that differ in at most one row."""
    def check(x, x_prime):
        x, x_prime = np.asarray(x, np.float64), np.asarray(x_prime, np.float64)
        reason = _shape_and_finite(x, x_prime)
        if reason is not None:
            return reason
        if _unmatched(x, x_prime) > 1:
            return f"{_unmatched(x, x_prime)} rows differ (a swap changes one)"
        return None
    check.relation = "swap"  # the name the study engine's rows give it (gpuprivacy.sweeps)
    return check


def neighbours_empty_slot():
    """Add/remove over public slots: one shape, equal except one slot that is empty (NaN) in one of them."""
    def check(x, x_prime):
        x, x_prime = np.asarray(x, np.float64), np.asarray(x_prime, np.float64)
        if x.shape != x_prime.shape:
            return f"shapes {x.shape} and {x_prime.shape} differ"
        same = (x == x_prime) | (np.isnan(x) & np.isnan(x_prime))
        differ = np.flatnonzero(~same)
        if differ.size > 1 or (differ.size == 1 and not (np.isnan(x[differ[0]]) or np.isnan(x_prime[differ[0]]))):
            return f"{differ.size} slots differ, not one slot emptied"
        return None
    check.relation = "add-remove-slot"  # the name the study engine's rows give it (gpuprivacy.sweeps)
    return check
