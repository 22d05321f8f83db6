"""How :func:`gpuprivacy.oracle.evaluate` splits a family: micro-batches and chunks sized from byte budgets.

The plan (:class:`EvaluationPlan`) is made of public quantities only: the family's size, the block's
capacity, the backend's byte budgets and the device count. The micro-batch depends only on the backend and
the block's bytes, so the compiled per-device body is the same however the work is split. What cannot fit
one device's memory is refused here, before any work (docs/engine.md).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from gpuprivacy._memory import gib, usable_bytes, work_budgets
from gpuprivacy.oracle._isolation import order_statistic_form
from gpuprivacy.oracle._mesh import SUBSETS_AXIS
from gpuprivacy.subsets import SubsetFamily

_MIN_MICRO_BATCH = 128
_ORDER_STATISTIC_READ_BYTES = 256  # four slots, their positions and the removed set of one subset


def _family_resident(platform: str) -> bool:
    """Whether explicit families are uploaded once and prepared on the devices (accelerators), or prepared
    chunk by chunk on the host, where NumPy's sorts and compactions beat XLA's (a CPU backend)."""
    return platform != "cpu" if _RESIDENT_FAMILIES is None else _RESIDENT_FAMILIES


_RESIDENT_FAMILIES: bool | None = None  # tests set it to run the accelerator path on a CPU
_MAX_MICRO_BATCH = 1 << 16
MICRO_BATCH = _MIN_MICRO_BATCH
"""The smallest micro-batch (subsets per vmapped oracle call); the engine's is sized per backend."""


class EvaluationPlan(NamedTuple):
    """How :func:`~gpuprivacy.oracle.evaluate` splits a family over devices, chunks and micro-batches (all
    public quantities).

    Device ``d`` owns the contiguous run of subsets ``[d * per_device_total, (d + 1) * per_device_total)``
    and evaluates it in ``num_chunks`` steps of ``per_device`` subsets, as ``per_device // micro_batch``
    vmapped oracle calls; its outputs stay on it. The tail past the family repeats its last subset
    and is cut off.
    """

    num_subsets: int
    num_devices: int
    micro_batch: int
    per_device: int
    num_chunks: int
    per_device_total: int
    output_bytes: int
    block_bytes: int
    capacity: int
    family_resident: bool


def plan_evaluation(oracle_fn, data, family: SubsetFamily, *, capacity: int, chunk_size: int | None,
                    mesh: Mesh) -> EvaluationPlan:
    """Sizes an evaluation from byte budgets of the backend, and refuses what cannot fit before any work.

    The micro-batch (subsets per vmapped oracle call) depends only on the
    backend and the block's bytes, never on the chunk size or device count,
    so the compiled per-device body, and with it every floating-point
    reduction, is the same however the work is split: results agree bit for
    bit. The chunk (subsets per device per step) comes from ``chunk_size`` or
    from the backend's budget.
    """
    platform = mesh.devices.flat[0].platform
    row_bytes = max(1, int(np.prod(data.shape[1:], dtype=np.int64))) * data.dtype.itemsize
    block_bytes = capacity * row_bytes
    # The package's order statistics read a few slots per subset, not the block: size their calls by that.
    read_bytes = _ORDER_STATISTIC_READ_BYTES if (data.ndim == 1 and order_statistic_form(oracle_fn)) else block_bytes
    micro_budget, chunk_budget = work_budgets("oracle", platform)
    micro = _MIN_MICRO_BATCH
    while micro * 2 * read_bytes <= micro_budget and micro * 2 <= _MAX_MICRO_BATCH:
        micro *= 2
    num_devices = mesh.shape[SUBSETS_AXIS]
    k = family.num_subsets
    if chunk_size is None:
        chunk_size = max(1, chunk_budget // block_bytes)
    per_device_needed = math.ceil(k / num_devices)
    per_device = min(chunk_size, per_device_needed)
    per_device = max(2, math.ceil(per_device / micro)) * micro  # whole micro-batches, at least two (see apply_oracle)
    num_chunks = math.ceil(per_device_needed / per_device)
    out = _check_traces(oracle_fn, (capacity,) + data.shape[1:], data.dtype.name)  # traced once, cached
    per_subset_out = sum(int(np.prod(x.shape, dtype=np.int64)) * x.dtype.itemsize for x in jax.tree.leaves(out))
    resident = family.kind in ("kept", "removed") and _family_resident(platform)
    family_bytes = 0
    if resident:  # the family's canonical positions live on the devices, each device holding its run
        width = family.removed_width if family.kind == "removed" else max(capacity, family.kept.shape[1])
        family_bytes = 4 * width * num_chunks * per_device
    plan = EvaluationPlan(k, num_devices, micro, per_device, num_chunks, num_chunks * per_device,
                          per_subset_out * num_chunks * per_device + family_bytes, block_bytes, capacity, resident)
    _check_fits(plan, family, mesh)
    return plan


def _check_fits(plan: EvaluationPlan, family: SubsetFamily, mesh: Mesh) -> None:
    """Refuses, before any work, outputs or blocks that cannot fit one device's memory."""
    available, where = usable_bytes(mesh.devices.flat[0])
    working = 4 * plan.micro_batch * plan.block_bytes  # gathered block, positions, mask, oracle temporaries
    if plan.output_bytes + working <= available:
        return
    fits = max(0, (available - working)) // max(1, plan.output_bytes // max(1, plan.per_device_total))
    raise ValueError(
        f"{family.name or 'the family'} has {plan.num_subsets:,} subsets; their outputs need "
        f"{gib(plan.output_bytes)} on each of {plan.num_devices} device(s) plus {gib(working)} of working blocks, "
        f"more than the {gib(available)} planned for {where}. About {fits * plan.num_devices:,} subsets would fit "
        f"here: split the family (evaluate parts of it), use more devices (a mesh over several), or a smaller "
        f"capacity (now {plan.block_bytes:,} bytes per block).")


@functools.lru_cache(maxsize=256)
def _check_traces(oracle_fn, rows_shape, dtype_name):
    """Traces the oracle once on an abstract block, so a broken one fails here with its name, not deep in XLA.

    Returns the output's shape structure (cached: the plan reads it without tracing again).
    """
    rows = jax.ShapeDtypeStruct(rows_shape, np.dtype(dtype_name))
    valid = jax.ShapeDtypeStruct(rows_shape[:1], np.dtype(bool))
    try:
        return jax.eval_shape(oracle_fn, rows, valid)
    except Exception as error:  # noqa: BLE001  (any failure to trace is the oracle's, reported with its name)
        name = getattr(oracle_fn, "__qualname__", None) or repr(oracle_fn)
        raise TypeError(f"the oracle {name} cannot be evaluated on a block rows[{', '.join(map(str, rows_shape))}] "
                        f"{dtype_name}, valid[{rows_shape[0]}] bool: {type(error).__name__}: {error}. An oracle "
                        "f(rows, valid) returns a number (or an array of numbers) computed with jax.numpy.") from None
