"""The oracle tracing worker: a confined process that holds no data and serves each oracle from a fresh fork.

Started by :mod:`gpuprivacy.oracle._sandbox` as ``python -I <this file>``
(by path, so that no other gpuprivacy module is imported). Before it imports
NumPy or JAX it confines itself with the kernel (:mod:`._confine`: Landlock,
seccomp, no_new_privs, an unprivileged user namespace for root, rlimits, the
parent-death signal). It then imports JAX once (the *template*) and answers
``{"ready": ...}``.

Protocol: one JSON request per line on stdin, one JSON response per line on
stdout. A request carries an oracle's source text (``{"source", "name"}``;
the worker cannot read files) and the abstract block (``rows_shape``,
``rows_dtype``, ``capacity``). For every request the template forks a child
that has seen no analyst code; the child closes the template's pipes, narrows
itself further (no new process, a CPU budget, a nested Landlock domain with its
own scratch directory, so it cannot signal the template), execs the source,
traces the UNBATCHED oracle with :func:`jax.make_jaxpr` and writes the jaxpr
as plain JSON (see :func:`encode_closed_jaxpr`), or ``{"error": message}``, to
a pipe of its own. The template then kills it and relays the answer. So one
analyst's code never sees, or shapes, another's request.

Nothing this worker returns is trusted: the oracle's code ran in the child and
may have rewritten any of it (this encoder included). The engine validates and
rebuilds (:mod:`gpuprivacy.oracle._rebuild`).

This module must not import the rest of gpuprivacy (the engine side must not
import it either): it configures JAX itself from the request.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
import types

MAX_ERROR_CHARS = 2000
PROTOCOL_VERSION = 2
MAX_ANSWER_BYTES = 256 << 20

if __name__ != "__main__":  # imported (the engine's tests, tools): NumPy now; as the worker, after confinement
    import numpy as np

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
    if not isinstance(source, str):
        raise ValueError("the request carries no oracle source text")
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


def _answer(request: dict) -> str:
    try:
        response = handle(request)
    except BaseException as exc:  # noqa: BLE001  (everything goes back as text)
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        response = {"error": message[:MAX_ERROR_CHARS]}
    try:
        return json.dumps(response, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return json.dumps({"error": f"unencodable response: {exc}"[:MAX_ERROR_CHARS]})


def _child(request: dict, answer_fd: int, scratch: str, confine, template_pid: int, timeout: float) -> None:
    """In the forked child: shed the template's pipes, narrow, trace, answer, exit. Never returns."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # the template's protocol pipes: the analyst's code never holds them
            os.dup2(null, fd)
        os.closerange(3, answer_fd)
        os.closerange(answer_fd + 1, 1 << 16)
        os.chdir(scratch)
        os.environ["HOME"] = os.environ["TMPDIR"] = tempfile.tempdir = scratch
        if confine is not None:
            confine.confine_child(parent_pid=template_pid, cpu_seconds=int(timeout) + 1, scratch=scratch)
        text = _answer(request).encode()
        view = memoryview(text + b"\n")
        while view:
            view = view[os.write(answer_fd, view):]
    except BaseException:  # noqa: BLE001  (no answer: the template reports that; stderr is the engine's sink)
        traceback.print_exc()
    finally:
        os._exit(0)


def _serve(request: dict, confine, private: str, timeout: float) -> str:
    """Forks a pristine child for one request and returns its answer line (or an error)."""
    scratch = tempfile.mkdtemp(prefix="oracle-", dir=private)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(request, write_fd, scratch, confine, os.getppid(), timeout)
    os.close(write_fd)
    try:
        return _read_answer(read_fd, time.monotonic() + timeout)
    finally:
        os.close(read_fd)
        try:
            os.kill(pid, signal.SIGKILL)  # whatever it left running (threads) ends with it
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        shutil.rmtree(scratch, ignore_errors=True)


def _read_answer(fd: int, deadline: float) -> str:
    chunks, size = [], 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return json.dumps({"error": "tracing timed out"})
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return json.dumps({"error": "the tracing process exited without an answer"})
        newline = chunk.find(b"\n")
        chunks.append(chunk if newline < 0 else chunk[:newline])
        size += len(chunks[-1])
        if size > MAX_ANSWER_BYTES:
            return json.dumps({"error": "the answer is too large"})
        if newline >= 0:
            return b"".join(chunks).decode("utf-8", errors="replace")


class _PackageFinder:
    """Finds gpuprivacy in its own (read-only) directory: the worker runs isolated (``-I``), and Landlock lets it
    read that directory but not the one above it, which a path entry would have to list."""

    def __init__(self, directory: str):
        self.directory = directory

    def find_spec(self, name, path=None, target=None):
        if name != "gpuprivacy":
            return None
        return importlib.util.spec_from_file_location(name, os.path.join(self.directory, "__init__.py"),
                                                      submodule_search_locations=[self.directory])


def _before_fork(request: dict) -> None:
    """Imports gpuprivacy in the template when a request's source uses it: once, our code, and not paid by
    oracles that do not (a fork's imports are lost with it)."""
    text = f"{request.get('source')}{request.get('function_source')}"
    if "gpuprivacy" in text and "gpuprivacy" not in sys.modules and any(
            isinstance(f, _PackageFinder) for f in sys.meta_path):
        try:  # by name: this module never imports the package for itself (the analyst's source asked for it)
            importlib.import_module("gpuprivacy")
        except Exception:  # noqa: BLE001  (the child's own import then reports the error)
            pass


def _load_confinement():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_confine.py")
    spec = importlib.util.spec_from_file_location("gpuprivacy_sandbox_confine", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    global np
    # The protocol owns the original stdout; anything else printed goes to stderr (the engine discards it).
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    confine = _load_confinement()  # the environment's names live there: the engine loads it too
    parent = int(os.environ.get(confine.PARENT_ENV, "0")) or os.getppid()
    timeout = float(os.environ.get(confine.TIMEOUT_ENV, "120"))
    # Named after the engine: an engine killed with SIGKILL leaves it behind, and the next engine removes it.
    private = tempfile.mkdtemp(prefix=f"gpuprivacy-sandbox-{parent}-")
    package = os.environ.get(confine.PACKAGE_ENV)
    if package and os.path.isfile(os.path.join(package, "__init__.py")):
        sys.meta_path.insert(0, _PackageFinder(package))
    ready = {"ready": PROTOCOL_VERSION, "private_dir": private, "confined": False}
    try:
        if os.environ.get(confine.UNCONFINED_ENV) == "1":
            confine.die_with_parent(parent)
            confine = None
        else:
            started = time.perf_counter()
            confine.confine(private_dir=private, parent_pid=parent, allow_processes=True)
            ready["confined"], ready["confine_s"] = True, time.perf_counter() - started
        os.chdir(private)
        os.environ["HOME"] = os.environ["TMPDIR"] = tempfile.tempdir = private
        import numpy  # the template imports NumPy and JAX once; every child starts from here
        import jax  # noqa: F401
        np = numpy
    except Exception as exc:  # noqa: BLE001  (the engine reports it and refuses the oracle)
        ready = {"error": f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS], "private_dir": private}
    protocol.write(json.dumps(ready) + "\n")
    protocol.flush()
    if "error" in ready:
        shutil.rmtree(private, ignore_errors=True)
        return
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except ValueError:
                text = json.dumps({"error": "the request is not JSON"})
            else:
                _before_fork(request)
                text = _serve(request, confine, private, timeout)
            protocol.write(text + "\n")
            protocol.flush()
    finally:
        shutil.rmtree(private, ignore_errors=True)


if __name__ == "__main__":
    main()
