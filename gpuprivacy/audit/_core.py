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

How the samples are drawn and counted (the auditor's engine). Each dataset's
samples form a stream: block ``b`` is ``sample(fold_in(key, b), x, block)``
(``block`` up to 2^16 samples), cut at ``num_samples``, so the samples depend
only on ``(key, num_samples)``. A jitted step draws many blocks per call
(``chunk_size`` samples per device, from a byte budget of the backend), and
counts them on the device as it goes: a table of distinct outputs for
discrete outputs, a histogram over the thresholds for real ones. The blocks
are split over a mesh of devices (``shard_map`` over a ``"samples"`` axis:
each device draws only its own blocks' keys and keeps its own counts). No
count returns to the host until every stream of the audit is counted: then
one transfer brings the counts back, and Clopper-Pearson bounds
(:mod:`._confidence`, NumPy float64) are computed there. The only samples
that ever reach the host are a real-valued audit's pilot (two blocks, before
any counting), whose quantiles place the thresholds. Counts are integers,
so they agree exactly for every chunk size and device count. Samplers that
need their dataset on the host (``np.asarray(x)``) are called block by block
from Python, their blocks counted by the same device code. Two cases are
counted on the host instead, block by block, on the same samples: discrete
outputs wider than 64 bits, and streams with more distinct outputs than a
device table holds (2^16 with a declared range, 4096 without).

Statistical protocol, unchanged by the engine: the evaluation half's counts
are computed for every candidate event, but only the event chosen from the
selection half's counts is ever read, so the choice cannot depend on them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gpuprivacy._checks import (check_chunk_size, check_int, check_key, check_nonnegative, check_probability,
                                data_checked_by_caller)
from gpuprivacy._config import require_x64
from gpuprivacy._lru import LRUCache
from gpuprivacy._memory import work_budgets
from gpuprivacy._progress import Progress
from gpuprivacy.accounting import ApproxDP, PureDP, ZCDP, check_guarantee
from gpuprivacy.audit._confidence import clopper_pearson

OUTPUT_KINDS = ("discrete", "real")
_MAX_SPLIT_CANDIDATES = 16
# Largest number of samples drawn per call to ``mechanism.sample``.
SAMPLES_PER_CALL = 1 << 16
SAMPLES_AXIS = "samples"
_WORKING_SET_FACTOR = 4
_MAX_MICRO_BATCH = 1 << 10
# Distinct outputs a device table holds: with a declared range (up to it, +1 to see a broken declaration),
# and for the selection of candidates without one. Beyond that the stream is counted on the host.
_TABLE_CAPACITY = 1 << 16
_SELECTION_CAPACITY = 1 << 12
_INSERT_ONE_BY_ONE = 64  # new outputs of one batch inserted one at a time before sorting the rest in
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
    # Samples per sampler call: a power of two, at most SAMPLES_PER_CALL, so that
    # each mechanism compiles for one shape per audit.
    return min(SAMPLES_PER_CALL, max(1024, 1 << (int(num_samples) - 1).bit_length()))


# --------------------------------------------------------------------------- streams, plans and meshes
#
# A stream is ``num_samples`` outputs of ``mechanism.sample`` on one dataset: block ``b`` is
# ``sample(fold_in(key, b), dataset, block)`` and the stream is their concatenation, cut at
# ``num_samples``. Its samples depend only on ``(key, num_samples)``; chunks, micro-batches and devices only
# decide who draws which block, so every count below is the same however the work is split.


class _StreamPlan(NamedTuple):
    """How the blocks of one stream are split (static ints: one compiled step per plan)."""

    block: int  # samples per sampler call
    micro_batch: int  # blocks per (vmapped) sampler call inside the step
    per_device: int  # blocks per device per step (a multiple of micro_batch)
    num_devices: int


def default_mesh() -> Mesh:
    """A one-axis mesh named ``"samples"`` over every local device: :func:`audit` splits its blocks over it."""
    return Mesh(np.asarray(jax.local_devices()), (SAMPLES_AXIS,))


def _plan_stream(block: int, bytes_per_sample: int, mesh: Mesh, chunk_size: int | None) -> _StreamPlan:
    """Micro-batches from the backend's working-set budget (never from chunk size or device count, so the
    compiled body, and every output, is the same however the work is split); steps from ``chunk_size``
    (samples per device per step) or the backend's budget."""
    micro_budget, step_budget = work_budgets("audit", mesh.devices.flat[0].platform)
    block_bytes = block * max(1, bytes_per_sample)
    micro = 1
    while 2 * micro * block_bytes <= micro_budget and 2 * micro <= _MAX_MICRO_BATCH:
        micro *= 2
    per_device = max(1, step_budget // block_bytes) if chunk_size is None else -(-chunk_size // block)
    per_device = -(-per_device // micro) * micro
    return _StreamPlan(block, micro, per_device, int(mesh.shape[SAMPLES_AXIS]))


class _OutputSpec(NamedTuple):
    shape: tuple  # one output's shape
    dtype: np.dtype
    traceable: bool  # sample(key, x, n) traces with x abstract: it can run inside the compiled step


def _output_spec(mechanism, key, x, block) -> _OutputSpec:
    """The shape of one block's outputs, found by tracing (no sampling); checks the leading axis.

    Cached per (sampler, dataset shape and dtype, block): repeated audits trace their sampler once.
    """
    x = np.asarray(x)
    cache_key = (mechanism.sample, x.shape, x.dtype.str, block, key.shape, str(key.dtype))
    try:
        hash(cache_key)
    except TypeError:  # an unhashable sampler: trace it every time
        return _traced_output_spec(mechanism, key, x, block)
    return _OUTPUT_SPECS.get_or_build(cache_key, lambda: _traced_output_spec(mechanism, key, x, block))


_OUTPUT_SPECS = LRUCache(256)


def _traced_output_spec(mechanism, key, x, block):
    try:
        out = jax.eval_shape(lambda k, data: mechanism.sample(k, data, block), key, x)
        traceable = True
    except jax.errors.JAXTypeError:  # the sampler needs x on the host (np.asarray(x)): drive it from Python
        traceable = False
        try:
            out = jax.eval_shape(lambda k: mechanism.sample(k, np.asarray(x), block), key)
        except jax.errors.JAXTypeError:
            out = np.asarray(mechanism.sample(key, np.asarray(x), block))
    if not hasattr(out, "shape") or not out.shape or out.shape[0] != block:
        got = out.shape[0] if getattr(out, "shape", ()) else "no"
        raise ValueError(f"{mechanism.name}.sample returned {got} outputs for num_samples={block}; it must return a "
                         "leading axis of length num_samples.")
    return _OutputSpec(tuple(out.shape[1:]), np.dtype(out.dtype), traceable)


# --------------------------------------------------------------------------- counters (run on the device)


@dataclasses.dataclass(frozen=True)
class _RowCodec:
    """Packs one output row into unsigned 64-bit words (exactly: bools as bits, other scalars by their bits,
    -0.0 as 0.0 and every NaN as one NaN), so that rows are compared and sorted as integer keys."""

    dtype: str
    width: int  # scalars per output

    @property
    def bits(self) -> int:
        return 1 if self.dtype == "bool" else 8 * np.dtype(self.dtype).itemsize

    @property
    def words(self) -> int:
        return -(-self.width * self.bits // 64)

    def encode(self, out):
        rows = out.reshape(out.shape[0], self.width)
        if self.dtype == "bool":
            parts = rows.astype(jnp.uint64)
        else:
            if jnp.issubdtype(rows.dtype, jnp.floating):
                zero = jnp.zeros((), rows.dtype)
                rows = jnp.where(jnp.isnan(rows), jnp.full((), jnp.nan, rows.dtype), jnp.where(rows == 0, zero, rows))
            parts = jax.lax.bitcast_convert_type(rows, jnp.dtype(f"uint{self.bits}")).astype(jnp.uint64)
        per = 64 // self.bits
        parts = jnp.pad(parts, ((0, 0), (0, self.words * per - self.width)))
        shifts = jnp.arange(per, dtype=jnp.uint64) * jnp.uint64(self.bits)
        return jnp.sum(parts.reshape(rows.shape[0], self.words, per) << shifts[None, None, :], axis=-1,
                       dtype=jnp.uint64)

    def decode(self, words) -> list[tuple]:
        words = np.asarray(words, np.uint64).reshape(-1, self.words)
        per = 64 // self.bits
        shifts = np.arange(per, dtype=np.uint64) * np.uint64(self.bits)
        mask = np.uint64((1 << self.bits) - 1) if self.bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        parts = ((words[:, :, None] >> shifts) & mask).reshape(len(words), -1)[:, :self.width]
        if self.dtype == "bool":
            rows = parts.astype(bool)
        else:
            rows = parts.astype(np.dtype(f"uint{self.bits}")).view(np.dtype(self.dtype))
        return [_output_key(row) for row in rows]


_NAN = float("nan")  # the one NaN object of output keys: equal to itself as a tuple item, one hash


def _output_key(row) -> tuple:
    """A row of outputs as a dict key: Python scalars, every NaN the same object (so all NaNs are one output)."""
    values = row.tolist()
    if row.dtype.kind == "f":
        values = [_NAN if v != v else v for v in values]
    return tuple(values)


_NO_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)  # fills unused table slots (a real row may equal it: ``used`` decides)


@dataclasses.dataclass(frozen=True)
class _OutputCounter:
    """Counts of every distinct output, in a sorted table of ``capacity`` rows per device.

    For outputs that pack into one 64-bit word (:class:`_RowCodec`; wider ones are counted on the host).
    State (per device): ``keys[capacity]`` sorted, ``counts[capacity]``, ``used``, ``distinct`` (the most
    distinct outputs seen, beyond ``capacity`` when it overflowed) and ``overflow``. A batch costs a
    search of the table and a scatter-add; a batch with outputs not yet in the table first inserts them
    (one by one while they are few, else by two sorts, which compile fast, unlike cumulative sums). An
    overflowing table has lost counts: :func:`audit` then counts that stream on the host instead.
    """

    codec: _RowCodec
    capacity: int

    def init(self):
        c = self.capacity
        return (jnp.full((c,), _NO_KEY, jnp.uint64), jnp.zeros((c,), jnp.int64), jnp.zeros((), jnp.int32),
                jnp.zeros((), jnp.int32), jnp.zeros((), bool))

    def _lookup(self, keys, used, words):
        index = jnp.minimum(jnp.searchsorted(keys, words, method=_search_method(self.capacity)), self.capacity - 1)
        return index, (keys[index] == words) & (index < used)

    def update(self, state, out, valid, aux):
        del aux
        words = self.codec.encode(out)[:, 0]
        _, found = self._lookup(state[0], state[2], words)
        missing = valid & ~found
        state = jax.lax.cond(jnp.any(missing), lambda s: self._insert(s, words, missing), lambda s: s, state)
        index, found = self._lookup(state[0], state[2], words)
        return (state[0], state[1].at[index].add((valid & found).astype(jnp.int64))) + tuple(state[2:])

    def _insert(self, state, words, missing):
        """Adds the batch's new outputs to the table, one at a time while they are few (each costs a pass over
        the batch); past ``_INSERT_ONE_BY_ONE`` of them, all the rest at once by sorting (see :meth:`_insert_all`)."""
        c = self.capacity

        def one(carry):
            (keys, counts, used, distinct, overflow), missing, step = carry
            new = words[jnp.argmax(missing)]
            position = jnp.searchsorted(keys, new, method=_search_method(c)).astype(jnp.int32)  # <= used
            slots = jnp.arange(c, dtype=jnp.int32)
            shifted = jnp.maximum(slots - 1, 0)
            keys = jnp.where(slots < position, keys, jnp.where(slots == position, new, keys[shifted]))
            counts = jnp.where(slots < position, counts, jnp.where(slots == position, 0, counts[shifted]))
            full = used >= c  # nothing can be inserted: the table has overflowed (its keys are kept as they were)
            state = (jnp.where(full, carry[0][0], keys), jnp.where(full, carry[0][1], counts),
                     jnp.minimum(used + 1, c), jnp.maximum(distinct, used + 1), overflow | full)
            return state, missing & (words != new), step + 1

        def more(carry):
            state, missing, step = carry
            return jnp.any(missing) & (step < _INSERT_ONE_BY_ONE) & ~state[4]

        state, missing, _ = jax.lax.while_loop(more, one, (state, missing, jnp.zeros((), jnp.int32)))
        return jax.lax.cond(jnp.any(missing) & ~state[4], lambda s: self._insert_all(s, words, missing), lambda s: s,
                            state)

    def _insert_all(self, state, words, valid):
        """Adds the batch's new outputs to the table (sorted, distinct), keeping the counts of the old ones."""
        keys, counts, used, distinct, overflow = state
        c = self.capacity
        # rank 0: a table entry, 1: a valid output of the batch, 2: nothing (padding or an invalid sample).
        rank = jnp.concatenate([jnp.where(jnp.arange(c, dtype=jnp.int32) < used, 0, 2),
                                jnp.where(valid, 1, 2)]).astype(jnp.int32)
        merged = jnp.where(rank < 2, jnp.concatenate([keys, words]), _NO_KEY)
        weight = jnp.concatenate([counts, jnp.zeros(words.shape, jnp.int64)])
        merged, rank, weight = jax.lax.sort([merged, rank, weight], num_keys=2)
        # Each run of equal keys starts with its most real element: the table's entry (with its count) if any.
        keep = jnp.concatenate([jnp.ones((1,), bool), merged[1:] != merged[:-1]]) & (rank < 2)
        new_used = jnp.sum(keep, dtype=jnp.int32)
        _, merged, weight = jax.lax.sort([(~keep).astype(jnp.int32), merged, weight], num_keys=1, is_stable=True)
        live = jnp.arange(c, dtype=jnp.int32) < new_used
        return (jnp.where(live, merged[:c], _NO_KEY), jnp.where(live, weight[:c], 0), jnp.minimum(new_used, c),
                jnp.maximum(distinct, new_used), overflow | (new_used > c))

    def finish(self, state) -> tuple[dict, int, bool]:
        """Host side: ``({output: count}, distinct outputs seen, overflowed)`` over every device's table."""
        keys, counts, used, distinct, overflow = (np.asarray(s) for s in state)
        merged: dict = {}
        for device in range(keys.shape[0]):
            size = int(used[device])
            for row, count in zip(self.codec.decode(keys[device, :size]), counts[device, :size].tolist()):
                merged[row] = merged.get(row, 0) + count
        return merged, max(len(merged), int(distinct.max())), bool(overflow.any())


@dataclasses.dataclass(frozen=True)
class _ThresholdCounter:
    """A histogram of real outputs over sorted thresholds ``t[0..T-1]`` (``aux``).

    Bin ``i <= T`` holds the outputs with exactly ``i`` thresholds below them (so ``#{y <= t_j}`` is the
    histogram's cumulative sum at ``j``), bin ``T + 1`` the NaNs.
    """

    num_thresholds: int

    def init(self):
        return (jnp.zeros((self.num_thresholds + 2,), jnp.int64),)

    def update(self, state, out, valid, thresholds):
        values = out.reshape(-1).astype(thresholds.dtype)
        index = jnp.searchsorted(thresholds, values, side="left", method=_search_method(self.num_thresholds))
        index = jnp.where(jnp.isnan(values), self.num_thresholds + 1, index)
        index = jnp.where(valid, index, self.num_thresholds + 2)  # dropped
        return (state[0].at[index].add(1, mode="drop"),)

    def finish(self, state) -> np.ndarray:
        return np.asarray(state[0]).reshape(-1, self.num_thresholds + 2).sum(axis=0)


def _search_method(size: int) -> str:
    # For a handful of keys, comparing against all of them beats a binary search on every backend; beyond, an
    # unrolled binary search (~1.4x faster than a rolled one on a CPU at 512 thresholds).
    return "compare_all" if size <= 32 else "scan_unrolled"


# --------------------------------------------------------------------------- drawing and counting a stream


@functools.lru_cache(maxsize=64)
def _stream_step(sample, counter, plan: _StreamPlan, mesh: Mesh, x_spec, key_spec, aux_spec):
    """The jitted step ``(state, chunk, first, limit, num_samples, run, key, x, aux) -> state``, one shard per
    device.

    ``shard_map`` gives each device its own program: device ``d`` draws blocks
    ``first + d * run + chunk * per_device + [0, per_device)`` (keys ``fold_in(key, block)``) that are below
    ``limit`` and inside its run, ``micro_batch`` blocks per sampler call, and adds their outputs to its
    own counts, which stay on it (donated, so updated in place). Blocks past the end are skipped, not drawn.
    """
    block, micro, per_device = plan.block, plan.micro_batch, plan.per_device
    del x_spec, key_spec, aux_spec  # part of the cache key only

    def per_device_step(state, chunk, first, limit, num_samples, run, key, x, aux):
        device = jax.lax.axis_index(SAMPLES_AXIS).astype(jnp.int64)
        start = first + device * run + chunk * per_device
        end = jnp.minimum(limit, first + (device + 1) * run)
        state = tuple(s[0] for s in state)

        def body(state, i):
            blocks = start + i * micro + jnp.arange(micro, dtype=jnp.int64)

            def draw_and_count(state):
                keys = jax.vmap(lambda b: jax.random.fold_in(key, b))(blocks.astype(jnp.uint32))
                if micro == 1:
                    out = sample(keys[0], x, block)[None]
                else:
                    out = jax.vmap(lambda k: sample(k, x, block))(keys)
                position = blocks[:, None] * block + jnp.arange(block, dtype=jnp.int64)[None, :]
                valid = (position < num_samples) & (blocks < end)[:, None]
                return counter.update(state, out.reshape((micro * block,) + out.shape[2:]), valid.reshape(-1), aux)

            return jax.lax.cond(blocks[0] < end, draw_and_count, lambda s: s, state), None

        state, _ = jax.lax.scan(body, state, jnp.arange(per_device // micro, dtype=jnp.int64))
        return tuple(s[None] for s in state)

    sharded, replicated = PartitionSpec(SAMPLES_AXIS), PartitionSpec()
    num_leaves = len(counter.init())
    step = jax.shard_map(per_device_step, mesh=mesh, in_specs=((sharded,) * num_leaves,) + (replicated,) * 8,
                         out_specs=(sharded,) * num_leaves, check_vma=False)
    return jax.jit(step, donate_argnums=(0,))


def _cached(function, *args):
    """``function(*args)`` through its ``lru_cache``, or uncached when an argument (a sampler) is unhashable."""
    try:
        hash(args)
    except TypeError:
        return function.__wrapped__(*args)
    return function(*args)


@functools.lru_cache(maxsize=64)
def _initial_state(counter, mesh: Mesh):
    sharding = NamedSharding(mesh, PartitionSpec(SAMPLES_AXIS))
    devices = int(mesh.shape[SAMPLES_AXIS])
    return jax.jit(lambda: tuple(jnp.broadcast_to(s, (devices,) + s.shape) for s in counter.init()),
                   out_shardings=(sharding,) * len(counter.init()))


@functools.lru_cache(maxsize=64)
def _block_counter(counter, block):
    """One block's update for samplers driven from Python (``index`` is the block's number in the stream)."""
    def update(state, out, index, num_samples, aux):
        valid = index * block + jnp.arange(block, dtype=jnp.int64) < num_samples
        return counter.update(state, out, valid, aux)

    return jax.jit(update, donate_argnums=(0,))


class _Streams:
    """Draws and counts the auditor's streams for one mechanism and one pair of datasets.

    A traceable sampler runs inside :func:`_stream_step` over the mesh; one that needs its dataset on the
    host (``np.asarray(x)``) is called block by block from Python, its blocks counted by the same device
    counters (a one-device path). Either way :meth:`count` returns the counter state on the device(s), for
    the caller to fetch with every other stream's in one transfer.
    """

    def __init__(self, mechanism, spec: _OutputSpec, x, mesh: Mesh, chunk_size, bar):
        self.mechanism, self.spec, self.mesh, self.chunk_size, self.bar = mechanism, spec, mesh, chunk_size, bar
        self.x_host = x
        if spec.traceable:
            self.x = jax.device_put(jnp.asarray(x), NamedSharding(mesh, PartitionSpec()))
        out_bytes = max(1, int(np.prod(spec.shape, dtype=np.int64))) * spec.dtype.itemsize
        self.bytes_per_sample = _WORKING_SET_FACTOR * (int(np.asarray(x).nbytes) + out_bytes)

    def count(self, counter, key, num_samples: int, block: int, aux=None, first: int = 0):
        """Counts blocks ``first ..`` of the stream ``(key, num_samples)``; the state stays on the device(s)."""
        limit = -(-num_samples // block)
        if first >= limit:
            return None
        aux = np.zeros((), np.int32) if aux is None else aux
        if not self.spec.traceable:
            return self._count_from_python(counter, key, num_samples, block, aux, first, limit)
        plan = _plan_stream(block, self.bytes_per_sample, self.mesh, self.chunk_size)
        replicated = NamedSharding(self.mesh, PartitionSpec())
        aux = jax.device_put(aux, replicated)
        step = _cached(_stream_step, self.mechanism.sample, counter, plan, self.mesh,
                       (self.x.shape, str(self.x.dtype)), (key.shape, str(key.dtype)), (aux.shape, str(aux.dtype)))
        run = -(-(limit - first) // plan.num_devices)  # blocks per device
        scalars = [np.int64(v) for v in (first, limit, num_samples, run)]  # numpy: no eager device op
        state = _initial_state(counter, self.mesh)()
        key = jax.device_put(key, replicated)
        total, reported = num_samples - first * block, 0
        for chunk in range(-(-run // plan.per_device)):
            state = step(state, np.int64(chunk), *scalars, key, self.x, aux)
            if self.bar is not None:  # dispatched, not finished: the bar runs ahead of the device
                done = total * min(run, (chunk + 1) * plan.per_device) // run
                self.bar.update(done - reported)
                reported = done
        return state

    def _count_from_python(self, counter, key, num_samples, block, aux, first, limit):
        update = _block_counter(counter, block)
        state = counter.init()
        for index in range(first, limit):
            out = jnp.asarray(self.mechanism.sample(jax.random.fold_in(key, index), self.x_host, block))
            if out.shape != (block,) + self.spec.shape:
                raise ValueError(f"{self.mechanism.name}.sample returned outputs of shape {out.shape} for "
                                 f"num_samples={block}; expected {(block,) + self.spec.shape}.")
            state = update(state, out, np.int64(index), np.int64(num_samples), aux)
            if self.bar is not None:
                self.bar.update(min(block, num_samples - index * block))
        return tuple(s[None] for s in state)

    def first_block(self, key, block):
        """Block 0 of a stream, on the default device (the pilot of a real-valued audit)."""
        return jnp.asarray(self.mechanism.sample(jax.random.fold_in(key, 0), self.x_host, block))


# --------------------------------------------------------------------------- host fallback (overflowing tables)


def _draw(mechanism, key, dataset, num_samples, bar):
    """Yields the stream's blocks on the host (when a device table overflows, or rows are wider than a word)."""
    block = _block_size(num_samples)
    done, index = 0, 0
    while done < num_samples:
        out = np.asarray(mechanism.sample(jax.random.fold_in(key, index), dataset, block))
        size = min(block, num_samples - done)
        yield out[:size]
        done += size
        index += 1
        if bar is not None:
            bar.update(size)


def _count_outputs(chunks) -> dict:
    counts: dict = {}
    for out in chunks:
        rows = out.reshape(out.shape[0], -1)
        if rows.dtype.kind == "f":  # as the device codec: -0.0 is 0.0, every NaN one NaN
            rows = np.where(np.isnan(rows), np.nan, np.where(rows == 0, rows.dtype.type(0), rows))
        packed = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))
        values, index, freq = np.unique(packed[:, 0], return_index=True, return_counts=True)
        for i, f in zip(index.tolist(), freq.tolist()):
            value = _output_key(rows[i])
            counts[value] = counts.get(value, 0) + f
    return counts


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


def _output_counter(spec: _OutputSpec, capacity: int) -> _OutputCounter | None:
    """The device counter for these outputs, or None for outputs wider than 64 bits (counted on the host)."""
    if spec.dtype.kind not in "biuf":
        raise ValueError(f"discrete outputs must be booleans, integers or floats, got dtype {spec.dtype}.")
    codec = _RowCodec(spec.dtype.name, max(1, int(np.prod(spec.shape, dtype=np.int64))))
    return _OutputCounter(codec, capacity) if codec.words == 1 else None


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
    pilot_p, pilot_q = stream_p.first_block(key_p, block), stream_q.first_block(key_q, block)
    thresholds = _pilot_thresholds(pilot_p, pilot_q, min(block, half))
    counter = _ThresholdCounter(_THRESHOLD_QUANTILES)
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
