"""NumPy functions inside compiled CPU programs, as XLA FFI custom calls that the compilation cache can keep.

:func:`jax.pure_callback` runs Python inside a compiled program, but JAX never writes a program holding a
host callback to its persistent compilation cache (the callback is a live Python object baked into the
program), so every such program is compiled again in every process: on the development VM that was 69 of
the 150 s of a warm ``gpuprivacy reproduce all --quick``. An XLA FFI custom call names its handler by a
string that the process registers before it runs the program, so a program that calls one is an ordinary
cacheable program.

:func:`register` turns a NumPy function into such a handler with :mod:`ctypes` (no compiled extension):
XLA calls a C function pointer with its call frame (``xla/ffi/api/c_api.h``, the FFI API 0.1 structures
used here: the call frame, buffers, scalar attributes, errors), the handler wraps the argument and result
buffers as NumPy arrays without copying and calls the function, which writes the results in place. An
exception in the function becomes an XLA error, raised by the program's caller (a program never returns
a result the function did not write). Only the CPU platform: the buffers must be host memory.

Like a pure callback, the function must be pure (the same results for the same inputs; XLA may run a call
more than once or not at all), must not call JAX, and runs under the GIL.
"""

from __future__ import annotations

import ctypes
from typing import Callable

import jax
import numpy as np

NumpyTarget = Callable[..., None]
"""``fn(*inputs, *outputs, **attributes) -> None``: reads the input arrays, writes the outputs in place."""

# XLA_FFI_DataType (xla_data.proto's PrimitiveType) -> NumPy, for the dtypes a handler accepts.
_DTYPES = {1: np.bool_, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.uint8, 7: np.uint16, 8: np.uint32,
           9: np.uint64, 11: np.float32, 12: np.float64}
_EXTENSION_METADATA = 1  # XLA_FFI_Extension_Metadata: XLA asks the handler which API version it speaks
_STAGE_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_ATTR_SCALAR = 3  # XLA_FFI_AttrType_SCALAR
_ERROR_INTERNAL = 13  # XLA_FFI_Error_Code_INTERNAL
_API_VERSION = (0, 1)  # the structures below are those of XLA FFI API 0.1, unchanged since


class _ExtensionBase(ctypes.Structure):
    pass


_ExtensionBase._fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int),
                           ("next", ctypes.POINTER(_ExtensionBase))]


class _ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class _Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", _ApiVersion), ("traits", ctypes.c_uint32)]


class _MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", _ExtensionBase), ("metadata", ctypes.POINTER(_Metadata))]


class _Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("data", ctypes.c_void_p), ("rank", ctypes.c_int64), ("dims", ctypes.POINTER(ctypes.c_int64))]


class _ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Scalar(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("value", ctypes.c_void_p)]


class _Buffers(ctypes.Structure):  # XLA_FFI_Args and XLA_FFI_Rets have this layout
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("values", ctypes.POINTER(ctypes.c_void_p))]


class _Attrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("names", ctypes.POINTER(ctypes.POINTER(_ByteSpan))),
                ("values", ctypes.POINTER(ctypes.c_void_p))]


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("errc", ctypes.c_int)]


_ErrorCreate = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_ErrorCreateArgs))


class _Api(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("api_version", _ApiVersion),
                ("internal_api", ctypes.c_void_p), ("error_create", _ErrorCreate)]


class _CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.POINTER(_ExtensionBase)),
                ("api", ctypes.POINTER(_Api)), ("ctx", ctypes.c_void_p), ("stage", ctypes.c_int),
                ("args", _Buffers), ("rets", _Buffers), ("attrs", _Attrs), ("future", ctypes.c_void_p)]


_Handler = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

# The ctypes handlers must live as long as the process: XLA keeps their addresses.
_HANDLERS: dict[str, object] = {}


def _array(address: int) -> np.ndarray:
    """The ``XLA_FFI_Buffer`` at ``address`` as a NumPy array over the same memory (no copy)."""
    buffer = _Buffer.from_address(address)
    if buffer.dtype not in _DTYPES:
        raise TypeError(f"unsupported XLA data type {buffer.dtype} (supported: bool, integers, float32, float64).")
    dtype = np.dtype(_DTYPES[buffer.dtype])
    shape = tuple(buffer.dims[i] for i in range(buffer.rank))
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        return np.empty(shape, dtype)
    memory = (ctypes.c_char * (size * dtype.itemsize)).from_address(buffer.data)
    return np.frombuffer(memory, dtype=dtype).reshape(shape)


def _attributes(attrs: _Attrs) -> dict[str, int | float]:
    out = {}
    for i in range(attrs.size):
        span = attrs.names[i].contents
        name = ctypes.string_at(span.ptr, span.len).decode()
        if attrs.types[i] != _ATTR_SCALAR:
            raise TypeError(f"attribute {name!r}: only scalar attributes are supported.")
        scalar = ctypes.cast(attrs.values[i], ctypes.POINTER(_Scalar)).contents
        if scalar.dtype not in _DTYPES:
            raise TypeError(f"attribute {name!r}: unsupported XLA data type {scalar.dtype}.")
        dtype = np.dtype(_DTYPES[scalar.dtype])
        memory = (ctypes.c_char * dtype.itemsize).from_address(scalar.value)
        out[name] = np.frombuffer(memory, dtype=dtype)[0].item()
    return out


def _handler(fn: NumpyTarget, name: str) -> Callable[[int], int | None]:
    def handle(address: int) -> int | None:
        frame = _CallFrame.from_address(address)
        try:
            if frame.extension_start:  # a metadata query, made once when the target is registered
                extension = frame.extension_start.contents
                if extension.type == _EXTENSION_METADATA:
                    metadata = ctypes.cast(frame.extension_start, ctypes.POINTER(_MetadataExtension))
                    version = metadata.contents.metadata.contents.api_version
                    version.major_version, version.minor_version = _API_VERSION
                    metadata.contents.metadata.contents.traits = 0
                return None
            if frame.stage != _STAGE_EXECUTE:
                return None
            arrays = [_array(frame.args.values[i]) for i in range(frame.args.size)]
            arrays += [_array(frame.rets.values[i]) for i in range(frame.rets.size)]
            fn(*arrays, **_attributes(frame.attrs))
            return None
        except BaseException as error:  # noqa: BLE001 -- every failure must reach XLA as an error
            message = f"{name}: {type(error).__name__}: {error}".encode(errors="replace")
            args = _ErrorCreateArgs(ctypes.sizeof(_ErrorCreateArgs), None, message, _ERROR_INTERNAL)
            return frame.api.contents.error_create(ctypes.byref(args))
    return handle


def register(name: str, fn: NumpyTarget) -> None:
    """Registers ``fn`` as the CPU FFI target ``name`` (once per process; a second call with the name is a no-op).

    Args:
      name: the custom call's target name, unique in the process.
      fn: ``fn(*inputs, *outputs, **attributes)``: NumPy arrays over XLA's buffers (inputs to read,
        outputs to fill) and the call's scalar attributes as Python numbers.
    """
    if name in _HANDLERS:
        return
    handler = _Handler(_handler(fn, name))
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(handler), platform="cpu")
    _HANDLERS[name] = handler


def call(name: str, result: jax.ShapeDtypeStruct, *args: jax.Array, **attributes) -> jax.Array:
    """Calls the registered target ``name`` on ``args`` inside a program (lowered for the CPU only).

    ``attributes`` are passed to the NumPy function as keyword arguments; give them as NumPy scalars
    (``np.int64(axis)``) so that their type is fixed.
    """
    return jax.ffi.ffi_call(name, result, vmap_method="expand_dims")(*args, **attributes)
