"""Tracing untrusted oracles in a confined process and rebuilding them from allowed primitives.

An analyst supplies an oracle ``f(rows, valid) -> scalar`` and the engine
vmaps it over thousands of subsets of private data. The analyst is treated as
an adversary who knows JAX and Linux, so neither Python nor a child process of
the same user is a boundary. :func:`sandboxed_oracle` sends the oracle's
*source* to a worker (``python -I gpuprivacy/oracle/_sandbox_worker.py``) that
the kernel confines before it imports anything an analyst could touch
(:mod:`gpuprivacy.oracle._confine`: Landlock file-system, TCP and scope rules,
seccomp, no_new_privs, no root, rlimits, the parent-death signal). The worker
forks one pristine child per request; the child traces the UNBATCHED oracle
on abstract inputs and answers with its jaxpr as plain JSON (decoded here with
``json.loads`` only: no pickle, no eval). The engine then validates that tree
and rebuilds the oracle by binding primitives it looks up itself, from an
allow-list of pure, deterministic operations with standard batching rules, each
parameter checked here (:mod:`gpuprivacy.oracle._rebuild`). The engine batches
the rebuilt function with its own ``jax.vmap``; the analyst's Python code never
runs in the process that holds the data, and the process where it does run
cannot read the data holder's files or memory, open a socket, write to any
package, or shape another oracle's trace (docs/isolation.md).

What is protected:
  * custom batching rules, callbacks, effects, collectives and randomness are
    refused by name before any data is touched;
  * trace-time introspection runs in the worker, which holds no data and can
    reach none (it can at most bake what it computes into constants, which are
    capped);
  * the worker is not trusted: an oracle may rewrite its own child (the encoder
    included); every answer is validated from scratch by the engine, which
    also re-traces and compiles the rebuilt function and refuses anything that
    is not a scalar of a real dtype built from allowed primitives;
  * loops share one public work budget
    (:class:`~gpuprivacy.oracle._rebuild.RebuildLimits`), ``jit`` calls are
    inlined (the tree cannot choose compiler options), custom derivative
    rules are dropped (only the primal runs).

What is not protected:
  * for a *callable* (:func:`sandboxed_oracle` given a function object) the
    engine reads its source with :mod:`inspect`; whatever the function's
    module did at import already ran beside the data. Only functions whose
    source is self-contained (module-level functions, and closures over
    plain ``bool``/``int``/``float``/``str`` values) are supported; other
    closures are refused. A function of a ``__main__`` script is sent with the
    script's imports, literal constants and definitions only (its top level is
    never run again). Pass ``source=`` text (or ``path=``) for oracles that
    should never be imported by the engine;
  * timing: the rebuilt oracle's running time may depend on data (e.g. a
    data-dependent ``while`` loop); the work budget bounds it, it does not
    hide it.

A machine whose kernel cannot confine the worker (see :func:`features`,
``gpuprivacy doctor``) refuses untrusted oracles, unless the caller sets
``GPUPRIVACY_ALLOW_UNCONFINED=1`` (documented, warned on every worker start).

Trusted fast path: oracles the package ships (:mod:`gpuprivacy.oracle`'s
library) and functions the data holder writes themselves may be passed to
:func:`~gpuprivacy.oracle.evaluate` directly, skipping the sandbox (no
worker, no re-trace). That path trusts the oracle with the whole batch and
the process; use the sandbox for any oracle an analyst supplied. The sandbox
costs one worker round trip (a fork) per (oracle, block shape); rebuilt
functions are cached, so repeated evaluations cost nothing extra.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import inspect
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings
import weakref
from typing import Callable

import jax
import numpy as np

from gpuprivacy._lru import LRUCache
from gpuprivacy.oracle._rebuild import OracleRefused as OracleRefused
from gpuprivacy.oracle._rebuild import RebuildLimits as RebuildLimits
from gpuprivacy.oracle._confine import PACKAGE_ENV, PARENT_ENV, TIMEOUT_ENV, UNCONFINED_ENV, features
from gpuprivacy.oracle._rebuild import rebuild

WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sandbox_worker.py")
DEFAULT_TIMEOUT_S = 120.0
MAX_RESPONSE_BYTES = 256 << 20
# Seconds the worker may take to confine itself and import JAX (a loaded 2-core machine takes a few).
START_TIMEOUT_S = 120.0
# The documented opt-in for a machine whose kernel cannot confine the worker (macOS, an old Linux).
ALLOW_UNCONFINED_ENV = "GPUPRIVACY_ALLOW_UNCONFINED"
_PRIVATE_PREFIX = "gpuprivacy-sandbox-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_stale_private_dirs(root: str | None = None) -> list[str]:
    """Removes the private folders that workers of dead engines left in ``root`` (the temporary directory).

    A worker names its folder ``gpuprivacy-sandbox-<engine pid>-*``. It removes the folder when its engine
    stops it, and the engine does at exit; an engine killed with SIGKILL does neither (its worker dies with it,
    by its parent-death signal). So each engine, before starting a worker, removes the folders of this user
    whose engine is no longer running. Only plain folders are touched (never a symbolic link), and a folder
    without an engine pid in its name is left alone. Returns the paths removed.
    """
    root = tempfile.gettempdir() if root is None else root
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        pid = entry.name[len(_PRIVATE_PREFIX):].split("-", 1)[0] if entry.name.startswith(_PRIVATE_PREFIX) else ""
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not _alive(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


class _Worker:
    """The confined template process (started lazily, restarted if it died); it forks one child per request."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.private_dir: str | None = None
        self.lock = threading.Lock()
        self.requests = 0  # requests sent (tests check the cache with it)
        self.starts = 0
        self.confined: bool | None = None
        self.confine_s: float | None = None  # what confining itself cost the worker (reported by it)
        self.force_unconfined = False  # test-only: the positive controls of the confinement tests

    def _unconfined(self) -> bool:
        """Whether to start the worker without kernel confinement, or raise if it may not run at all."""
        if self.force_unconfined:
            return True
        missing = features()["missing"]
        if not missing:
            return False
        if os.environ.get(ALLOW_UNCONFINED_ENV) == "1":
            warnings.warn(f"untrusted oracles run UNCONFINED ({ALLOW_UNCONFINED_ENV}=1): this machine lacks "
                          f"{'; '.join(missing)}. The analyst's code can read this user's files and memory.",
                          RuntimeWarning, stacklevel=4)
            return True
        raise OracleRefused("untrusted oracles are refused on this machine: the sandbox cannot confine the "
                            f"process that runs the analyst's code (missing: {'; '.join(missing)}). Run "
                            "`gpuprivacy doctor` for details. To run them unconfined at your own risk, set "
                            f"{ALLOW_UNCONFINED_ENV}=1; for code you wrote yourself, use gpuprivacy.oracle.trusted(f).")

    def _start(self, timeout: float) -> None:
        unconfined = self._unconfined()
        remove_stale_private_dirs()
        # TMPDIR: the worker makes its private folder where this process's temporary directory is, so that
        # stop() (which removes only a folder there) finds it whatever TMPDIR the user set.
        env = {"PATH": os.defpath, "TMPDIR": tempfile.gettempdir(), "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1",
               "XLA_FLAGS": "",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               PARENT_ENV: str(os.getpid()), TIMEOUT_ENV: repr(float(timeout)),
               PACKAGE_ENV: os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
        if unconfined:
            env[UNCONFINED_ENV] = "1"
        # Its own session: a timeout kills the worker's whole process group, never only its first process. The
        # worker's parent-death signal follows the thread that starts it: if that thread ends, the worker ends
        # and the next request starts a new one.
        self.process = subprocess.Popen([sys.executable, "-I", WORKER_PATH], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/", env=env,
                                        close_fds=True, start_new_session=True)
        self.starts += 1
        try:
            ready = json.loads(self._read_line(self.process, time.monotonic() + START_TIMEOUT_S))
        except (OSError, TimeoutError, ValueError) as exc:
            self.stop()
            raise OracleRefused(f"the sandbox worker did not start ({exc})") from None
        if not isinstance(ready, dict):
            self.stop()
            raise OracleRefused("the sandbox worker did not start (a malformed greeting)")
        self.private_dir = ready.get("private_dir") if isinstance(ready.get("private_dir"), str) else None
        if "error" in ready:
            self.stop()
            raise OracleRefused(f"untrusted oracles are refused: the sandbox worker could not confine itself "
                                f"({str(ready['error'])[:500]}). Run `gpuprivacy doctor` for details.")
        self.confined = ready.get("confined") is True
        self.confine_s = ready.get("confine_s") if type(ready.get("confine_s")) is float else None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the template and any child it forked
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
            for stream in (process.stdin, process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        private, self.private_dir = self.private_dir, None
        # The worker names its directory; it is only removed if it is one of ours in the temp directory.
        if private and os.path.dirname(private) == tempfile.gettempdir() and \
                os.path.basename(private).startswith(_PRIVATE_PREFIX):
            shutil.rmtree(private, ignore_errors=True)

    def request(self, message: dict, timeout: float, oracle_name: str) -> dict:
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self.stop()
                self._start(timeout)
            self.requests += 1
            process = self.process
            try:
                process.stdin.write((json.dumps(message) + "\n").encode())
                process.stdin.flush()
                # The template times its child out first and stays usable; this is the backstop.
                line = self._read_line(process, time.monotonic() + timeout + 10.0)
            except (OSError, TimeoutError, ValueError) as exc:
                self.stop()
                raise OracleRefused(f"oracle {oracle_name!r} refused: the sandbox failed ({exc})") from None
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):
            raise OracleRefused(f"oracle {oracle_name!r} refused: the sandbox answer is not JSON") from None
        return answer

    @staticmethod
    def _read_line(process, deadline: float) -> bytes:
        fd = process.stdout.fileno()
        chunks, size = [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise OSError("the worker exited")
            newline = chunk.find(b"\n")
            if newline >= 0:
                chunks.append(chunk[:newline])
                if len(chunk) > newline + 1:
                    raise ValueError("the worker sent more than one answer")
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise ValueError("the answer is too large")


_WORKER = _Worker()
atexit.register(_WORKER.stop)
# Rebuilt oracles (each holds its compiled check program), the 64 most recently used.
_CACHE: LRUCache = LRUCache(64)


def shutdown_worker() -> None:
    """Stops the sandbox worker (the next request starts a fresh one)."""
    _WORKER.stop()


def _config_message() -> dict:
    return {"x64": bool(jax.config.jax_enable_x64),
            "jax_numpy_dtype_promotion": str(jax.config.jax_numpy_dtype_promotion),
            "jax_numpy_rank_promotion": str(jax.config.jax_numpy_rank_promotion)}


def trace_in_sandbox(*, source: str | None = None, name: str | None = None, path: str | None = None,
                     rows_shape, rows_dtype="float64", capacity: int, timeout: float = DEFAULT_TIMEOUT_S,
                     extra: dict | None = None) -> dict:
    """Traces an oracle in the worker process and returns its answer, decoded JSON (untrusted).

    Args:
      source: Python source text defining the oracle (or ``path``).
      name: the name of the oracle function in that source.
      path: a file holding the source (read here: the confined worker can read no file).
      rows_shape, rows_dtype, capacity: the abstract block.
      timeout: seconds before the worker is killed and the oracle refused.
      extra: further request fields (closure values, function source; see :func:`sandboxed_oracle`).

    Returns:
      The worker's answer: ``{"version", "jax_version", "jaxpr"}`` or ``{"error"}``. Untrusted.
    """
    if (source is None) == (path is None) or not isinstance(name, str):
        raise ValueError("trace_in_sandbox needs a name and exactly one of source= or path=.")
    message = {"name": name, "rows_shape": [int(d) for d in rows_shape], "rows_dtype": np.dtype(rows_dtype).name,
               "capacity": int(capacity), **_config_message(), **(extra or {})}
    if source is None:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        message.setdefault("filename", os.path.abspath(path))
    message["source"] = source
    return _WORKER.request(message, timeout, name)


def _closure_value(fn, key, value):
    if value is None or isinstance(value, (bool, int, str)) and type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return {"float": value.hex()}
    module = sys.modules.get(fn.__module__)
    if callable(value) and module is not None and getattr(module, getattr(value, "__name__", ""), None) is value:
        return None  # a function of the same module: the module source defines it
    raise OracleRefused(f"oracle {fn.__qualname__!r} refused: it closes over {key!r} of type "
                        f"{type(value).__name__}, which its source does not define; only bool/int/float/str "
                        "closure values are supported (pass source text instead).")


# Requests of closure-free function objects, by identity: reading and hashing a module's source is the only
# per-call cost of the gate for a plain callable, so it is paid once. (A closure's cell values can change,
# so those are rebuilt each time.)
_REQUESTS: "weakref.WeakKeyDictionary[Callable, tuple[str, str, dict]]" = weakref.WeakKeyDictionary()


def _callable_request(fn) -> tuple[str, str, dict]:
    """(module source, name, extra request fields) for a function object."""
    cached = _REQUESTS.get(fn) if inspect.isfunction(fn) else None
    if cached is not None:
        return cached
    request = _build_callable_request(fn)
    if not fn.__closure__:
        _REQUESTS[fn] = request
    return request


def _build_callable_request(fn) -> tuple[str, str, dict]:
    label = getattr(fn, "__qualname__", repr(fn))
    if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
        raise OracleRefused(f"oracle {label!r} refused: only plain (def) functions can be sent to the sandbox "
                            "by reference; pass source= text instead.")
    module = inspect.getmodule(fn)
    try:
        module_source = inspect.getsource(module) if module is not None else ""
        fn_source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise OracleRefused(f"oracle {label!r} refused: its source is not available") from None
    if getattr(module, "__name__", None) == "__main__":
        # A script's top level is the data holder's program (it calls the engine, reads the data): it is never
        # run in the worker. Only its imports, literal constants and function definitions are sent.
        module_source = script_definitions(module_source, label)
    extra: dict = {"filename": getattr(module, "__file__", None) or "<oracle>"}
    cells = fn.__closure__ or ()
    if cells or fn.__qualname__ != fn.__name__:
        closure = {}
        for key, cell in zip(fn.__code__.co_freevars, cells):
            try:
                value = cell.cell_contents
            except ValueError:
                raise OracleRefused(f"oracle {label!r} refused: closure variable {key!r} is unbound") from None
            encoded = _closure_value(fn, key, value)
            if encoded is not None or value is None:
                closure[key] = encoded
        extra["closure"] = closure
        extra["function_source"] = fn_source
    return module_source, fn.__name__, extra


def _is_literal(node) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def script_definitions(source: str, label: str = "oracle") -> str:
    """The part of a script that defines things: imports (but gpuprivacy's), literal constants, functions.

    Everything else at the top level (calls, loops, reading data, starting the engine) is dropped, so
    sandboxing a function defined in ``python study.py`` never re-runs the study.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise OracleRefused(f"oracle {label!r} refused: its script does not parse ({error.msg}, line "
                            f"{error.lineno})") from None
    kept = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            node.names = [a for a in node.names if a.name.split(".")[0] != "gpuprivacy"]
            keep = bool(node.names)
        elif isinstance(node, ast.ImportFrom):
            keep = node.level == 0 and (node.module or "").split(".")[0] != "gpuprivacy"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            keep = True
        elif isinstance(node, ast.Assign):
            keep = all(isinstance(t, ast.Name) for t in node.targets) and _is_literal(node.value)
        elif isinstance(node, ast.AnnAssign):
            keep = isinstance(node.target, ast.Name) and node.value is not None and _is_literal(node.value)
        else:
            keep = False
        if keep:
            kept.append(node)
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def sandboxed_oracle(oracle: Callable | None = None, *, source: str | None = None, name: str | None = None,
                     path: str | None = None, rows_shape, rows_dtype="float64", capacity: int,
                     limits: RebuildLimits | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> Callable:
    """The oracle traced in the sandbox and rebuilt from allowed primitives (cached per oracle and shape).

    Args:
      oracle: a function object (its source is read with :mod:`inspect`; see the module notes), or None.
      source: Python source text defining the oracle (with ``name``).
      name: the oracle's function name in ``source`` / ``path``.
      path: a file holding the source (read by the engine for the cache key, traced by the worker).
      rows_shape: the block shape ``(capacity, ...)``.
      rows_dtype: the block dtype.
      capacity: the block capacity.
      limits: public caps on the rebuilt oracle.
      timeout: seconds for one worker request.

    Returns:
      ``f(rows, valid) -> scalar`` to batch with the engine's own ``jax.vmap``.

    Raises:
      OracleRefused: the oracle failed to trace, or uses anything off the allow-list.
    """
    extra: dict = {}
    if oracle is not None:
        if source is not None or path is not None:
            raise ValueError("pass either an oracle function or source=/path=, not both.")
        source, name, extra = _callable_request(oracle)
        label = getattr(oracle, "__qualname__", name)
    else:
        if not isinstance(name, str) or (source is None) == (path is None):
            raise ValueError("sandboxed_oracle needs an oracle function, or name= with exactly one of source=/path=.")
        if path is not None:
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
            extra = {"filename": os.path.abspath(path)}
        label = name
    rows_shape = tuple(int(d) for d in rows_shape)
    rows_dtype = np.dtype(rows_dtype)
    digest = hashlib.sha256(json.dumps([source, extra], sort_keys=True).encode()).hexdigest()
    key = (digest, name, rows_shape, rows_dtype.name, int(capacity), jax.__version__,
           tuple(sorted(_config_message().items())), limits)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    answer = trace_in_sandbox(source=source, name=name, rows_shape=rows_shape, rows_dtype=rows_dtype,
                              capacity=capacity, timeout=timeout, extra=extra)
    fn = rebuild(answer, rows_shape=rows_shape, rows_dtype=rows_dtype, capacity=capacity, limits=limits,
                 oracle_name=label)
    _CACHE[key] = fn
    return fn
