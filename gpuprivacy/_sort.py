"""Sorts that run the fastest sort of the backend a computation is compiled for.

XLA's CPU sort is a generic comparator sort; NumPy's (x86-simd-sort) is
SIMD-accelerated. On the 2-core AVX-512 development VM (``experiments/bench_sort.py``,
2026-11-26, load ~5) ``jnp.sort`` under ``jit`` took 35-55x as long as ``np.sort``:
0.35 s vs 7.8 ms for 10^6 float64. So on the CPU backend :func:`sort` and
:func:`argsort` run NumPy inside the compiled program, as an XLA FFI custom
call (:mod:`gpuprivacy._numpy_ffi`: unlike a :func:`jax.pure_callback`, a
program holding it is kept by the persistent compilation cache; the data are
in host memory anyway, and the call sorts XLA's buffers in place: 10^6 values
of a [1000, 1000] batch took 15 ms, against 24 ms through a pure callback);
on GPU and TPU they are ``jnp.sort`` / ``jnp.argsort``.

The choice is made when the program is lowered, not when Python traces it:
both branches are staged with :func:`jax.lax.platform_dependent`, and lowering
for one platform keeps only that platform's branch. A program compiled for a
GPU never contains the host call, whatever ``jax.default_backend()`` was at
trace time, and a CPU program (including a CPU-committed array on a GPU host)
gets NumPy. (Lowering for several platforms at once, ``jax.export`` with
``platforms=("cpu", "cuda")``, is not supported: the NumPy target exists on
the CPU only. Nothing in the package does that.)

The results equal ``jnp.sort(x, axis)`` / ``jnp.argsort(x, axis)`` bitwise.
``jnp.sort`` is stable with ``-0.0 == +0.0`` and every NaN equal and last, so
zeros and NaNs keep their input order and bits; NumPy's SIMD quicksort does
not (it may swap ``-0.0``/``+0.0`` and it rewrites NaNs as the canonical
quiet NaN), so the host side puts them back, O(n) and only in rows that hold
a ``-0.0`` or a NaN. ``argsort`` uses NumPy's stable sort, whose order (NaN last,
``-0.0 == +0.0``, ties by index) is ``jnp.argsort``'s.

Arrays of fewer than ``MIN_HOST_SORT_SIZE`` elements stay in XLA (a host round
trip costs about 0.1 ms). The size counts the whole batch: under ``jax.vmap``
a ``custom_vmap`` rule calls the same function on the batched array (the
sorted axis is addressed from the end, so leading batch axes do not move it),
so 1000 rows of 8 values take the host path and NumPy runs once per
batch, also under nested vmaps. :func:`sort` is differentiable like
``jnp.sort`` (a custom JVP gathers the tangents by the stable permutation, as
``jnp.sort``'s JVP does); :func:`argsort`'s output is an integer, as
``jnp.argsort``'s.

Oracle code (``gpuprivacy.oracle``, ``gpuprivacy.subsets`` and anything an
oracle calls) must not use these: its sandbox forbids host calls.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import _numpy_ffi

# The platforms whose sorts go through NumPy, read at trace time. The package never changes it; tests
# (forcing the accelerator choice) and experiments/bench_sort.py (its "before" column) set it to () and
# then call jax.clear_caches(), since traces are cached.
HOST_SORT_PLATFORMS: tuple[str, ...] = ("cpu",)

# Fewer elements than this (the whole batch, under vmap) sort faster in XLA than in a host round trip.
# Measured on the development VM (2026-11-26, jitted, float64): a callback costs ~0.1 ms; one row of 256
# values took 0.05 ms in XLA and 0.10 ms by NumPy, one row of 1024 0.14 ms and 0.10 ms; a [1000, 4] batch
# 0.16 ms either way, [1000, 8] 0.36 ms and 0.16 ms. Small XLA sorts also fuse with their neighbours.
MIN_HOST_SORT_SIZE = 1024

_HOST_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64))


def _canonical_axis(x: jax.Array, axis: int) -> int:
    """``axis`` counted from the end (batch axes that vmap prepends leave it unchanged)."""
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis!r} is out of bounds for an array of shape {x.shape}.")
    return axis - x.ndim if axis >= 0 else axis


def _restore_float_ties(x: np.ndarray, out: np.ndarray, axis: int) -> None:
    """Puts ``-0.0``/``+0.0`` and NaNs of ``out = np.sort(x, axis)`` in input order, as ``jnp.sort`` has them.

    In a sorted row the zeros are the run after the negatives and the NaNs the tail (NumPy and
    ``jnp.sort`` agree on that); only the order and bits inside these runs can differ.
    """
    bits = x.view(np.int64 if x.itemsize == 8 else np.int32)
    negative_zero = np.iinfo(bits.dtype).min  # sign bit only
    has_nan = np.isnan(np.take(out, -1, axis=axis))  # NaNs sort last
    needs = has_nan | (bits == negative_zero).any(axis=axis)
    if not needs.any():
        return
    for index in np.argwhere(needs):
        where = list(index)
        where.insert(x.ndim + axis, slice(None))
        row, sorted_row = x[tuple(where)], out[tuple(where)]
        zeros = row[row == 0]
        first = np.count_nonzero(row < 0)
        sorted_row[first:first + zeros.size] = zeros
        nans = row[np.isnan(row)]
        sorted_row[row.size - nans.size:] = nans


def _already_sorted(x: np.ndarray, axis: int) -> bool:
    """Whether every row is nondecreasing along ``axis`` (no NaN, ``-0.0 == +0.0``).

    A stable sort leaves such rows as they are, bits included, so their sort is a copy: an O(n) check
    instead of an O(n log n) sort, for data sorted earlier in the same computation (the study engine
    sorts a block's datasets once for all its mechanisms, each of which sorts again).
    """
    if x.shape[axis] < 2:
        return True
    head = [slice(None)] * x.ndim
    tail = list(head)
    head[axis], tail[axis] = slice(None, -1), slice(1, None)
    first = x[tuple(slice(None) if d == axis % x.ndim else 0 for d in range(x.ndim))]  # a view, no copy
    if not np.all(first[1:] >= first[:-1]):  # unsorted data: found in one row, not the batch
        return False
    return bool(np.all(x[tuple(tail)] >= x[tuple(head)]))


def _numpy_sort(x: np.ndarray, out: np.ndarray, *, axis: int) -> None:
    """Writes ``jnp.sort(x, axis)`` into ``out`` (NumPy's SIMD sort, float ties put back)."""
    out[...] = x
    if not x.size or _already_sorted(x, axis):
        return  # a stable sort of sorted rows is a copy
    out.sort(axis=axis)  # what np.sort does, on a copy it makes
    if x.dtype.kind == "f":
        _restore_float_ties(x, out, axis)


def _numpy_argsort(x: np.ndarray, out: np.ndarray, *, axis: int) -> None:
    """Writes ``jnp.argsort(x, axis)`` (stable) into ``out``."""
    out[...] = np.argsort(x, axis=axis, kind="stable")


# Called by name from compiled programs (gpuprivacy/_numpy_ffi.py): unlike a pure callback, a program that
# calls a registered target is kept by JAX's persistent compilation cache. Module-level functions that look
# the implementation up at call time, so that tests can watch them.
_SORT_TARGET, _ARGSORT_TARGET = "gpuprivacy_numpy_sort", "gpuprivacy_numpy_argsort"
_numpy_ffi.register(_SORT_TARGET, lambda x, out, *, axis: _numpy_sort(x, out, axis=axis))
_numpy_ffi.register(_ARGSORT_TARGET, lambda x, out, *, axis: _numpy_argsort(x, out, axis=axis))


def _host_sort(x: jax.Array, axis: int) -> jax.Array:
    return _numpy_ffi.call(_SORT_TARGET, jax.ShapeDtypeStruct(x.shape, x.dtype), x, axis=np.int64(axis))


def _host_argsort(x: jax.Array, axis: int) -> jax.Array:
    dtype = jax.eval_shape(functools.partial(jnp.argsort, axis=axis), x).dtype
    return _numpy_ffi.call(_ARGSORT_TARGET, jax.ShapeDtypeStruct(x.shape, dtype), x, axis=np.int64(axis))


@functools.cache
def _platform_sort(kind: str, axis: int):
    """``x -> jnp.sort(x, axis)`` (``kind="sort"``) or ``jnp.argsort`` with the host branch on HOST_SORT_PLATFORMS.

    The size rule sees the whole batch: under vmap the rule below calls the same function on the
    batched array (the sorted axis is counted from the end, so leading batch axes do not move it),
    and NumPy then runs once per batch.
    """
    device_fn = functools.partial(jnp.sort if kind == "sort" else jnp.argsort, axis=axis)
    host_fn = functools.partial(_host_sort if kind == "sort" else _host_argsort, axis=axis)

    @jax.custom_batching.custom_vmap
    def sorted_(x):
        if not HOST_SORT_PLATFORMS or x.size < MIN_HOST_SORT_SIZE:
            return device_fn(x)
        return jax.lax.platform_dependent(x, default=device_fn, **{name: host_fn for name in HOST_SORT_PLATFORMS})

    @sorted_.def_vmap
    def _(axis_size, in_batched, x):
        del axis_size
        return sorted_(x), in_batched[0]

    return sorted_


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _sort(x: jax.Array, axis: int) -> jax.Array:
    return _platform_sort("sort", axis)(x)


@_sort.defjvp
def _sort_jvp(axis, primals, tangents):
    (x,), (t,) = primals, tangents
    # jnp.sort's JVP: the tangents follow the stable sorting permutation (custom_vmap has no
    # autodiff; the permutation is computed on the primal only).
    order = _platform_sort("argsort", axis)(jax.lax.stop_gradient(x))
    return jnp.take_along_axis(x, order, axis=axis), jnp.take_along_axis(t, order, axis=axis)


def sort(x: jax.Array, axis: int = -1) -> jax.Array:
    """``jnp.sort(x, axis)``, bitwise, by the fastest sort of the platform the program is lowered for.

    Args:
      x: an array (bool, integer or float32/float64; other dtypes always use ``jnp.sort``).
      axis: the axis to sort along.

    Returns:
      ``x`` sorted ascending along ``axis``; NaNs last, ties in input order (as ``jnp.sort``).

    Examples:
      >>> import jax.numpy as jnp
      >>> from gpuprivacy._sort import sort
      >>> sort(jnp.asarray([3, 1, 2]))
      Array([1, 2, 3], dtype=int64)
    """
    x = jnp.asarray(x)
    axis = _canonical_axis(x, axis)
    if x.dtype not in _HOST_DTYPES:
        return jnp.sort(x, axis=axis)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return _platform_sort("sort", axis)(x)  # nothing to differentiate
    return _sort(x, axis)


def argsort(x: jax.Array, axis: int = -1) -> jax.Array:
    """``jnp.argsort(x, axis)`` (stable), bitwise, by the fastest sort of the platform the program is lowered for.

    Args:
      x: an array (bool, integer or float32/float64; other dtypes always use ``jnp.argsort``).
      axis: the axis to sort along.

    Returns:
      The stable sorting permutation along ``axis`` (``jnp.argsort``'s integer dtype). Not
      differentiable in ``x`` (an integer output), like ``jnp.argsort``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from gpuprivacy._sort import argsort
      >>> argsort(jnp.asarray([3.0, 1.0, 3.0, 2.0]))
      Array([1, 3, 0, 2], dtype=int64)
    """
    x = jnp.asarray(x)
    axis = _canonical_axis(x, axis)
    if x.dtype not in _HOST_DTYPES:
        return jnp.argsort(x, axis=axis)
    return _platform_sort("argsort", axis)(jax.lax.stop_gradient(x))
