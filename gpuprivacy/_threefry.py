"""``jax.random``'s bits, splits, uniforms, normals, Laplaces and Gumbels, bit for bit, hashed as one vector under
``vmap``.

``jax.random`` hashes counters with Threefry-2x32 (Salmon, Moraes, Dror & Shaw, SC 2011), one hash per output
word, elementwise over the output's shape. Under ``vmap`` over keys that shape gains the batch axes, and XLA:CPU
compiles the hash (a loop of 20 rounds of adds, rotations and xors) over a rank-2 array in 2-3 times the time
of a rank-1 array of the same size, over a rank-3 array in 4-8 times (jax 0.10.2, 2026-12-01: 64 keys x 5 words
0.14 s against 0.06 s; 8 x 8 keys x 3 x 4 words 0.50 s against 0.06 s). Every batched mechanism program draws
its noise so. Here the hash runs on flattened operands: its batching rule broadcasts the batched keys and
counters to one vector and hashes that (however many ``vmap`` levels), then restores the shape.

Each function returns what its ``jax.random`` namesake returns for a Threefry key (JAX's default) under
``jax_threefry_partitionable`` (JAX's default since 0.5), where every word is the hash of its row-major index
under the key, and the floats are made from the words by the same operations (tests/test_threefry.py checks
them against ``jax.random``); any other key or setting goes to ``jax.random`` itself. :func:`draws` takes
several keys' draws from one hash.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p

from gpuprivacy._typing import Array, Key


@jax.custom_batching.custom_vmap
def _threefry(k1: Array, k2: Array, c1: Array, c2: Array) -> tuple[Array, Array]:
    """Threefry-2x32 of the counters ``(c1, c2)`` under the keys ``(k1, k2)``, elementwise over 1-D operands."""
    return tuple(threefry2x32_p.bind(k1, k2, c1, c2))


@_threefry.def_vmap
def _threefry_flat(axis_size, in_batched, *operands):
    # The batch axis is leading: broadcast every operand to [axis_size, size] and hash one vector of those.
    size = operands[0].shape[-1]
    flat = [(a if batched else jnp.broadcast_to(a, (axis_size, size))).reshape(-1)
            for a, batched in zip(operands, in_batched)]
    out = _threefry(*flat)
    return tuple(o.reshape(axis_size, size) for o in out), (True, True)


def _flat(key, size: int) -> bool:
    """Whether the flat hash gives ``jax.random``'s words for this key and ``size`` counters."""
    return (jnp.issubdtype(key.dtype, jax.dtypes.prng_key) and key.shape == () and size < 2**32
            and str(jax.random.key_impl(key)) == "threefry2x32" and bool(jax.config.jax_threefry_partitionable))


def _counters(key, size: int) -> tuple[Array, ...]:
    """The hash's operands for the words ``0 .. size - 1`` of ``key``: the key's two halves, and the counters, the
    row-major indices as 64-bit numbers in two halves (high: 0 here, low)."""
    data = jax.random.key_data(key)
    return (jnp.broadcast_to(data[0], (size,)), jnp.broadcast_to(data[1], (size,)), jnp.zeros((size,), jnp.uint32),
            jnp.arange(size, dtype=jnp.uint32))


def _words(high: Array, low: Array, dtype) -> Array:
    """``jax.random.bits``'s words from the hash's two halves: uint64 ``high << 32 | low``, uint32 ``high ^ low``."""
    if np.dtype(dtype) == np.dtype(np.uint64):
        return (high.astype(jnp.uint64) << jnp.uint64(32)) | low.astype(jnp.uint64)
    return high ^ low


def bits(key: Key, shape: tuple[int, ...] = (), dtype=jnp.uint32) -> Array:
    """``jax.random.bits(key, shape, dtype)`` for uint32 and uint64 words."""
    return _bits(key, tuple(shape), np.dtype(dtype))


# Each draw is one jitted program, as jax.random's are: called eagerly it runs as one program (not an eager
# operation at a time, each compiled for its shapes), and inside a jitted release it is inlined.
@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _bits(key, shape, dtype):
    size = math.prod(shape)
    if dtype not in (np.dtype(np.uint32), np.dtype(np.uint64)) or not _flat(key, size):
        return jax.random.bits(key, shape, dtype)
    return _words(*_threefry(*_counters(key, size)), dtype).reshape(shape)


def split(key: Key, num: int = 2) -> Array:
    """``jax.random.split(key, num)``."""
    return _split(key, int(num))


@functools.partial(jax.jit, static_argnames=("num",))
def _split(key, num):
    if not _flat(key, num):
        return jax.random.split(key, num)
    high, low = _threefry(*_counters(key, num))
    return jax.random.wrap_key_data(jnp.stack([high, low], axis=1), impl=jax.random.key_impl(key))


def _word_dtype(dtype):
    return np.dtype(np.uint64) if dtype == np.dtype(np.float64) else np.dtype(np.uint32)


def _unit_floats(words: Array, dtype) -> Array:
    """The floats of ``jax.random.uniform`` on [0, 1) before scaling: a word's top mantissa bits under the
    exponent of 1.0 (a float in [1, 2)), less 1."""
    word = _word_dtype(dtype)
    mantissa = jax.lax.shift_right_logical(words, jnp.asarray(8 * word.itemsize - np.finfo(dtype).nmant, word))
    one = jnp.asarray(np.array(1.0, dtype).view(word), word)
    return jax.lax.bitcast_convert_type(mantissa | one, dtype) - jnp.asarray(1.0, dtype)


def _symmetric_unit(floats: Array, dtype) -> Array:
    """``jax.random``'s uniform on [lo, 1), lo = -1 + epsneg, of its normals and Laplaces: ``floats * (1 - lo)
    + lo``, where ``1 - lo`` rounds to exactly 2 (a tie, to even), so the product is exact and the sum rounds
    once, fused or not."""
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    return jax.lax.max(jnp.asarray(lo, dtype), floats * jnp.asarray(2.0, dtype) + lo)


def _normal(floats: Array, dtype) -> Array:
    """sqrt(2) erfinv(U), U uniform on [lo, 1)."""
    return jax.lax.mul(jnp.asarray(np.sqrt(2), dtype), jax.lax.erf_inv(_symmetric_unit(floats, dtype)))


def _laplace(floats: Array, dtype) -> Array:
    """sign(U) log1p(-|U|), U uniform on [lo, 1)."""
    u = _symmetric_unit(floats, dtype)
    return jax.lax.mul(jax.lax.sign(u), jax.lax.log1p(jax.lax.neg(jax.lax.abs(u))))


# jax.random's floats from the unit floats of its words.
_TRANSFORMS = {"uniform": lambda floats, dtype: floats, "normal": _normal, "laplace": _laplace}
_JAX_RANDOM = {"uniform": jax.random.uniform, "normal": jax.random.normal, "laplace": jax.random.laplace}


def _floats(dtype) -> bool:
    return dtype in (np.dtype(np.float32), np.dtype(np.float64))


def _draw(kind: str, key, shape, dtype) -> Array:
    return _draw_program(key, kind, tuple(shape), np.dtype(dtype))


@functools.partial(jax.jit, static_argnames=("kind", "shape", "dtype"))
def _draw_program(key, kind, shape, dtype):
    if not _floats(dtype) or not _flat(key, math.prod(shape)):
        return _JAX_RANDOM[kind](key, shape, dtype)
    return _TRANSFORMS[kind](_unit_floats(bits(key, shape, _word_dtype(dtype)), dtype), dtype)


def uniform(key: Key, shape: tuple[int, ...] = (), dtype=jnp.float64) -> Array:
    """``jax.random.uniform(key, shape, dtype)`` on [0, 1), float32 or float64.

    Only the unit interval: ``jax.random.uniform`` scales by ``maxval - minval`` and adds ``minval`` inside its
    own program, where XLA may contract the two into one fused multiply-add; scale the result instead.
    """
    return _draw("uniform", key, shape, dtype)


def normal(key: Key, shape: tuple[int, ...] = (), dtype=jnp.float64) -> Array:
    """``jax.random.normal(key, shape, dtype)``, float32 or float64: sqrt(2) erfinv(U), U uniform on (-1, 1)."""
    return _draw("normal", key, shape, dtype)


def laplace(key: Key, shape: tuple[int, ...] = (), dtype=jnp.float64) -> Array:
    """``jax.random.laplace(key, shape, dtype)``, float32 or float64: sign(U) log1p(-|U|), U uniform on (-1, 1)."""
    return _draw("laplace", key, shape, dtype)


def draws(*requests: tuple[str, Key, tuple[int, ...]]) -> list[Array]:
    """Several float64 draws ``(kind, key, shape)``, kind ``"uniform"``, ``"normal"`` or ``"laplace"``, from one
    hash: the values of :func:`uniform`, :func:`normal` and :func:`laplace` called one by one.

    Each call of the hash is a loop XLA compiles on its own (0.04-0.05 s on a CPU, under ``vmap`` or not); a
    release that draws from several keys (split from one) compiles one hash for all of its draws.
    """
    f64 = np.dtype(np.float64)
    sizes = [math.prod(shape) for _, _, shape in requests]
    if not all(_flat(key, size) for (_, key, _), size in zip(requests, sizes)) or sum(sizes) >= 2**32:
        return [_draw(kind, key, shape, f64) for kind, key, shape in requests]
    operands = [_counters(key, size) for (_, key, _), size in zip(requests, sizes)]
    high, low = _threefry(*(jnp.concatenate(parts) for parts in zip(*operands)))
    words = jnp.split(_words(high, low, np.uint64), np.cumsum(sizes)[:-1])
    return [_TRANSFORMS[kind](_unit_floats(w, f64), f64).reshape(shape)
            for (kind, _, shape), w in zip(requests, words)]


def gumbel(key: Key, shape: tuple[int, ...] = (), dtype=jnp.float64) -> Array:
    """``jax.random.gumbel(key, shape, dtype, mode="high")`` for float64 (two uniforms a sample)."""
    return _gumbel(key, tuple(shape), np.dtype(dtype))


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _gumbel(key, shape, dtype):
    if dtype != np.dtype(np.float64) or not _flat(key, 2 * math.prod(shape)):
        return jax.random.gumbel(key, shape, dtype, mode="high")
    high, low = _unit_floats(bits(key, (2, *shape), np.uint64), dtype)
    info = np.finfo(dtype)
    x = jnp.where(high >= 0.5, high, high + 2.0 ** -info.nmant * low + info.tiny)
    return -jnp.log(-jnp.log1p(-x))
