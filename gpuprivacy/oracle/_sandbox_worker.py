"""The oracle tracing worker: runs in a separate process that holds no data.

Started by :mod:`gpuprivacy.oracle._sandbox` as
``python -m gpuprivacy.oracle._sandbox_worker``. Protocol: one JSON request
per line on stdin, one JSON response per line on stdout, for as many
requests as the engine sends. A request names the oracle by source text
(``{"source": ..., "name": ...}``) or by a file (``{"path": ..., "name": ...}``)
and gives the abstract block (``rows_shape``, ``rows_dtype``, ``capacity``).
The worker execs the source in a fresh module namespace, traces the
UNBATCHED oracle with :func:`jax.make_jaxpr` and answers with the jaxpr
encoded as plain JSON data (see :func:`encode_closed_jaxpr`), or
``{"error": message}``.

Nothing this worker returns is trusted: the oracle's own code ran here and
may have rewritten any of it (including this encoder). The worker therefore
does no validation that matters; it only encodes. The engine validates and
rebuilds (:mod:`gpuprivacy.oracle._rebuild`).

This module must not import the rest of gpuprivacy (the engine side must not
import it either): it configures JAX itself from the request.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import sys
import traceback
import types

import numpy as np

MAX_ERROR_CHARS = 2000
PROTOCOL_VERSION = 1

_STRUCT_NAMES = ("GatherDimensionNumbers", "ScatterDimensionNumbers", "ConvDimensionNumbers",
                 "_LinearSolveTuple")
_DROPPED_NAMES = {
    "NamedSharding": "sharding", "SingleDeviceSharding": "sharding", "PositionalSharding": "sharding",
    "GSPMDSharding": "sharding", "UnspecifiedValue": "sharding", "AUTO": "sharding",
    "Mesh": "mesh", "AbstractMesh": "mesh", "Layout": "layout", "DeviceLocalLayout": "layout",
    "Format": "layout", "WrappedFun": "callable", "function": "callable", "partial": "callable",
    "method": "callable", "builtin_function_or_method": "callable",
}


def _scalar(value):
    """One array element as JSON data (floats as hex strings, exact with inf/nan)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return {"float": float(value).hex()}
    if isinstance(value, (complex, np.complexfloating)):
        return {"complex": [float(value.real).hex(), float(value.imag).hex()]}
    return {"opaque": type(value).__name__}


def _array(value) -> dict:
    arr = np.asarray(value)
    dtype = str(arr.dtype)
    data = arr.astype(np.float64) if arr.dtype.kind == "f" and arr.dtype.itemsize < 4 else arr
    flat = [_scalar(x) for x in data.reshape(-1).tolist()]
    return {"const": flat, "shape": list(arr.shape), "dtype": dtype}


def _aval(aval) -> dict:
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return {"opaque": type(aval).__name__}
    return {"shape": [int(d) if isinstance(d, (int, np.integer)) else {"opaque": type(d).__name__} for d in shape],
            "dtype": str(dtype), "weak_type": bool(getattr(aval, "weak_type", False))}


class _Encoder:
    def __init__(self):
        self.ids: dict[int, int] = {}

    def bind(self, var) -> dict:
        self.ids[id(var)] = len(self.ids)
        return {"id": self.ids[id(var)], "aval": _aval(var.aval)}

    def use(self, atom):
        if type(atom).__name__ == "Literal":
            enc = _array(atom.val)
            return {"literal": enc["const"][0] if not enc["shape"] else enc["const"], "shape": enc["shape"],
                    "dtype": str(atom.aval.dtype), "weak_type": bool(getattr(atom.aval, "weak_type", False))}
        key = id(atom)
        if key not in self.ids:
            return {"opaque": "unbound_var"}
        return self.ids[key]


def encode_param(value, depth: int = 0):
    """A jaxpr equation parameter as JSON data, generically by type."""
    if depth > 64:
        return {"opaque": "too_deep"}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):  # before int: some enums are IntEnums
        return {"enum": type(value).__name__, "member": value.name}
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return {"float": float(value).hex()}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return {"dtype": str(np.dtype(value))}
    if type(value).__name__.endswith("DType") and hasattr(value, "name"):
        return {"dtype": str(np.dtype(value))}
    tname = type(value).__name__
    if tname in ("ClosedJaxpr", "Jaxpr"):
        return {"jaxpr": encode_closed_jaxpr(value)}
    if tname in _STRUCT_NAMES:
        if dataclasses.is_dataclass(value):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        else:
            fields = value._asdict()
        return {"struct": tname, "fields": {k: encode_param(v, depth + 1) for k, v in fields.items()}}
    if isinstance(value, (tuple, list)):
        return [encode_param(v, depth + 1) for v in value]
    if tname in _DROPPED_NAMES:
        return {"dropped": _DROPPED_NAMES[tname]}
    if "Sharding" in tname:
        return {"dropped": "sharding"}
    if callable(value):
        return {"dropped": "callable"}
    return {"opaque": tname}


def encode_closed_jaxpr(closed) -> dict:
    """A (Closed)Jaxpr as JSON data: variables as integer ids, scoped per jaxpr."""
    jaxpr = getattr(closed, "jaxpr", closed) if type(closed).__name__ == "ClosedJaxpr" else closed
    consts = list(getattr(closed, "consts", ())) if type(closed).__name__ == "ClosedJaxpr" else []
    enc = _Encoder()
    out = {
        "constvars": [enc.bind(v) for v in jaxpr.constvars],
        "consts": [_array(c) for c in consts],
        "invars": [enc.bind(v) for v in jaxpr.invars],
        "eqns": [],
    }
    for eqn in jaxpr.eqns:
        invars = [enc.use(v) for v in eqn.invars]
        params = {str(k): encode_param(v) for k, v in eqn.params.items()}
        outvars = [enc.bind(v) for v in eqn.outvars]
        out["eqns"].append({"primitive": eqn.primitive.name, "params": params, "invars": invars,
                            "outvars": outvars, "effects": [str(e) for e in eqn.effects]})
    out["outvars"] = [enc.use(v) for v in jaxpr.outvars]
    out["effects"] = [str(e) for e in jaxpr.effects]
    return out


def _configure(request: dict) -> None:
    import jax
    jax.config.update("jax_enable_x64", bool(request.get("x64", True)))
    for key in ("jax_numpy_dtype_promotion", "jax_numpy_rank_promotion"):
        if isinstance(request.get(key), str):
            jax.config.update(key, request[key])


def _load(request: dict):
    source = request.get("source")
    filename = request.get("filename") or "<oracle>"
    if source is None and request.get("path"):
        filename = request["path"]
        with open(filename, encoding="utf-8") as fh:
            source = fh.read()
    if not isinstance(source, str):
        raise ValueError("the request names no oracle source")
    module = types.ModuleType("gpuprivacy_sandboxed_oracle")
    module.__file__ = filename
    sys.modules[module.__name__] = module  # dataclasses and friends look their module up
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
        for key, value in (request.get("closure") or {}).items():
            module.__dict__[key] = _decode_closure_value(value)
        if request.get("function_source"):
            exec(compile(request["function_source"], filename, "exec"), module.__dict__)
    finally:
        sys.modules.pop(module.__name__, None)
    fn = module.__dict__.get(request.get("name"))
    if not callable(fn):
        raise ValueError(f"the source defines no callable named {request.get('name')!r}")
    return fn


def _decode_closure_value(value):
    if isinstance(value, dict) and "float" in value:
        return float.fromhex(value["float"])
    return value


def handle(request: dict) -> dict:
    _configure(request)
    import jax
    fn = _load(request)
    rows = jax.ShapeDtypeStruct(tuple(request["rows_shape"]), np.dtype(request["rows_dtype"]))
    valid = jax.ShapeDtypeStruct((int(request["capacity"]),), np.bool_)
    closed = jax.make_jaxpr(fn)(rows, valid)
    return {"version": PROTOCOL_VERSION, "jax_version": jax.__version__, "jaxpr": encode_closed_jaxpr(closed)}


def main() -> None:
    # The protocol owns the original stdout; anything the oracle prints goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            response = handle(json.loads(line))
        except BaseException as exc:  # noqa: BLE001  (everything goes back as text)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)) and not isinstance(exc, SystemExit):
                raise
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            response = {"error": message[:MAX_ERROR_CHARS]}
        try:
            text = json.dumps(response, allow_nan=False)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"error": f"unencodable response: {exc}"[:MAX_ERROR_CHARS]})
        protocol.write(text + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
