"""The outcome of an audit and the epsilon a claim promises at a delta."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple


from gpuprivacy.accounting import ApproxDP, PureDP, ZCDP, check_guarantee

class AuditResult(NamedTuple):
    """The outcome of :func:`audit`.

    Attributes:
      mechanism: the audited mechanism's name.
      epsilon_lower: empirical lower bound on epsilon at ``delta`` (0 if no
        event beats chance), holding with probability >= ``confidence``.
      delta: the delta at which the bound and the claim are compared.
      confidence: the confidence level of ``epsilon_lower``.
      claim: the claimed guarantee.
      claimed_epsilon: the claim's epsilon at ``delta``.
      violated: ``epsilon_lower > claimed_epsilon``.
      event: the output or event attaining the bound, in words.
      direction: "x over x'" or "x' over x".
      p_lower: lower confidence bound of the event's probability on the first dataset of ``direction``.
      q_upper: upper confidence bound on the other dataset.
      num_samples: samples per dataset.
      output_kind: "discrete" or "real".
    """

    mechanism: str
    epsilon_lower: float
    delta: float
    confidence: float
    claim: Any
    claimed_epsilon: float
    violated: bool
    event: str
    direction: str
    p_lower: float
    q_upper: float
    num_samples: int
    output_kind: str

    def to_json(self) -> dict:
        claim = dataclasses.asdict(self.claim)
        claim["type"] = type(self.claim).__name__
        out = self._asdict()
        out["claim"] = claim
        return out


def claimed_epsilon_at(claim, delta: float) -> float:
    """The epsilon a guarantee promises at ``delta`` (inf if it promises nothing there)."""
    claim = check_guarantee(claim)
    if isinstance(claim, PureDP):
        return claim.epsilon
    if isinstance(claim, ApproxDP):
        return claim.epsilon if delta >= claim.delta else math.inf
    if isinstance(claim, ZCDP):
        if delta <= 0:
            return math.inf
        return claim.to_approx(delta).epsilon
    raise TypeError(f"unsupported claim {claim!r}")  # pragma: no cover


def _default_delta(claim) -> float:
    if isinstance(claim, PureDP):
        return 0.0
    if isinstance(claim, ApproxDP):
        return claim.delta
    return 1e-6
