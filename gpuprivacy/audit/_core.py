"""Empirical lower bounds on epsilon from samples of a mechanism on two neighbours.

A DP claim (epsilon, delta) says that for every event S,
``P[M(x) in S] <= e^epsilon P[M(x') in S] + delta`` and symmetrically. So
any event with confidence bounds ``p_lower <= P[M(x) in S]`` and
``q_upper >= P[M(x') in S]`` certifies

.. math:: \\varepsilon \\ge \\log \\frac{p_{\\text{lower}} - \\delta}{q_{\\text{upper}}}

with the stated confidence (Ding et al. 2018, "Detecting Violations of
Differential Privacy"; Bichsel et al. 2021, "DP-Sniper"). If that bound
exceeds the claimed epsilon, the claim is violated.

* Discrete outputs: the events are the single outputs. When the mechanism
  declares the size of its output range, all outputs are candidates and the
  confidence is split over them (Bonferroni); otherwise the candidates are
  chosen on the first half of the samples and bounded on the second half.
* Real outputs: threshold events ``{y <= t}`` and ``{y > t}``; the best
  event is chosen on the first half of the samples and bounded on the
  second half (DP-Sniper style), so the reported bound is honest.

Samples are drawn on the device in blocks of up to 2^16 with keys
``fold_in(key, block)``, so 10^7 samples per side never need to be resident
at once (discrete outputs are reduced to counts block by block) and results
depend only on ``(key, num_samples)``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from gpuprivacy._checks import check_int, check_key, check_nonnegative, check_probability
from gpuprivacy._progress import Progress
from gpuprivacy.accounting import ApproxDP, PureDP, ZCDP, check_guarantee
from gpuprivacy.audit._confidence import clopper_pearson

OUTPUT_KINDS = ("discrete", "real")
_MAX_SPLIT_CANDIDATES = 16
# Largest number of samples drawn per call to ``mechanism.sample``.
SAMPLES_PER_CALL = 1 << 16
_THRESHOLD_QUANTILES = 512
# Confidence level used only to rank candidate events on the selection half.
_SELECTION_ALPHA = 1e-3


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
    return check


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


def _block_size(num_samples: int) -> int:
    # Samples per device call: a power of two, at most SAMPLES_PER_CALL, so that
    # each mechanism compiles for one shape per audit.
    return min(SAMPLES_PER_CALL, max(1024, 1 << (int(num_samples) - 1).bit_length()))


def _draw(mechanism, key, dataset, num_samples, bar):
    """Yields output blocks of ``mechanism.sample``; block ``i`` uses ``fold_in(key, i)``.

    Blocks have a fixed size (the last one is truncated), so the samples depend
    only on ``(key, num_samples)``.
    """
    block = _block_size(num_samples)
    done, index = 0, 0
    while done < num_samples:
        out = np.asarray(mechanism.sample(jax.random.fold_in(key, index), dataset, block))
        if out.shape[0] != block:
            raise ValueError(f"{mechanism.name}.sample returned {out.shape[0]} outputs for num_samples={block}; it "
                             "must return a leading axis of length num_samples.")
        size = min(block, num_samples - done)
        yield out[:size]
        done += size
        index += 1
        if bar is not None:
            bar.update(size)


def _count_outputs(chunks, counts: dict, shape_holder: list):
    for out in chunks:
        if not shape_holder:
            shape_holder.append(out.shape[1:])
        elif shape_holder[0] != out.shape[1:]:
            raise ValueError(f"output shapes differ: {shape_holder[0]} vs {out.shape[1:]}.")
        rows = out.reshape(out.shape[0], -1)
        if rows.shape[1] == 1:
            values, freq = np.unique(rows[:, 0], return_counts=True)
            keys = [(v,) for v in values.tolist()]
        else:
            # One void scalar per row: a 1-D unique is far faster than unique(axis=0).
            packed = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))
            values, index, freq = np.unique(packed[:, 0], return_index=True, return_counts=True)
            keys = [tuple(rows[i].tolist()) for i in index]
        for value, f in zip(keys, freq.tolist()):
            counts[value] = counts.get(value, 0) + f


def _best_event_one_direction(a, b, n_a, n_b, alpha_each, delta):
    a_lower, _ = clopper_pearson(a, n_a, alpha_each)
    _, b_upper = clopper_pearson(b, n_b, alpha_each)
    with np.errstate(divide="ignore", invalid="ignore"):
        bounds = np.where(a_lower - delta > 0, np.log(np.maximum(a_lower - delta, 1e-300)) - np.log(b_upper), -np.inf)
    if not bounds.size or not np.isfinite(np.max(bounds)):
        return -np.inf, None, 0.0, 1.0
    i = int(np.argmax(bounds))
    return float(bounds[i]), i, float(a_lower[i]), float(b_upper[i])


def _best_event(p_counts, q_counts, n_p, n_q, alpha_each, delta):
    """Best log((p_lower - delta) / q_upper) over events and both directions."""
    best = (0.0, None, "", 0.0, 1.0)
    for direction, a, b, n_a, n_b in (("x over x'", p_counts, q_counts, n_p, n_q),
                                      ("x' over x", q_counts, p_counts, n_q, n_p)):
        a_lower, _ = clopper_pearson(a, n_a, alpha_each)
        _, b_upper = clopper_pearson(b, n_b, alpha_each)
        with np.errstate(divide="ignore", invalid="ignore"):
            bounds = np.where(a_lower - delta > 0, np.log(np.maximum(a_lower - delta, 1e-300)) - np.log(b_upper),
                              -np.inf)
        if bounds.size and np.max(bounds) > best[0]:
            i = int(np.argmax(bounds))
            best = (float(bounds[i]), i, direction, float(a_lower[i]), float(b_upper[i]))
    return best


def audit(mechanism: AuditableMechanism, dataset, neighbour, *, claim=None, num_samples: int = 10**5,
          confidence: float = 1 - 1e-6, delta: float | None = None, key=None,
          progress: bool = False) -> AuditResult:
    """Audits a mechanism's privacy claim on one pair of neighbouring datasets.

    Args:
      mechanism: an :class:`AuditableMechanism` (see :func:`registered`).
      dataset, neighbour: the two neighbouring inputs.
      claim: the guarantee to test (default: ``mechanism.claim``).
      num_samples: samples per dataset (>= 1; 10^5 is CI-sized, 10^7 routine on a GPU).
      confidence: probability that ``epsilon_lower`` is a valid lower bound, in (0, 1).
      delta: the delta of the comparison (default: 0 for pure DP, the claim's
        delta for approximate DP, 1e-6 for zCDP).
      key: PRNG key (default ``jax.random.key(0)``).
      progress: show a progress bar on stderr.

    Returns:
      An :class:`AuditResult`.

    Raises:
      TypeError: a claim that is not a privacy guarantee.
      ValueError: num_samples < 1, confidence outside (0, 1), delta outside
        [0, 1), a pair outside the mechanism's neighbour relation, outputs
        whose shapes differ between the two datasets.
    """
    if not isinstance(mechanism, AuditableMechanism):
        raise TypeError(f"mechanism must be an AuditableMechanism, got {type(mechanism).__name__}.")
    claim = check_guarantee(mechanism.claim if claim is None else claim)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    confidence = check_probability("confidence", confidence)
    delta = _default_delta(claim) if delta is None else check_nonnegative("delta", delta)
    if not delta < 1:
        raise ValueError(f"delta must be in [0, 1) (a probability below 1), got {delta!r}.")
    if mechanism.neighbours is not None:
        reason = mechanism.neighbours(dataset, neighbour)
        if reason is not None:
            raise ValueError(f"{mechanism.name}: the two inputs are not neighbours under its privacy claim ({reason}); "
                             "an audit of them says nothing about the claim. Pass a neighbouring pair, e.g. "
                             f"{mechanism.name}'s worst_case_pairs.")
    key = jax.random.key(0) if key is None else check_key(key)
    key_p, key_q = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
    alpha = 1.0 - confidence
    with Progress(2 * num_samples, f"audit {mechanism.name}", enabled=progress) as bar:
        if mechanism.output_kind == "discrete":
            found = _audit_discrete(mechanism, dataset, neighbour, key_p, key_q, num_samples, alpha, delta,
                                    bar)
        else:
            found = _audit_real(mechanism, dataset, neighbour, key_p, key_q, num_samples, alpha, delta,
                                bar)
    epsilon_lower, event, direction, p_lower, q_upper = found
    claimed = claimed_epsilon_at(claim, delta)
    return AuditResult(mechanism=mechanism.name, epsilon_lower=max(0.0, epsilon_lower), delta=delta,
                       confidence=confidence, claim=claim, claimed_epsilon=claimed,
                       violated=bool(epsilon_lower > claimed), event=event, direction=direction,
                       p_lower=p_lower, q_upper=q_upper, num_samples=num_samples,
                       output_kind=mechanism.output_kind)


def _audit_discrete(mechanism, x, x_prime, key_p, key_q, num_samples, alpha, delta, bar):
    shape = []
    if mechanism.output_range_size is not None:
        counts_p, counts_q = {}, {}
        _count_outputs(_draw(mechanism, key_p, x, num_samples, bar), counts_p, shape)
        _count_outputs(_draw(mechanism, key_q, x_prime, num_samples, bar), counts_q, shape)
        outputs = sorted(set(counts_p) | set(counts_q))
        if len(outputs) > mechanism.output_range_size:
            raise ValueError(f"{mechanism.name} produced {len(outputs)} distinct outputs but declares an output "
                             f"range of {mechanism.output_range_size}.")
        # Two bounds per output and direction, over every possible output: Bonferroni.
        alpha_each = alpha / (4 * mechanism.output_range_size)
        n_p = n_q = num_samples
    else:
        half = num_samples // 2
        if half < 1:
            raise ValueError("num_samples must be >= 2 for mechanisms without a declared output range.")
        select_p, select_q = {}, {}
        _count_outputs(_draw(mechanism, key_p, x, half, bar), select_p, shape)
        _count_outputs(_draw(mechanism, key_q, x_prime, half, bar), select_q, shape)
        outputs = _top_candidates(select_p, select_q, half)
        counts_p, counts_q = {}, {}
        n_p = n_q = num_samples - half
        _count_outputs(_draw(mechanism, jax.random.fold_in(key_p, 10**9), x, n_p, bar), counts_p, shape)
        _count_outputs(_draw(mechanism, jax.random.fold_in(key_q, 10**9), x_prime, n_q, bar),
                       counts_q, shape)
        alpha_each = alpha / (4 * max(len(outputs), 1))
    p = np.array([counts_p.get(o, 0) for o in outputs], dtype=np.int64)
    q = np.array([counts_q.get(o, 0) for o in outputs], dtype=np.int64)
    bound, index, direction, lower, upper = _best_event(p, q, n_p, n_q, alpha_each, delta)
    event = "none beats chance" if index is None else f"output == {_format_output(outputs[index], shape)}"
    return bound, event, direction, lower, upper


def _format_output(value, shape):
    if shape and shape[0] == ():
        return repr(value[0])
    return repr(list(value))


def _top_candidates(counts_p, counts_q, n):
    """Up to 16 outputs with the largest smoothed log-ratio in either direction (first half)."""
    outputs = sorted(set(counts_p) | set(counts_q))
    p = np.array([counts_p.get(o, 0) for o in outputs], dtype=np.int64)
    q = np.array([counts_q.get(o, 0) for o in outputs], dtype=np.int64)
    score = np.full(len(outputs), -np.inf)
    for a, b in ((p, q), (q, p)):
        a_lower, _ = clopper_pearson(a, n, _SELECTION_ALPHA)
        _, b_upper = clopper_pearson(b, n, _SELECTION_ALPHA)
        with np.errstate(divide="ignore"):
            score = np.maximum(score, np.log(a_lower) - np.log(b_upper))
    order = np.argsort(-score, kind="stable")[:_MAX_SPLIT_CANDIDATES]
    return [outputs[i] for i in order]


def _audit_real(mechanism, x, x_prime, key_p, key_q, num_samples, alpha, delta, bar):
    half = num_samples // 2
    if half < 1:
        raise ValueError("num_samples must be >= 2 for real-valued outputs (half selects the event).")
    draw = lambda key, data, n: np.concatenate(list(_draw(mechanism, key, data, n, bar)))
    sel_p, sel_q = draw(key_p, x, half), draw(key_q, x_prime, half)
    if sel_p.shape[1:] != sel_q.shape[1:]:
        raise ValueError(f"output shapes differ between the datasets: {sel_p.shape[1:]} vs {sel_q.shape[1:]}.")
    if sel_p.ndim != 1:
        raise ValueError(f"real-valued audits need scalar outputs, got outputs of shape {sel_p.shape[1:]}; give the "
                         "mechanism a sample function that returns one real per sample.")
    # Candidate thresholds from the pooled first half; choose event and direction there.
    pooled = np.sort(np.concatenate([sel_p, sel_q]))
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, _THRESHOLD_QUANTILES)))
    sel_p.sort()
    sel_q.sort()
    below_p = np.searchsorted(sel_p, thresholds, side="right")
    below_q = np.searchsorted(sel_q, thresholds, side="right")
    candidates = []
    for side, a, b in (("<=", below_p, below_q), (">", half - below_p, half - below_q)):
        for direction, num, den in (("x over x'", a, b), ("x' over x", b, a)):
            # Score each event by the bound it would give on the selection half (at a
            # moderate level), so that rare, noisy tail events do not win by chance.
            score, i, *_ = _best_event_one_direction(num, den, half, half, _SELECTION_ALPHA, delta)
            if i is not None:
                candidates.append((score, side, direction, thresholds[i]))
    if not candidates:
        return 0.0, "none beats chance", "", 0.0, 1.0
    _, side, direction, threshold = max(candidates, key=lambda c: c[0])
    n_eval = num_samples - half
    eval_p = draw(jax.random.fold_in(key_p, 10**9), x, n_eval)
    eval_q = draw(jax.random.fold_in(key_q, 10**9), x_prime, n_eval)
    hit = (lambda y: y <= threshold) if side == "<=" else (lambda y: y > threshold)
    a, b = (eval_p, eval_q) if direction == "x over x'" else (eval_q, eval_p)
    k_a, k_b = int(hit(a).sum()), int(hit(b).sum())
    # One chosen event: two one-sided bounds.
    (a_lower,), _ = clopper_pearson([k_a], n_eval, alpha / 2)
    _, (b_upper,) = clopper_pearson([k_b], n_eval, alpha / 2)
    bound = math.log(a_lower - delta) - math.log(b_upper) if a_lower - delta > 0 else -math.inf
    return bound, f"output {side} {float(threshold):.6g}", direction, float(a_lower), float(b_upper)
