"""How much memory a device offers, for refusing work that cannot fit before any of it runs.

One probe serves every engine (subset evaluation, power sets, sweeps): an
accelerator reports its allocator limit (``memory_stats()["bytes_limit"]``,
which JAX already sets to about 75% of the card), a CPU device shares the
host's physical memory.
"""

from __future__ import annotations

import os

import jax

DEVICE_MEMORY_FRACTION = 0.9
"""Share of an accelerator's allocator limit the engines plan with (the limit already leaves XLA headroom)."""
HOST_MEMORY_FRACTION = 0.5
"""Share of the host's physical memory the engines plan with on a CPU device (the host runs everything else)."""


def device_memory_bytes(device=None) -> tuple[int, str, bool]:
    """``(bytes, description, is_host)``: the memory of ``device`` (default: the first device)."""
    device = jax.devices()[0] if device is None else device
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001  (some backends do not implement memory statistics)
        stats = None
    name = f"{device.platform}:{device.id} ({device.device_kind})"
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{name}, allocator bytes_limit", False
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover  (no sysconf: assume a small machine)
        total = 8 << 30
    return int(total), f"{name}, host physical memory", True


def usable_bytes(device=None) -> tuple[int, str]:
    """``(bytes, description)``: the share of :func:`device_memory_bytes` an engine may plan to use."""
    return planning_share(*device_memory_bytes(device))


def planning_share(total: int, where: str, is_host: bool) -> tuple[int, str]:
    """The share of a probed memory size an engine plans with, and a description that names it."""
    fraction = HOST_MEMORY_FRACTION if is_host else DEVICE_MEMORY_FRACTION
    return int(total * fraction), f"{where} {total} bytes ({gib(total)}) x {fraction:g}"


def gib(nbytes: float) -> str:
    """``nbytes`` as a short human string in GiB (or MiB below 1 GiB)."""
    return f"{nbytes / 2**30:.3g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.3g} MiB"


# Every engine's byte budgets, in one table: {engine: {platform: (per vmapped call, per device per chunk)}}.
# A CPU wants each call's working set in cache and chunks that leave memory to the host; an accelerator wants
# calls big enough to fill it and few, large launches to amortise dispatch.
#   "sweep": trials of a sweep cell (the per-call entry is unused: a chunk is one call);
#   "oracle": gathered subset blocks per vmapped oracle call, and subsets per device per chunk;
#   "audit": the auditor's estimated working set per vmapped sampler call, and per device per step.
_BUDGETS = {
    "sweep": {"cpu": (1 << 25, 1 << 25), "gpu": (1 << 31, 1 << 31), "tpu": (1 << 31, 1 << 31)},
    "oracle": {"cpu": (1 << 20, 1 << 25), "gpu": (1 << 26, 1 << 31), "tpu": (1 << 26, 1 << 31)},
    "audit": {"cpu": (1 << 22, 1 << 28), "gpu": (1 << 30, 1 << 34), "tpu": (1 << 30, 1 << 34)},
}


def work_budgets(engine: str, platform: str) -> tuple[int, int]:
    """``(bytes per vmapped call, bytes per device per chunk)`` for ``engine`` ("sweep", "oracle", "audit") on
    ``platform`` ("cpu", "gpu", "tpu"; another accelerator plans as a GPU)."""
    table = _BUDGETS[engine]
    return table.get(platform, table["gpu"])


def chunk_budget_bytes(platform: str) -> int:
    """Bytes of one chunk of batched work (a sweep cell's trials) per device on ``platform``."""
    return work_budgets("sweep", platform)[1]
