"""Design planning: the covering strength t each mechanism needs, and the (m, t, design) choice.

All quantities are public: they depend on n, the privacy target, |Y|, beta
and the budget on oracle calls, never on data.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from gpuprivacy._checks import (
    LEVEL_LIMIT,
    check_epsilon,
    check_int,
    check_level,
    check_positive,
    check_probability,
)
from gpuprivacy.designs._aggregate import DEFAULT_MAX_WORK, MAX_TRANSFORM_CHUNKS
from gpuprivacy.designs._constructions import all_subsets_design, block_design
from gpuprivacy.subsets import SubsetFamily

MECHANISMS = ("pure", "zcdp", "binary")


def pure_tau(*, epsilon: float, num_outputs: int, beta: float) -> int:
    """Thm 3.3 / (3.8): ``tau = ceil((2/epsilon) ln(|Y|/beta))``; the design needs t = 2 tau."""
    epsilon = check_epsilon(epsilon)
    num_outputs = check_int("num_outputs", num_outputs, minimum=1)
    beta = check_probability("beta", beta)
    tau = 2.0 / epsilon * math.log(num_outputs / beta)
    check_level(2 * tau, epsilon=epsilon, what="the pure-DP covering design (t = 2 tau rows per block)",
                numerator=4.0 * math.log(num_outputs / beta))
    return max(1, math.ceil(tau))


def zcdp_search_parameters(*, rho: float, num_outputs: int, beta: float) -> tuple[int, float, float]:
    """Steinke & Steinke 2025, Thm 4.5, App. A.3-A.4 explicit naive noisy binary search: ``(steps s, sigma, eta)``.

    ``s = ceil(log2 N)``, ``sigma = sqrt(s/(2 rho))``, ``eta = sigma Phi^{-1}(1 - beta/s)``;
    the threshold is tau = eta and the design needs t = ceil(2 eta) - 1.
    """
    rho = check_positive("rho", rho)
    num_outputs = check_int("num_outputs", num_outputs, minimum=2)
    beta = check_probability("beta", beta)
    steps = max(1, math.ceil(math.log2(num_outputs)))
    sigma = math.sqrt(steps / (2.0 * rho))
    from scipy import special  # here, not at import: SciPy is a quarter of `import gpuprivacy`'s own time

    eta = sigma * float(special.ndtri(1.0 - beta / steps))
    # eta grows like 1/sqrt(rho): the design's t = 2 eta, refused with rho scaled by (eta / limit)^2.
    if not math.isfinite(eta) or 2 * eta > LEVEL_LIMIT:
        smallest = rho * (2 * eta / LEVEL_LIMIT) ** 2 if math.isfinite(eta) else None
        hint = f"the smallest rho that works is about {smallest:.6g}" if smallest else "use a much larger rho"
        raise ValueError(f"the zCDP covering design: rho={rho!r} needs blocks of about {2 * eta:.3g} rows, more "
                         f"than the {LEVEL_LIMIT} any dataset can have; {hint}.")
    return steps, sigma, eta


def required_t(mechanism: str, *, epsilon: float | None = None, rho: float | None = None, num_outputs: int = 2,
               beta: float = 1e-2) -> tuple[int, int]:
    """``(t, cap)``: the covering strength the mechanism's accuracy needs and the public cap C on F.

    * ``"pure"`` (Thm 4.4): t = 2 tau, C = 2 tau;
    * ``"zcdp"`` (Steinke & Steinke 2025, Thm 4.5, App. A.3-A.4): t = ceil(2 eta) - 1, C = ceil(2 eta);
    * ``"binary"`` (Steinke & Steinke 2025, Sec. 1.2): t = ceil((2/eps) ln(1/(2 beta))) - 1, C = t + 1.
    """
    if mechanism == "pure":
        tau = pure_tau(epsilon=epsilon, num_outputs=num_outputs, beta=beta)
        return 2 * tau, 2 * tau
    if mechanism == "zcdp":
        if rho is None:
            raise ValueError("mechanism 'zcdp' needs rho > 0.")
        _, _, eta = zcdp_search_parameters(rho=rho, num_outputs=num_outputs, beta=beta)
        cap = max(1, math.ceil(2 * eta))
        return max(cap - 1, 0), cap
    if mechanism == "binary":
        epsilon = check_epsilon(epsilon)
        beta = check_probability("beta", beta)
        t = max(0, math.ceil(2.0 / epsilon * math.log(1.0 / (2.0 * beta))) - 1)
        return t, t + 1
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}.")


class DesignCandidate(NamedTuple):
    """One design the planner considered (all public)."""

    design: str
    t: int
    c: int
    kept_size: int
    removed_size: int
    num_subsets: int
    aggregation: str
    aggregation_work: int


class DesignPlan(NamedTuple):
    """The planner's choice: the design that maximises n - m within the budget, and the alternatives.

    Attributes:
      choice: the chosen :class:`DesignCandidate` (``kept_size`` = n - m rows per evaluation,
        ``num_subsets`` = the k oracle calls that will run).
      t, cap: covering strength and the cap C of the mechanism.
      n: rows.
      candidates: every feasible candidate, best first.
    """

    choice: DesignCandidate
    t: int
    cap: int
    n: int
    candidates: tuple

    def build(self, *, key=None) -> SubsetFamily:
        """Builds the chosen design (keep masks)."""
        if self.choice.design == "all_subsets":
            return all_subsets_design(self.n, self.t, max_subsets=max(self.choice.num_subsets, 1))
        return block_design(self.n, self.t, self.choice.c, key=key, max_subsets=max(self.choice.num_subsets, 1))


def _block_work(t: int, c: int, k: int, cap: int) -> tuple[str, int]:
    """The cheapest exact method for a block design, as :func:`aggregation_plan` would choose it."""
    n0 = t + c
    if c == 1:
        return "sort", k * max(1, math.ceil(math.log2(k + 1)))
    nodes = min(sum(c**d for d in range(cap)), sum(math.comb(n0, d) for d in range(min(cap, n0 + 1))))
    options = [("branching", k * nodes)]
    if n0 <= MAX_TRANSFORM_CHUNKS:
        options.append(("subset_transform", n0 * 2**n0 + k))
    return min(options, key=lambda option: option[1])


def plan_design(n: int, *, budget: int, mechanism: str = "pure", epsilon: float | None = None,
                rho: float | None = None, num_outputs: int = 2, beta: float = 1e-2, max_c: int = 8,
                max_work: int = DEFAULT_MAX_WORK) -> DesignPlan:
    """Chooses (m, t, design) maximising the rows per evaluation n - m with k <= budget (Steinke & Steinke 2025, Thm 1.1, Sec. 3.4).

    Candidates: block designs with c = 1..max_c kept blocks (Table 6.1 rows
    1-3; c = 1 is sample-and-aggregate) and, for n <= 20, all t-subsets
    (m = t). A candidate is feasible if its k fits the budget and its exact
    aggregation fits ``max_work`` (decided from public parameters).

    Examples:
      >>> from gpuprivacy import designs
      >>> plan = designs.plan_design(1000, budget=300, epsilon=1.0, num_outputs=16, beta=0.1)
      >>> plan.t, plan.choice.design, plan.choice.c, plan.choice.num_subsets, plan.choice.kept_size
      (22, 'block', 2, 276, 82)

    Raises:
      ValueError: if no design fits (e.g. the budget is below t + 1).
    """
    n = check_int("n", n, minimum=1)
    budget = check_int("budget", budget, minimum=1)
    max_c = check_int("max_c", max_c, minimum=1)
    t, cap = required_t(mechanism, epsilon=epsilon, rho=rho, num_outputs=num_outputs, beta=beta)
    candidates = []
    for c in range(1, max_c + 1):
        k = math.comb(t + c, c)
        if k > budget or n < t + c:
            break
        method, work = _block_work(t, c, k, cap)
        if work > max_work:
            continue
        kept = c * (n // (t + c))
        candidates.append(DesignCandidate("block", t, c, kept, n - kept, k, method, work))
    if n <= 20 and t < n and math.comb(n, t) <= budget:
        candidates.append(DesignCandidate("all_subsets", t, n - t, n - t, t, math.comb(n, t), "subset_transform",
                                          n * 2**n))
    if not candidates:
        raise ValueError(f"no covering design for t = {t} (mechanism {mechanism!r}) fits n = {n} and budget = "
                         f"{budget} oracle calls; sample-and-aggregate alone needs k = t + 1 = {t + 1} and n >= "
                         f"{t + 1}. Raise the budget or epsilon, or lower |Y| or 1/beta.")
    candidates.sort(key=lambda cand: (-cand.kept_size, cand.num_subsets))
    return DesignPlan(choice=candidates[0], t=t, cap=cap, n=n, candidates=tuple(candidates))
