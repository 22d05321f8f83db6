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
  chosen on a selection half of the samples and bounded on a separate
  evaluation half (fresh keys).
* Real outputs: threshold events ``{y <= t}`` and ``{y > t}``, ``t`` among
  512 quantiles of a pilot (the selection half's first block); the best
  event is chosen on the selection half and bounded on the evaluation half
  (DP-Sniper style), so the reported bound is honest.

How the samples are drawn and counted: :mod:`gpuprivacy.audit._streams`.

Statistical protocol, unchanged by the engine: the evaluation half's counts
are computed for every candidate event, but only the event chosen from the
selection half's counts is ever read, so the choice cannot depend on them.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.sharding import Mesh

from gpuprivacy._checks import (check_chunk_size, check_int, check_key, check_nonnegative, check_probability,
                                data_checked_by_caller)
from gpuprivacy._config import require_x64
from gpuprivacy._progress import Progress
from gpuprivacy.accounting import check_guarantee
from gpuprivacy.audit._confidence import clopper_pearson
from gpuprivacy.audit._mechanism import AuditableMechanism
from gpuprivacy.audit._result import AuditResult, _default_delta, claimed_epsilon_at
from gpuprivacy.audit._streams import (
    SAMPLES_AXIS, _SELECTION_CAPACITY, _Streams, _TABLE_CAPACITY, _output_counter, _ThresholdCounter, _block_counter,
    _block_size, _count_outputs, _draw, _output_spec, default_mesh,
)

_MAX_SPLIT_CANDIDATES = 16
_THRESHOLD_QUANTILES = 512
# Confidence level used only to rank candidate events on the selection half.
_SELECTION_ALPHA = 1e-3


# --------------------------------------------------------------------------- events and bounds (on the host)


def _best_event(p_counts, q_counts, n_p, n_q, alpha_each, delta):
    """Best log((p_lower - delta) / q_upper) over events and both directions."""
    best = (0.0, None, "", 0.0, 1.0)
    (p_lower, p_upper), (q_lower, q_upper) = clopper_pearson(p_counts, n_p, alpha_each), \
        clopper_pearson(q_counts, n_q, alpha_each)
    for direction, a_lower, b_upper in (("x over x'", p_lower, q_upper), ("x' over x", q_lower, p_upper)):
        with np.errstate(divide="ignore", invalid="ignore"):
            bounds = np.where(a_lower - delta > 0, np.log(np.maximum(a_lower - delta, 1e-300)) - np.log(b_upper),
                              -np.inf)
        if bounds.size and np.max(bounds) > best[0]:
            i = int(np.argmax(bounds))
            best = (float(bounds[i]), i, direction, float(a_lower[i]), float(b_upper[i]))
    return best


def audit(mechanism: AuditableMechanism, dataset, neighbour, *, claim=None, num_samples: int = 10**5,
          confidence: float = 1 - 1e-6, delta: float | None = None, key=None,
          progress: bool = False, chunk_size: int | None = None, mesh: Mesh | None = None) -> AuditResult:
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
      chunk_size: samples each device draws per step (default: from the backend's byte budget). Results do
        not depend on it.
      mesh: a ``jax.sharding.Mesh`` of this process's devices with a ``"samples"`` axis to split the
        sampling over (default: every local device). Results do not depend on it.

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
    if num_samples > MAX_AUDIT_SAMPLES:
        hours = 2 * num_samples / _FASTEST_SAMPLES_PER_S / 3600
        raise ValueError(
            f"num_samples={num_samples:.3g} cannot finish: both datasets need that many releases, about {hours:.3g} "
            f"hours at {_FASTEST_SAMPLES_PER_S:.0e} releases/s (the fastest this auditor has run, on an H200) and "
            f"far longer on a CPU. The cap is {MAX_AUDIT_SAMPLES:.0e}, where the Clopper-Pearson bounds already "
            "resolve probabilities near 1e-9; pass num_samples <= that.")
    confidence = check_probability("confidence", confidence)
    chunk_size = check_chunk_size(chunk_size)
    delta = _default_delta(claim) if delta is None else check_nonnegative("delta", delta)
    if not delta < 1:
        raise ValueError(f"delta must be in [0, 1) (a probability below 1), got {delta!r}.")
    mesh = default_mesh() if mesh is None else mesh
    if SAMPLES_AXIS not in mesh.shape:
        raise ValueError(f"mesh must have an axis named {SAMPLES_AXIS!r}, got axes {tuple(mesh.shape)}; build one "
                         "with jax.sharding.Mesh(jax.local_devices(), ('samples',)).")
    if mechanism.neighbours is not None:
        reason = mechanism.neighbours(dataset, neighbour)
        if reason is not None:
            raise ValueError(f"{mechanism.name}: the two inputs are not neighbours under its privacy claim ({reason}); "
                             "an audit of them says nothing about the claim. Pass a neighbouring pair, e.g. "
                             f"{mechanism.name}'s worst_case_pairs.")
    require_x64("gpuprivacy.audit.audit")
    key = jax.random.key(0) if key is None else check_key(key)
    key_p, key_q = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
    alpha = 1.0 - confidence
    if mechanism.output_kind == "real" or mechanism.output_range_size is None:
        if num_samples // 2 < 1:
            kind = "real-valued outputs (half selects the event)" if mechanism.output_kind == "real" else \
                "mechanisms without a declared output range"
            raise ValueError(f"num_samples must be >= 2 for {kind}.")
    _check_datasets_eagerly(mechanism, key_p, dataset, neighbour)
    with Progress(2 * num_samples, f"audit {mechanism.name}", enabled=progress) as bar, data_checked_by_caller():
        run = _audit_discrete if mechanism.output_kind == "discrete" else _audit_real
        found = run(mechanism, dataset, neighbour, key_p, key_q, num_samples, alpha, delta, mesh, chunk_size, bar)
    epsilon_lower, event, direction, p_lower, q_upper = found
    claimed = claimed_epsilon_at(claim, delta)
    return AuditResult(mechanism=mechanism.name, epsilon_lower=max(0.0, epsilon_lower), delta=delta,
                       confidence=confidence, claim=claim, claimed_epsilon=claimed,
                       violated=bool(epsilon_lower > claimed), event=event, direction=direction,
                       p_lower=p_lower, q_upper=q_upper, num_samples=num_samples,
                       output_kind=mechanism.output_kind)


# More samples than this cannot finish (refused up front); the rate is the fastest measured (BENCHMARKS.md).
MAX_AUDIT_SAMPLES = 10 ** 10
_FASTEST_SAMPLES_PER_S = 1e8


def _check_datasets_eagerly(mechanism, key, x, x_prime) -> None:
    """Runs the audited release once on each concrete dataset, so its own data checks raise here.

    The samplers then trace the datasets (:func:`gpuprivacy._checks.data_checked_by_caller`): the
    auditor has checked them, with the mechanism's own checks, before any sample is drawn.
    """
    release = getattr(mechanism.sample, "release", None)
    if release is None:
        return
    for data in (x, x_prime):
        release(key, data)


def _pair_streams(mechanism, x, x_prime, key_p, key_q, block, mesh, chunk_size, bar):
    """The two datasets' stream drivers, after checking their outputs agree in shape."""
    spec_p = _output_spec(mechanism, key_p, x, block)
    spec_q = _output_spec(mechanism, key_q, x_prime, block)
    if spec_p.shape != spec_q.shape:
        raise ValueError(f"output shapes differ between the datasets: {spec_p.shape} vs {spec_q.shape}.")
    return (_Streams(mechanism, spec_p, x, mesh, chunk_size, bar),
            _Streams(mechanism, spec_q, x_prime, mesh, chunk_size, bar), spec_p, spec_q)


def _audit_discrete(mechanism, x, x_prime, key_p, key_q, num_samples, alpha, delta, mesh, chunk_size, bar):
    declared = mechanism.output_range_size
    half = num_samples if declared is not None else num_samples // 2
    n_eval = num_samples - half
    # Streams: with a declared range, all samples; otherwise a selection half (keys key_p, key_q) and an
    # evaluation half (keys fold_in(., 10^9)). Each is counted on the device; one transfer brings all back.
    streams = [(key_p, key_q, half)] + ([] if declared is not None else
                                        [(jax.random.fold_in(key_p, 10**9), jax.random.fold_in(key_q, 10**9), n_eval)])
    stream_p, stream_q, spec_p, spec_q = _pair_streams(mechanism, x, x_prime, key_p, key_q, _block_size(half), mesh,
                                                       chunk_size, bar)
    capacity = min(declared + 1, _TABLE_CAPACITY) if declared is not None else _SELECTION_CAPACITY
    counters = (_output_counter(spec_p, capacity), _output_counter(spec_q, capacity))
    on_device = None not in counters
    states = [(stream_p.count(counters[0], kp, n, _block_size(n)), stream_q.count(counters[1], kq, n, _block_size(n)))
              if on_device else None for kp, kq, n in streams]
    tables = []
    for (kp, kq, n), pair in zip(streams, jax.device_get(states)):
        counted = [counter.finish(state) for counter, state in zip(counters, pair)] if on_device else [({}, 0, True)]
        if any(overflow for _, _, overflow in counted):
            if on_device and declared is not None and capacity == declared + 1:
                distinct = max(d for _, d, _ in counted)
                raise ValueError(f"{mechanism.name} produced at least {distinct} distinct outputs but declares an "
                                 f"output range of {declared}.")
            # More distinct outputs than a device table holds, or outputs wider than a word: count this stream
            # on the host (the same samples, block by block).
            counted = [(_count_outputs(_draw(mechanism, k, data, n, None)), 0, False)
                       for k, data in ((kp, x), (kq, x_prime))]
        tables.append(tuple(c for c, _, _ in counted))
    shape = spec_p.shape
    if declared is not None:
        counts_p, counts_q = tables[0]
        outputs = sorted(set(counts_p) | set(counts_q))
        if len(outputs) > declared:
            raise ValueError(f"{mechanism.name} produced {len(outputs)} distinct outputs but declares an output "
                             f"range of {declared}.")
        # Two bounds per output and direction, over every possible output: Bonferroni.
        alpha_each = alpha / (4 * declared)
        n_p = n_q = num_samples
    else:
        # Candidates are chosen on the selection half only; their counts come from the evaluation half.
        outputs = _top_candidates(*tables[0], half)
        counts_p, counts_q = tables[1]
        n_p = n_q = n_eval
        alpha_each = alpha / (4 * max(len(outputs), 1))
    p = np.array([counts_p.get(o, 0) for o in outputs], dtype=np.int64)
    q = np.array([counts_q.get(o, 0) for o in outputs], dtype=np.int64)
    bound, index, direction, lower, upper = _best_event(p, q, n_p, n_q, alpha_each, delta)
    event = "none beats chance" if index is None else f"output == {_format_output(outputs[index], shape)}"
    return bound, event, direction, lower, upper


def _format_output(value, shape):
    if shape == ():
        return repr(value[0])
    return repr(list(value))


def _top_candidates(counts_p, counts_q, n):
    """Up to 16 outputs with the largest smoothed log-ratio in either direction (first half)."""
    outputs = sorted(set(counts_p) | set(counts_q))
    p = np.array([counts_p.get(o, 0) for o in outputs], dtype=np.int64)
    q = np.array([counts_q.get(o, 0) for o in outputs], dtype=np.int64)
    score = np.full(len(outputs), -np.inf)
    if outputs:
        (p_lower, q_lower), (p_upper, q_upper) = clopper_pearson(np.stack([p, q]), n, _SELECTION_ALPHA)
        with np.errstate(divide="ignore"):
            score = np.maximum(np.log(p_lower) - np.log(q_upper), np.log(q_lower) - np.log(p_upper))
    order = np.argsort(-score, kind="stable")[:_MAX_SPLIT_CANDIDATES]
    return [outputs[i] for i in order]


def _pilot_thresholds(pilot_p, pilot_q, size) -> np.ndarray:
    """``_THRESHOLD_QUANTILES`` quantiles (NumPy's linear rule) of the pooled first ``size`` pilot outputs.

    Computed on the host: the pilot (two blocks) is the only sample data that comes back before the end. NumPy's
    sort beats XLA's on a CPU by ~10x, and this keeps the thresholds identical on every backend.
    """
    pilot_p, pilot_q = jax.device_get((pilot_p, pilot_q))
    pooled = np.concatenate([np.asarray(pilot_p)[:size], np.asarray(pilot_q)[:size]]).astype(np.float64)
    return np.quantile(pooled, np.linspace(0.0, 1.0, _THRESHOLD_QUANTILES))


def _audit_real(mechanism, x, x_prime, key_p, key_q, num_samples, alpha, delta, mesh, chunk_size, bar):
    half = num_samples // 2
    n_eval = num_samples - half
    block, eval_block = _block_size(half), _block_size(n_eval)
    stream_p, stream_q, spec_p, _ = _pair_streams(mechanism, x, x_prime, key_p, key_q, block, mesh, chunk_size, bar)
    if spec_p.shape != ():
        raise ValueError(f"real-valued audits need scalar outputs, got outputs of shape {spec_p.shape}; give the "
                         "mechanism a sample function that returns one real per sample.")
    # Events {y <= t} and {y > t} for t among 512 quantiles of a pilot: block 0 of each selection stream
    # (all of the selection half when it fits one block). The best event and direction are chosen from the
    # selection half's counts, and bounded on the evaluation half (fresh keys), DP-Sniper style. All four
    # streams are counted on the device at every threshold, so no count returns to the host until the end;
    # the evaluation counts of the events not chosen are never looked at, so the choice cannot see them.
    counter = _ThresholdCounter(_THRESHOLD_QUANTILES, pilot=block)
    no_thresholds = np.zeros(_THRESHOLD_QUANTILES)  # the shape of the thresholds, for the pilot's step
    pilot_p, pilot_q = stream_p.pilot(counter, key_p, block, no_thresholds), \
        stream_q.pilot(counter, key_q, block, no_thresholds)
    thresholds = _pilot_thresholds(pilot_p, pilot_q, min(block, half))
    update = _block_counter(counter, block)
    pilot = [update(counter.init(), out, np.int64(0), np.int64(half), thresholds) for out in (pilot_p, pilot_q)]
    if bar is not None:
        bar.update(2 * min(block, half))
    key_p_eval, key_q_eval = jax.random.fold_in(key_p, 10**9), jax.random.fold_in(key_q, 10**9)
    states = [stream_p.count(counter, key_p, half, block, thresholds, first=1),
              stream_q.count(counter, key_q, half, block, thresholds, first=1),
              stream_p.count(counter, key_p_eval, n_eval, eval_block, thresholds),
              stream_q.count(counter, key_q_eval, n_eval, eval_block, thresholds)]
    pilot, states = jax.device_get((pilot, states))  # the one transfer of counts
    hist = [counter.finish(s) if s is not None else 0 for s in states]
    hist[0], hist[1] = hist[0] + counter.finish(pilot[0]), hist[1] + counter.finish(pilot[1])
    thresholds, first = np.unique(thresholds, return_index=True)  # ties give equal counts: keep one
    below = [np.cumsum(h)[first] for h in hist]  # #{y <= t}
    above = [n - b - h[-1] for b, h, n in zip(below, hist, (half, half, n_eval, n_eval))]  # #{y > t} (NaN in neither)
    below_p, below_q, above_p, above_q = below[0], below[1], above[0], above[1]
    # Score each event by the bound it would give on the selection half (at a moderate level), so that rare,
    # noisy tail events do not win by chance. One call: repeated counts are solved once.
    counts = np.stack([below_p, below_q, above_p, above_q])
    lower, upper = clopper_pearson(counts, half, _SELECTION_ALPHA)
    candidates = []
    for side, a, b in (("<=", 0, 1), (">", 2, 3)):
        for direction, num, den in (("x over x'", a, b), ("x' over x", b, a)):
            with np.errstate(divide="ignore", invalid="ignore"):
                score = np.where(lower[num] - delta > 0,
                                 np.log(np.maximum(lower[num] - delta, 1e-300)) - np.log(upper[den]), -np.inf)
            if score.size and np.isfinite(np.max(score)):
                i = int(np.argmax(score))
                candidates.append((float(score[i]), side, direction, i))
    if not candidates:
        return 0.0, "none beats chance", "", 0.0, 1.0
    _, side, direction, i = max(candidates, key=lambda c: c[0])
    counts_eval = below if side == "<=" else above
    k_p, k_q = int(counts_eval[2][i]), int(counts_eval[3][i])
    k_a, k_b = (k_p, k_q) if direction == "x over x'" else (k_q, k_p)
    # One chosen event: two one-sided bounds.
    (a_lower,), _ = clopper_pearson([k_a], n_eval, alpha / 2)
    _, (b_upper,) = clopper_pearson([k_b], n_eval, alpha / 2)
    bound = math.log(a_lower - delta) - math.log(b_upper) if a_lower - delta > 0 else -math.inf
    return bound, f"output {side} {float(thresholds[i]):.6g}", direction, float(a_lower), float(b_upper)
