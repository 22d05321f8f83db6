"""The study engine's compiled programs: one cache, bounded, and counts of what was compiled or loaded.

Every program the engine runs (a draw, a mechanism batched over trials and cells, a target statistic) is
compiled ahead of time once per key (what the program depends on: mechanism, static parameters, data shape,
chunk, devices) and kept here. Bounded (least recently used first): every compiled program holds executable
memory (XLA:CPU maps some per program), and a long session sweeping many shapes would otherwise keep them all.

``COMPILE_COUNT`` counts the programs XLA compiled in this process; ``LOAD_COUNT`` those JAX read back from
its persistent compilation cache instead (a rerun or a resumed sweep with the cache on, as the command line
has it by default), told apart by JAX's own cache-hit event.
"""

from __future__ import annotations

import time

import jax

from gpuprivacy._checks import data_checked_by_caller
from gpuprivacy._lru import LRUCache

MAX_PROGRAMS = 128
# ("draw" | "mechanism" | "target", what the program depends on...) -> compiled program, least recently used first.
_PROGRAMS = LRUCache(MAX_PROGRAMS)
COMPILE_COUNT = [0]  # programs compiled by this process (for tests, the benchmarks and the sweep summary)
COMPILE_SECONDS = [0.0]  # and the seconds spent compiling (or loading) them
LOAD_COUNT = [0]  # programs read back from JAX's persistent compilation cache instead of compiled
_CACHE_HITS = [0]  # persistent-cache hits of this process (a jax.monitoring listener counts them)


def _on_cache_event(event: str, **kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _CACHE_HITS[0] += 1


jax.monitoring.register_event_listener(_on_cache_event)


def _compiled(cache_key, build, example_args):
    """The compiled program for ``cache_key`` (built and compiled once), and the seconds compiling it now."""
    if cache_key in _PROGRAMS:
        return _PROGRAMS[cache_key], 0.0
    start, hits = time.perf_counter(), _CACHE_HITS[0]
    with data_checked_by_caller():  # the engine counts rows outside the domain itself (_rows_outside_domain)
        program = jax.jit(build()).lower(*example_args).compile()  # compiled ahead, so its time is told apart
    _PROGRAMS[cache_key] = program  # drops the least recently used past MAX_PROGRAMS
    seconds = time.perf_counter() - start
    # Read back from the persistent compilation cache (a rerun, a resumed sweep) rather than compiled by XLA.
    (LOAD_COUNT if _CACHE_HITS[0] > hits else COMPILE_COUNT)[0] += 1
    COMPILE_SECONDS[0] += seconds
    return program, seconds
