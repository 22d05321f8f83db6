"""Every module-level cache of compiled programs or traced shapes is bounded (least recently used dropped)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy._lru import LRUCache
from gpuprivacy.accounting import _gaussian_selection_quadrature as quadrature
from gpuprivacy.audit import _streams as audit_streams
from gpuprivacy.audit import _registry as audit_registry
from gpuprivacy.oracle import _sandbox
from gpuprivacy.sweeps import _trials

# Each library cache and the size it documents.
CACHES = {
    "sweeps._trials._PROGRAMS": (_trials._PROGRAMS, _trials.MAX_PROGRAMS),
    "sweeps._trials._TRACEABLE": (_trials._TRACEABLE, 1024),
    "sweeps._trials._GUARANTEES": (_trials._GUARANTEES, 4096),
    "audit._registry._BUILT": (audit_registry._BUILT, 64),
    "audit._streams._OUTPUT_SPECS": (audit_streams._OUTPUT_SPECS, 256),
    "oracle._sandbox._CACHE": (_sandbox._CACHE, 64),
    "accounting._gaussian_selection_quadrature._KERNELS": (quadrature._KERNELS, 16),
}


@pytest.mark.parametrize("name", sorted(CACHES))
def test_each_cache_is_an_lru_of_its_documented_size(name):
    cache, size = CACHES[name]
    assert isinstance(cache, LRUCache) and cache.maxsize == size


def test_a_cache_stays_bounded_after_1000_distinct_shapes():
    # 1000 shapes through a cache of 16 keep 16 programs, the most recent (their jitted functions are built
    # for each shape; the kept ones are compiled and run at the end, 1000 compilations would take minutes).
    cache = LRUCache(16)
    for n in range(1, 1001):
        cache.get_or_build(("sum", n), lambda: jax.jit(lambda x: jnp.sum(x * 2.0)))
        assert len(cache) <= 16
    assert list(cache) == [("sum", n) for n in range(985, 1001)]
    for (_, n), program in cache.items():
        assert float(program(jnp.ones(n))) == 2.0 * n


def test_the_sweep_engine_cache_stays_bounded(monkeypatch):
    # The engine's own cache, through its own entry point: past maxsize the oldest programs are dropped.
    monkeypatch.setattr(_trials._PROGRAMS, "maxsize", 4)
    _trials._PROGRAMS.clear()
    for n in range(1, 9):
        _trials._compiled(("test", n), lambda: (lambda x: x + 1.0), (jax.ShapeDtypeStruct((n,), np.float64),))
        assert len(_trials._PROGRAMS) <= 4
    assert list(_trials._PROGRAMS) == [("test", n) for n in range(5, 9)]
    _trials._PROGRAMS.clear()


def test_reading_an_entry_makes_it_recent_and_sizes_are_checked():
    cache = LRUCache(2)
    cache["a"], cache["b"] = 1, 2
    assert cache["a"] == 1
    cache["c"] = 3
    assert list(cache) == ["a", "c"]
    assert cache.get("b", "gone") == "gone"
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="maxsize must be a positive int"):
            LRUCache(bad)
