"""The auditor's engine: drawing a mechanism's samples as streams of blocks and counting them on the devices.

How the samples are drawn and counted (the auditor's engine). Each dataset's
samples form a stream: block ``b`` is ``sample(fold_in(key, b), x, block)``
(``block`` up to 2^16 samples), cut at ``num_samples``, so the samples depend
only on ``(key, num_samples)``. A jitted step draws many blocks per call
(``chunk_size`` samples per device, from a byte budget of the backend), and
counts them on the device as it goes: a table of distinct outputs for
discrete outputs, a histogram over the thresholds for real ones (the counters,
:mod:`._counters`). The blocks
are split over a mesh of devices (``shard_map`` over a ``"samples"`` axis:
each device draws only its own blocks' keys and keeps its own counts). No
count returns to the host until every stream of the audit is counted: then
one transfer brings the counts back, and Clopper-Pearson bounds
(:mod:`._confidence`, NumPy float64) are computed there. The only samples
that ever reach the host are a real-valued audit's pilot (two blocks, before
any counting, drawn by the step that then counts the streams, so that the
sampler is compiled once), whose quantiles place the thresholds. Counts are integers,
so they agree exactly for every chunk size and device count. Samplers that
need their dataset on the host (``np.asarray(x)``) are called block by block
from Python, their blocks counted by the same device code. Two cases are
counted on the host instead, block by block, on the same samples: discrete
outputs wider than 64 bits, and streams with more distinct outputs than a
device table holds (2^16 with a declared range, 4096 without).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gpuprivacy._lru import LRUCache
from gpuprivacy._memory import work_budgets
from gpuprivacy.audit._counters import _OutputCounter, _RowCodec, _ThresholdCounter, _output_key

# Largest number of samples drawn per call to ``mechanism.sample``.
SAMPLES_PER_CALL = 1 << 16
SAMPLES_AXIS = "samples"
_WORKING_SET_FACTOR = 4
_MAX_MICRO_BATCH = 1 << 10
# Distinct outputs a device table holds: with a declared range (up to it, +1 to see a broken declaration),
# and for the selection of candidates without one. Beyond that the stream is counted on the host.
_TABLE_CAPACITY = 1 << 16
_SELECTION_CAPACITY = 1 << 12


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
                state = counter.keep(state, out, blocks)
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

    def count(self, counter, key, num_samples: int, block: int, aux=None, first: int = 0, progress: bool = True):
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
            if self.bar is not None and progress:  # dispatched, not finished: the bar runs ahead of the device
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

    def pilot(self, counter, key, block, aux):
        """Block 0 of a stream (the pilot of a real-valued audit), as float64 on the host.

        A traceable sampler draws it with the step that counts the stream (``counter`` keeps block 0,
        :class:`_ThresholdCounter`; ``aux``: thresholds of the right shape, their counts unused): the same
        compiled program, so the sampler is not compiled a second time for the pilot. Otherwise it is
        called once from Python, as every block of such a sampler is.
        """
        if not self.spec.traceable:
            out = np.asarray(self.mechanism.sample(jax.random.fold_in(key, 0), self.x_host, block))
            return out.reshape(-1).astype(np.float64)
        state = self.count(counter, key, block, block, aux, progress=False)  # block 0 alone
        return np.asarray(jax.device_get(state[-1]))[0]  # device 0 drew block 0


def _output_counter(spec: _OutputSpec, capacity: int) -> _OutputCounter | None:
    """The device counter for these outputs, or None for outputs wider than 64 bits (counted on the host)."""
    if spec.dtype.kind not in "biuf":
        raise ValueError(f"discrete outputs must be booleans, integers or floats, got dtype {spec.dtype}.")
    codec = _RowCodec(spec.dtype.name, max(1, int(np.prod(spec.shape, dtype=np.int64))))
    return _OutputCounter(codec, capacity) if codec.words == 1 else None


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
