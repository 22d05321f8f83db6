"""Parsing an untrusted jaxpr tree from the sandbox into checked, engine-side records.

Every key, type, dtype, shape and size is checked here, against the rules of
:mod:`gpuprivacy.oracle._rebuild_rules`; the tree contributes names and plain
data, never objects or code. Refused here: malformed or oversized trees,
primitives off the allow-list, effects, parameter values that are not plain
data (opaque objects, dropped values outside sharding slots, unknown enums and
structures, jaxprs where none belongs), and parameter names a primitive does
not have in JAX 0.10.2 (:func:`~gpuprivacy.oracle._rebuild_params.check_param_names`).
Parameter VALUES are checked against the operands' ranks later, by the
evaluator, right before each primitive is bound.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from gpuprivacy.oracle._rebuild_params import check_param_names
from gpuprivacy.oracle._rebuild_rules import (ALLOWED_PRIMITIVES, INLINED, SCATTERS, _DTYPES, _ENUMS, _IGNORED_KEYS,
                                             _SHARDING_KEYS, _STRUCT_FIELDS, _STRUCTS, RebuildLimits)


# --- parsed representation ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Aval:
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class _Lit:
    value: np.ndarray


@dataclasses.dataclass(frozen=True)
class _Dropped:
    kind: str


@dataclasses.dataclass
class _Eqn:
    primitive: str
    params: dict
    invars: list
    outvars: list  # [(id, _Aval)]


@dataclasses.dataclass
class _Jaxpr:
    constvars: list
    consts: list
    invars: list
    eqns: list
    outvars: list


class _Parser:
    def __init__(self, limits: RebuildLimits, refuse: Callable[[str], Exception]):
        self.limits = limits
        self.refuse = refuse
        self.eqns = 0
        self.const_elements = 0

    def _dict(self, node, keys: set[str], required: set[str], where: str) -> dict:
        if not isinstance(node, dict):
            raise self.refuse(f"{where}: expected an object, got {type(node).__name__}")
        extra = set(node) - keys
        if extra:
            raise self.refuse(f"{where}: unexpected keys {sorted(map(str, extra))}")
        missing = required - set(node)
        if missing:
            raise self.refuse(f"{where}: missing keys {sorted(missing)}")
        return node

    def _list(self, node, where: str) -> list:
        if not isinstance(node, list):
            raise self.refuse(f"{where}: expected a list, got {type(node).__name__}")
        return node

    def _int(self, node, where: str, minimum: int = 0) -> int:
        if type(node) is not int or node < minimum:
            raise self.refuse(f"{where}: expected an integer >= {minimum}, got {node!r:.60}")
        return node

    def dtype(self, node, where: str) -> np.dtype:
        if not isinstance(node, str) or node not in _DTYPES:
            raise self.refuse(f"{where}: dtype {node!r:.60} is not allowed")
        return _DTYPES[node]

    def aval(self, node, where: str) -> _Aval:
        node = self._dict(node, {"shape", "dtype", "weak_type"}, {"shape", "dtype"}, where)
        shape = tuple(self._int(d, f"{where}.shape") for d in self._list(node["shape"], f"{where}.shape"))
        if len(shape) > 32 or math.prod(shape) > self.limits.max_shape_elements:
            raise self.refuse(f"{where}: shape {shape} exceeds the element cap {self.limits.max_shape_elements}")
        if not isinstance(node.get("weak_type", False), bool):
            raise self.refuse(f"{where}: weak_type must be a bool")
        return _Aval(shape, self.dtype(node["dtype"], f"{where}.dtype"))

    def scalar(self, node, dtype: np.dtype, where: str):
        if isinstance(node, bool):
            return node
        if type(node) is int:
            return node
        if isinstance(node, dict) and set(node) == {"float"} and isinstance(node["float"], str):
            try:
                return float.fromhex(node["float"])
            except (ValueError, OverflowError):
                raise self.refuse(f"{where}: bad float {node['float']!r:.60}") from None
        if isinstance(node, dict) and set(node) == {"complex"}:
            parts = self._list(node["complex"], where)
            if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
                raise self.refuse(f"{where}: bad complex value")
            try:
                return complex(float.fromhex(parts[0]), float.fromhex(parts[1]))
            except (ValueError, OverflowError):
                raise self.refuse(f"{where}: bad complex value") from None
        raise self.refuse(f"{where}: not a scalar value: {node!r:.80}")

    def array(self, values, shape: tuple[int, ...], dtype: np.dtype, where: str) -> np.ndarray:
        size = math.prod(shape)
        if size > self.limits.max_const_elements:
            raise self.refuse(f"{where}: constant of {size} elements exceeds the cap {self.limits.max_const_elements}")
        self.const_elements += size
        if self.const_elements > self.limits.max_total_const_elements:
            raise self.refuse(f"{where}: constants exceed the total cap {self.limits.max_total_const_elements}")
        values = self._list(values, where)
        if len(values) != size:
            raise self.refuse(f"{where}: {len(values)} values for shape {shape}")
        try:
            with np.errstate(all="ignore"):
                return np.array([self.scalar(v, dtype, where) for v in values], dtype=dtype).reshape(shape)
        except (OverflowError, ValueError, TypeError):
            raise self.refuse(f"{where}: values do not fit dtype {dtype}") from None

    def const(self, node, where: str) -> np.ndarray:
        node = self._dict(node, {"const", "shape", "dtype"}, {"const", "shape", "dtype"}, where)
        shape = tuple(self._int(d, f"{where}.shape") for d in self._list(node["shape"], f"{where}.shape"))
        return self.array(node["const"], shape, self.dtype(node["dtype"], f"{where}.dtype"), where)

    def atom(self, node, env: dict, where: str):
        if type(node) is int:
            if node not in env:
                raise self.refuse(f"{where}: variable {node} is used before it is bound")
            return node
        node = self._dict(node, {"literal", "shape", "dtype", "weak_type"}, {"literal", "dtype"}, where)
        dtype = self.dtype(node["dtype"], f"{where}.dtype")
        shape = tuple(self._int(d, where) for d in self._list(node.get("shape", []), where))
        values = node["literal"] if shape else [node["literal"]]
        return _Lit(self.array(values, shape, dtype, where))

    def binder(self, node, env: dict, where: str) -> tuple[int, _Aval]:
        node = self._dict(node, {"id", "aval"}, {"id", "aval"}, where)
        ident = self._int(node["id"], f"{where}.id")
        if ident in env:
            raise self.refuse(f"{where}: variable {ident} is bound twice")
        env[ident] = aval = self.aval(node["aval"], f"{where}.aval")
        return ident, aval

    def param(self, node, where: str, depth: int):
        if node is None or isinstance(node, (bool, str)) or type(node) is int:
            return node
        if isinstance(node, list):
            return tuple(self.param(v, where, depth) for v in node)
        if not isinstance(node, dict) or len(node) == 0:
            raise self.refuse(f"{where}: parameter of type {type(node).__name__} is not allowed")
        kind = next(iter(node))
        if kind == "float" and set(node) == {"float"}:
            return self.scalar(node, np.dtype("float64"), where)
        if kind == "dtype" and set(node) == {"dtype"}:
            return self.dtype(node["dtype"], where)
        if kind == "enum":
            node = self._dict(node, {"enum", "member"}, {"enum", "member"}, where)
            cls = _ENUMS.get(node["enum"]) if isinstance(node["enum"], str) else None
            if cls is None or not isinstance(node["member"], str) or node["member"] not in cls.__members__:
                raise self.refuse(f"{where}: enum {node['enum']!r:.60}.{node['member']!r:.60} is not allowed")
            return cls.__members__[node["member"]]
        if kind == "struct":
            node = self._dict(node, {"struct", "fields"}, {"struct", "fields"}, where)
            name = node["struct"]
            if not isinstance(name, str) or name not in _STRUCTS:
                raise self.refuse(f"{where}: structure {name!r:.60} is not allowed")
            fields = self._dict(node["fields"], set(_STRUCT_FIELDS[name]), set(_STRUCT_FIELDS[name]),
                                f"{where}.fields")
            values = {k: self.param(fields[k], f"{where}.{k}", depth) for k in _STRUCT_FIELDS[name]}
            if name == "_LinearSolveTuple":
                return values
            return _STRUCTS[name](**values)
        if kind == "jaxpr" and set(node) == {"jaxpr"}:
            return self.jaxpr(node["jaxpr"], f"{where}.jaxpr", depth + 1)
        if kind == "dropped" and set(node) == {"dropped"}:
            if node["dropped"] not in ("sharding", "mesh", "layout", "callable"):
                raise self.refuse(f"{where}: unknown dropped kind {node['dropped']!r:.60}")
            return _Dropped(node["dropped"])
        if kind == "opaque":
            raise self.refuse(f"{where}: opaque parameter of type {str(node.get('opaque'))[:60]!r}")
        raise self.refuse(f"{where}: parameter {node!r:.80} is not allowed")

    def jaxpr(self, node, where: str, depth: int) -> _Jaxpr:
        if depth > self.limits.max_depth:
            raise self.refuse(f"{where}: jaxprs nest deeper than {self.limits.max_depth}")
        keys = {"constvars", "consts", "invars", "eqns", "outvars", "effects"}
        node = self._dict(node, keys, keys - {"effects"}, where)
        env: dict[int, _Aval] = {}
        constvars = [self.binder(v, env, f"{where}.constvars[{i}]")
                     for i, v in enumerate(self._list(node["constvars"], f"{where}.constvars"))]
        consts = [self.const(c, f"{where}.consts[{i}]") for i, c in enumerate(self._list(node["consts"], where))]
        if len(consts) != len(constvars):
            raise self.refuse(f"{where}: {len(consts)} constants for {len(constvars)} constvars")
        for (_, aval), c in zip(constvars, consts):
            if c.shape != aval.shape or c.dtype != aval.dtype:
                raise self.refuse(f"{where}: a constant does not match its declared type")
        invars = [self.binder(v, env, f"{where}.invars[{i}]")
                  for i, v in enumerate(self._list(node["invars"], f"{where}.invars"))]
        eqns = []
        for i, e in enumerate(self._list(node["eqns"], f"{where}.eqns")):
            self.eqns += 1
            if self.eqns > self.limits.max_eqns:
                raise self.refuse(f"the tree has more than {self.limits.max_eqns} equations")
            eqns.append(self.eqn(e, env, f"{where}.eqns[{i}]", depth))
        outvars = [self.atom(v, env, f"{where}.outvars") for v in self._list(node["outvars"], f"{where}.outvars")]
        if self._list(node.get("effects", []), f"{where}.effects"):  # after the equations: name the primitive
            raise self.refuse(f"{where}: the jaxpr has effects {node['effects']!r:.200}")
        return _Jaxpr(constvars, consts, invars, eqns, outvars)

    def eqn(self, node, env: dict, where: str, depth: int) -> _Eqn:
        keys = {"primitive", "params", "invars", "outvars", "effects"}
        node = self._dict(node, keys, keys - {"effects"}, where)
        name = node["primitive"]
        if not isinstance(name, str):
            raise self.refuse(f"{where}: primitive name must be a string")
        if name not in ALLOWED_PRIMITIVES:
            raise self.refuse(f"primitive {name[:80]!r} is not allowed ({where})")
        where = f"{where} ({name})"
        if self._list(node.get("effects", []), f"{where}.effects"):
            raise self.refuse(f"{where}: the equation has effects {node['effects']!r:.200}")
        raw = self._dict(node["params"], set(node["params"]) if isinstance(node["params"], dict) else set(), set(),
                         f"{where}.params")
        params = {}
        for key, value in raw.items():
            if not isinstance(key, str):
                raise self.refuse(f"{where}: parameter names must be strings")
            if key in _IGNORED_KEYS and isinstance(value, dict) and set(value) == {"enum", "member"}:
                # Parameters the rebuild never binds (jit's ``inline`` became an enum in newer JAX): their
                # value is dropped, so an enum class we do not know is harmless there and nowhere else.
                params[key] = _Dropped("enum")
                continue
            params[key] = self.param(value, f"{where}.params.{key}", depth)
        invars = [self.atom(v, env, f"{where}.invars") for v in self._list(node["invars"], f"{where}.invars")]
        outvars = [self.binder(v, env, f"{where}.outvars[{i}]")
                   for i, v in enumerate(self._list(node["outvars"], f"{where}.outvars"))]
        self._check_params(name, params, where)
        # After the values: a forged value (opaque, dropped, an unknown enum) is named as such.
        check_param_names(name, params, self.refuse, where)
        return _Eqn(name, params, invars, outvars)

    def _check_params(self, name: str, params: dict, where: str) -> None:
        def walk(value, key):
            if isinstance(value, _Jaxpr):
                raise self.refuse(f"{where}: parameter {key!r} may not hold a jaxpr")
            if isinstance(value, _Dropped) and key not in _SHARDING_KEYS:
                raise self.refuse(f"{where}: parameter {key!r} may not be a dropped {value.kind}")
            if isinstance(value, (tuple, list)):
                for v in value:
                    walk(v, key)
            if isinstance(value, dict):
                for v in value.values():
                    walk(v, key)

        if name in INLINED:
            bodies = [k for k in INLINED[name] if k in params]
            if len(bodies) != 1 or not isinstance(params[bodies[0]], _Jaxpr):
                raise self.refuse(f"{where}: expected exactly one body jaxpr in {INLINED[name]}")
            for key, value in params.items():
                if key == bodies[0]:
                    continue
                if isinstance(value, _Jaxpr):
                    raise self.refuse(f"{where}: parameter {key!r} may not hold a jaxpr")
            return
        jaxpr_keys = {"cond": {"branches"}, "while": {"cond_jaxpr", "body_jaxpr"}, "scan": {"jaxpr"},
                      "custom_linear_solve": {"jaxprs"}}.get(name, set())
        for key in jaxpr_keys:
            if key not in params:
                raise self.refuse(f"{where}: missing parameter {key!r}")
        if name == "cond":
            if not params["branches"] or not all(isinstance(b, _Jaxpr) for b in params["branches"]):
                raise self.refuse(f"{where}: branches must be jaxprs")
        elif name == "while":
            if not isinstance(params["cond_jaxpr"], _Jaxpr) or not isinstance(params["body_jaxpr"], _Jaxpr):
                raise self.refuse(f"{where}: cond and body must be jaxprs")
        elif name == "scan":
            if not isinstance(params["jaxpr"], _Jaxpr):
                raise self.refuse(f"{where}: the body must be a jaxpr")
            length = params.get("length")
            if type(length) is not int or length < 0 or length > self.limits.max_scan_length:
                raise self.refuse(f"{where}: scan length {length!r:.40} exceeds the cap {self.limits.max_scan_length}")
        elif name == "custom_linear_solve":
            jaxprs, lengths = params["jaxprs"], params.get("const_lengths")
            if not isinstance(jaxprs, dict) or not isinstance(jaxprs.get("solve"), _Jaxpr) \
                    or not isinstance(lengths, dict) or not all(type(v) is int and v >= 0 for v in lengths.values()):
                raise self.refuse(f"{where}: malformed linear solve")
            return  # the other jaxprs (matvec, ...) are never run
        for key, value in params.items():
            if key in jaxpr_keys:
                continue
            if name in SCATTERS and key in ("update_jaxpr", "update_consts"):
                continue  # rebuilt engine-side by lax.scatter_*
            walk(value, key)


def _check_json(tree, limits: RebuildLimits, refuse) -> None:
    """Plain JSON data only (dict with str keys, list, str, int, float, bool, None), within size caps."""
    stack = [(tree, 0)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > limits.max_tree_nodes:
            raise refuse(f"the tree has more than {limits.max_tree_nodes} nodes")
        if depth > limits.max_tree_nesting:
            raise refuse(f"the tree nests deeper than {limits.max_tree_nesting}")
        if type(node) is dict:
            for k, v in node.items():
                if type(k) is not str:
                    raise refuse("the tree is not JSON data: non-string key")
                stack.append((v, depth + 1))
        elif type(node) is list:
            stack.extend((v, depth + 1) for v in node)
        elif node is not None and type(node) not in (str, int, float, bool):
            raise refuse(f"the tree is not JSON data: {type(node).__name__}")
