"""Which oracles run where: untrusted code in the sandbox, trusted code in the engine's process.

Every oracle the engine evaluates passes through :func:`resolve_oracle`
once per (oracle, block shape), before any data is touched:

* :func:`untrusted` oracles (source text or a file, e.g.
  ``untrusted("analyst.py", "f")``) are traced only inside the sandbox worker
  and rebuilt here from allowed primitives (:mod:`gpuprivacy.oracle._sandbox`);
  the analyst's Python never runs in the process that holds the data.
* a plain callable is treated as untrusted too (fail closed): its module's
  source is sent to the sandbox, so whatever that module did at import has
  already run beside the data (documented; prefer :func:`untrusted`). A
  callable whose source cannot be sent (a lambda, a closure over objects) is
  refused, with the two ways out in the message.
* :func:`trusted` oracles (code the data holder wrote and vouches for) and the
  package's own oracles run in-process: the trusted fast path, no worker, no
  re-trace. It trusts the code with the whole batch and the process.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import weakref
from typing import Any, Callable

from gpuprivacy.oracle._rebuild_rules import OracleRefused
from gpuprivacy.oracle._sandbox import sandboxed_oracle

# The package's own oracles and oracle factories (identity, not a flag an oracle could set on itself).
_LIBRARY: "weakref.WeakSet[Callable]" = weakref.WeakSet()
_FACTORIES: "weakref.WeakSet[Callable]" = weakref.WeakSet()


def library_oracle(fn: Callable) -> Callable:
    """Marks one of the package's own oracles as trusted (used by :mod:`gpuprivacy.oracle`'s library)."""
    _LIBRARY.add(fn)
    return fn


def library_factory(factory: Callable) -> Callable:
    """Wraps one of the package's oracle factories: what it builds is trusted, and passing the factory
    itself where an oracle is expected is a clear error."""
    @functools.wraps(factory)
    def build(*args, **kwargs):
        return library_oracle(factory(*args, **kwargs))

    _FACTORIES.add(build)
    return build


@dataclasses.dataclass(frozen=True, eq=False)
class TrustedOracle:
    """An oracle the data holder vouches for: it runs in the engine's process, unsandboxed.

    Build with :func:`trusted`. Calling it calls the wrapped function.
    """

    fn: Callable

    def __call__(self, rows, valid):
        return self.fn(rows, valid)


@dataclasses.dataclass(frozen=True)
class UntrustedOracle:
    """An analyst's oracle given as source: it is only ever traced inside the sandbox worker.

    Build with :func:`untrusted`. It cannot be called directly: pass it to
    :func:`~gpuprivacy.oracle.evaluate`, the privacy wrappers or the black-box
    estimators, which trace it in the sandbox and evaluate the rebuilt program.
    """

    source: str
    name: str
    origin: str = "<string>"

    def __call__(self, rows, valid):
        raise TypeError(f"untrusted oracle {self.name!r} ({self.origin}) runs only inside gpuprivacy's engine: "
                        "pass it to gpuprivacy.oracle.evaluate, a privacy wrapper or a black-box estimator.")

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class PaddedOracle:
    """An oracle that is not trusted, to be run behind a public block size (see
    :func:`~gpuprivacy.oracle.padded_oracle`): traced in the sandbox at ``capacity``, padded after the rebuild.
    """

    oracle: Any
    capacity: int

    def __call__(self, rows, valid):
        raise TypeError("a padded untrusted oracle runs only inside gpuprivacy's engine: pass it to "
                        "gpuprivacy.oracle.evaluate, a privacy wrapper or a black-box estimator.")


def pad_block(oracle_fn: Callable, capacity: int) -> Callable:
    """``oracle_fn`` on blocks zero-padded (invalid slots) to ``capacity`` rows, returning a float64 scalar."""
    import jax.numpy as jnp

    def padded(rows, valid):
        extra = capacity - rows.shape[0]
        if extra < 0:
            raise ValueError(f"a block of {rows.shape[0]} rows does not fit the padded capacity {capacity}.")
        pad_rows = jnp.zeros((extra,) + rows.shape[1:], rows.dtype)
        value = oracle_fn(jnp.concatenate([rows, pad_rows]), jnp.concatenate([valid, jnp.zeros(extra, bool)]))
        value = jnp.asarray(value)
        if value.shape != ():
            raise ValueError(f"the oracle must return a scalar, got shape {value.shape}. Reduce it to one number.")
        return value.astype(jnp.float64)
    return padded


def trusted(fn: Callable) -> TrustedOracle:
    """Marks ``fn`` as trusted: the engine runs it in its own process, without the sandbox.

    Use it for statistics you wrote yourself (and for lambdas and closures,
    which the sandbox cannot receive). A trusted oracle sees what JAX shows
    any function in the engine's process (the whole vmapped batch to a
    custom batching rule, callbacks, Python introspection); never use it for
    code an analyst sent you.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy import oracle, subsets
      >>> f = oracle.trusted(lambda rows, valid: (rows * valid.astype(rows.dtype)).sum())
      >>> oracle.evaluate(f, np.arange(4.0), subsets.removals(4, 1)).tolist()
      [6.0, 6.0, 5.0, 4.0, 3.0]
    """
    if isinstance(fn, (TrustedOracle, UntrustedOracle, PaddedOracle)):
        raise TypeError(f"trusted() takes a plain function, got a {type(fn).__name__}.")
    if not callable(fn):
        raise TypeError(f"trusted() takes a function f(rows, valid) -> value, got {fn!r}.")
    return TrustedOracle(fn)


def untrusted(path_or_function: Any = None, name: str | None = None, *, source: str | None = None) -> UntrustedOracle:
    """An analyst's oracle, loaded only inside the sandbox: ``untrusted("analyst.py", "f")``.

    Args:
      path_or_function: a path to a Python file that defines the oracle, or
        None with ``source=``.
      name: the oracle's function name in that file or source.
      source: the oracle's Python source text (instead of a path).

    Returns:
      An :class:`UntrustedOracle` to pass wherever an oracle is expected.

    Raises:
      ValueError / TypeError: neither or both of a path and ``source``, a
        missing name, an unreadable file.

    Examples:
      >>> from gpuprivacy import oracle
      >>> f = oracle.untrusted(source="import jax.numpy as jnp\\n"
      ...                             "def f(rows, valid):\\n"
      ...                             "    return jnp.where(valid, rows, 0.0).sum()\\n", name="f")
      >>> f.name
      'f'
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"untrusted() needs name=, the oracle's function name in the source, got {name!r}.")
    if (path_or_function is None) == (source is None):
        raise ValueError("untrusted() takes exactly one of a file path or source= text, e.g. "
                         "untrusted('analyst.py', 'f') or untrusted(source=text, name='f').")
    if source is not None:
        if not isinstance(source, str):
            raise TypeError(f"source must be Python source text (str), got {type(source).__name__}.")
        return UntrustedOracle(source, name)
    if not isinstance(path_or_function, (str, os.PathLike)):
        raise TypeError(f"untrusted() takes a file path (or source=), got {type(path_or_function).__name__}. For a "
                        "function object, pass it directly: plain callables are sandboxed by default.")
    path = os.fspath(path_or_function)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as error:
        raise ValueError(f"cannot read the oracle file {path!r}: {error.strerror}. Pass an existing .py file.") from None
    return UntrustedOracle(text, name, os.path.abspath(path))


def is_trusted(oracle: Any) -> bool:
    """Whether ``oracle`` runs in-process: a :class:`TrustedOracle` or one of the package's own oracles."""
    if isinstance(oracle, TrustedOracle):
        return True
    try:
        return oracle in _LIBRARY
    except TypeError:  # unhashable
        return False


_FACTORY_EXAMPLES = {"quantile": "0.5", "trimmed_mean": "0.1", "clipped_mean": "0.0, 1.0", "least_squares": "",
                     "logistic_regression": ""}


def resolve_oracle(oracle: Any, *, rows_shape, rows_dtype, capacity: int) -> Callable:
    """The JAX function the engine will batch for ``oracle`` on blocks ``rows_shape`` (the one gate).

    Trusted and library oracles come back as they are; everything else is
    traced in the sandbox and rebuilt from allowed primitives (cached per
    oracle and shape), or refused with :class:`OracleRefused` before any data
    is touched.
    """
    if isinstance(oracle, TrustedOracle):
        return oracle.fn
    if is_trusted(oracle):
        return oracle
    if isinstance(oracle, PaddedOracle):
        if rows_shape[0] > oracle.capacity:
            raise ValueError(f"blocks of {rows_shape[0]} rows do not fit the padded oracle's capacity "
                             f"{oracle.capacity}; pad to at least {rows_shape[0]}.")
        inner = resolve_oracle(oracle.oracle, rows_shape=(oracle.capacity,) + tuple(rows_shape[1:]),
                               rows_dtype=rows_dtype, capacity=oracle.capacity)
        return pad_block(inner, oracle.capacity)
    try:
        is_factory = oracle in _FACTORIES
    except TypeError:
        is_factory = False
    if isinstance(oracle, UntrustedOracle):
        return sandboxed_oracle(source=oracle.source, name=oracle.name, rows_shape=rows_shape,
                                rows_dtype=rows_dtype, capacity=capacity)
    if is_factory:
        raise TypeError(f"{oracle.__name__} is an oracle factory, not an oracle: call it to build one, e.g. "
                        f"gpuprivacy.oracle.{oracle.__name__}({_FACTORY_EXAMPLES.get(oracle.__name__, '')}).")
    if not callable(oracle):
        raise TypeError(f"oracle_fn must be callable f(rows, valid) -> value, got {oracle!r}.")
    try:
        return sandboxed_oracle(oracle, rows_shape=rows_shape, rows_dtype=rows_dtype, capacity=capacity)
    except OracleRefused as error:
        raise OracleRefused(f"{error} Untrusted oracles are traced in a sandbox process from their source. If "
                            "you wrote this oracle yourself, wrap it in gpuprivacy.oracle.trusted(f) to run it "
                            "in-process; for an analyst's code, pass gpuprivacy.oracle.untrusted('file.py', 'f') "
                            "or untrusted(source=text, name='f').") from None
