"""Engine side of the oracle sandbox: validate an untrusted jaxpr tree and rebuild the oracle.

The sandbox worker (a separate process that holds no data) traces an
analyst's oracle and sends back its jaxpr as plain JSON data. Nothing in that
tree is trusted: the oracle's code ran in the worker and may have rewritten
the worker. :func:`rebuild` therefore

* validates the tree strictly (keys, types, sizes, nesting depth);
* accepts only primitives on an allow-list of pure, deterministic operations
  with JAX's standard batching rules (no custom batching, callbacks, effects,
  collectives or randomness);
* rebuilds the oracle by binding primitive objects it looks up itself, from
  JAX's own modules, by name: the tree contributes names and plain data,
  never objects or code;
* inlines calls (``jit``, ``closed_call``, ``remat``, ``custom_jvp_call``,
  ``custom_vjp_call``, ``custom_linear_solve``): the tree cannot choose
  compiler options, and derivative rules are dropped (the engine only
  evaluates the primal);
* bounds every ``while`` loop by a public iteration limit;
* traces the rebuilt function in the engine and refuses unless it is a
  scalar of a real dtype built only from allowed primitives without effects.

This module must not import the worker module.
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np
from jax import lax

from gpuprivacy.oracle._rebuild_parse import _Aval, _Dropped, _Eqn, _Jaxpr, _Lit, _Parser, _check_json
from gpuprivacy.oracle._rebuild_rules import (ALLOWED_PRIMITIVES, DEFAULT_LIMITS, INLINED, SCATTERS, _PRIMITIVES,
                                             OracleRefused, RebuildLimits)


# --- evaluation -----------------------------------------------------------------------------------

class _Evaluator:
    def __init__(self, limits: RebuildLimits, refuse: Callable[[str], Exception]):
        self.limits = limits
        self.refuse = refuse

    def check(self, value, aval: _Aval, where: str) -> None:
        shape, dtype = tuple(np.shape(value)), np.dtype(getattr(value, "dtype", None) or np.asarray(value).dtype)
        if shape != aval.shape or dtype != aval.dtype:
            raise self.refuse(f"{where}: declared type {aval.dtype}{list(aval.shape)} but computed "
                              f"{dtype}{list(shape)}")

    def run(self, jaxpr: _Jaxpr, args: list, where: str) -> list:
        if len(args) != len(jaxpr.invars):
            raise self.refuse(f"{where}: {len(args)} arguments for {len(jaxpr.invars)} inputs")
        env = {}
        for (ident, aval), c in zip(jaxpr.constvars, jaxpr.consts):
            env[ident] = c
        for (ident, aval), a in zip(jaxpr.invars, args):
            self.check(a, aval, f"{where} input")
            env[ident] = a

        def read(atom):
            return atom.value if isinstance(atom, _Lit) else env[atom]

        for index, eqn in enumerate(jaxpr.eqns):
            here = f"{where}.eqns[{index}] ({eqn.primitive})"
            outs = self.apply(eqn, [read(a) for a in eqn.invars], here)
            if len(outs) != len(eqn.outvars):
                raise self.refuse(f"{here}: {len(outs)} results for {len(eqn.outvars)} declared outputs")
            for (ident, aval), out in zip(eqn.outvars, outs):
                self.check(out, aval, here)
                env[ident] = out
        return [read(a) for a in jaxpr.outvars]

    def apply(self, eqn: _Eqn, args: list, where: str) -> list:
        name, params = eqn.primitive, eqn.params
        if name in INLINED:
            body = next(params[k] for k in INLINED[name] if k in params)
            return self.run(body, args, where)
        if name == "custom_linear_solve":
            lengths = params["const_lengths"]
            order = ("matvec", "vecmat", "solve", "transpose_solve")
            starts = np.cumsum([0] + [lengths.get(k, 0) for k in order])
            if set(lengths) != set(order) or starts[-1] > len(args):
                raise self.refuse(f"{where}: malformed linear solve constants")
            consts = args[starts[2]:starts[3]]
            return self.run(params["jaxprs"]["solve"], list(consts) + list(args[starts[-1]:]), where)
        if name == "cond":
            branches = params["branches"]
            if not args:
                raise self.refuse(f"{where}: cond without an index")
            fns = [lambda *ops, b=b, i=i: tuple(self.run(b, list(ops), f"{where}.branches[{i}]"))
                   for i, b in enumerate(branches)]
            return list(lax.switch(args[0], fns, *args[1:]))
        if name == "while":
            return self.while_loop(params, args, where)
        if name == "scan":
            return self.scan(params, args, where)
        if name in SCATTERS:
            if len(args) != 3:
                raise self.refuse(f"{where}: scatter takes 3 operands")
            kwargs = {k: params[k] for k in ("indices_are_sorted", "unique_indices", "mode") if k in params}
            extra = set(params) - {"dimension_numbers", "indices_are_sorted", "unique_indices", "mode",
                                   "update_jaxpr", "update_consts"}
            if extra:
                raise self.refuse(f"{where}: unexpected parameters {sorted(extra)}")
            return [SCATTERS[name](*args, params["dimension_numbers"], **kwargs)]
        primitive = _PRIMITIVES.get(name)
        if primitive is None:
            raise self.refuse(f"primitive {name!r} is not available in this JAX")
        bound = {k: (None if isinstance(v, _Dropped) else v) for k, v in params.items()}
        out = primitive.bind(*args, **bound)
        return list(out) if primitive.multiple_results else [out]

    def while_loop(self, params, args, where):
        cn, bn = params.get("cond_nconsts"), params.get("body_nconsts")
        if type(cn) is not int or type(bn) is not int or cn < 0 or bn < 0 or cn + bn > len(args):
            raise self.refuse(f"{where}: malformed while constants")
        extra = set(params) - {"cond_nconsts", "body_nconsts", "cond_jaxpr", "body_jaxpr"}
        if extra:
            raise self.refuse(f"{where}: unexpected parameters {sorted(extra)}")
        cconsts, bconsts, init = args[:cn], args[cn:cn + bn], args[cn + bn:]
        limit = np.int64(self.limits.max_while_iterations)

        def cond(carry):
            count, vals = carry
            (keep,) = self.run(params["cond_jaxpr"], list(cconsts) + list(vals), f"{where}.cond")
            return lax.bitwise_and(lax.lt(count, limit), keep)

        def body(carry):
            count, vals = carry
            return count + np.int64(1), tuple(self.run(params["body_jaxpr"], list(bconsts) + list(vals),
                                                       f"{where}.body"))

        _, out = lax.while_loop(cond, body, (np.int64(0), tuple(init)))
        return list(out)

    def scan(self, params, args, where):
        nc, nk, length = params.get("num_consts"), params.get("num_carry"), params["length"]
        if type(nc) is not int or type(nk) is not int or nc < 0 or nk < 0 or nc + nk > len(args):
            raise self.refuse(f"{where}: malformed scan counts")
        extra = set(params) - {"num_consts", "num_carry", "length", "jaxpr", "reverse", "unroll", "linear",
                               "_split_transpose"}
        if extra:
            raise self.refuse(f"{where}: unexpected parameters {sorted(extra)}")
        reverse, unroll = params.get("reverse", False), params.get("unroll", 1)
        if not isinstance(reverse, bool) or not (isinstance(unroll, bool) or type(unroll) is int and unroll >= 0):
            raise self.refuse(f"{where}: malformed scan options")
        consts, init, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]

        def body(carry, x):
            outs = self.run(params["jaxpr"], list(consts) + list(carry) + list(x), f"{where}.body")
            return tuple(outs[:nk]), tuple(outs[nk:])

        carry, ys = lax.scan(body, tuple(init), tuple(xs), length=length, reverse=reverse,
                             unroll=max(1, min(int(unroll), max(length, 1))))
        return list(carry) + list(ys)


# --- the entry point ------------------------------------------------------------------------------

def _walk_primitives(jaxpr, names: set, effects: list) -> None:
    from jax._src import core
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        if eqn.effects:
            effects.append(eqn.primitive.name)
        for sub in core.jaxprs_in_params(eqn.params):
            _walk_primitives(sub, names, effects)


# Primitives the engine's own rebuild may emit around allowed ones (lax.switch's index clamp, loops).
_ENGINE_EMITTED = frozenset({"cond", "while", "scan", "jit", "pjit", "clamp", "convert_element_type"})


def rebuild(tree: dict, *, rows_shape, rows_dtype, capacity: int, limits: RebuildLimits | None = None,
            oracle_name: str = "oracle") -> Callable:
    """Validates an untrusted jaxpr tree from the sandbox and rebuilds the oracle from allowed primitives.

    Args:
      tree: the decoded JSON response of the worker (``{"version", "jax_version", "jaxpr"}``) or its
        ``"jaxpr"`` member.
      rows_shape: the block's shape ``(capacity, ...)``.
      rows_dtype: the block's dtype.
      capacity: the block's capacity (``valid`` is ``bool[capacity]``).
      limits: public caps (:class:`RebuildLimits`); the defaults when omitted.
      oracle_name: named in refusals.

    Returns:
      ``f(rows, valid) -> scalar``, an ordinary JAX function built only from allowed primitives.

    Raises:
      OracleRefused: the tree is malformed, too large, uses a primitive or parameter off the
        allow-list, or does not rebuild into a scalar of a real dtype on the expected inputs.
    """
    limits = DEFAULT_LIMITS if limits is None else limits

    def refuse(cause: str) -> OracleRefused:
        return OracleRefused(f"oracle {oracle_name!r} refused: {cause}")

    _check_json(tree, limits, refuse)
    if not isinstance(tree, dict):
        raise refuse("the sandbox answer is not an object")
    if "error" in tree:
        raise refuse(f"tracing failed in the sandbox: {str(tree['error'])[:2000]}")
    if "jaxpr" in tree:
        if set(tree) - {"jaxpr", "version", "jax_version"}:
            raise refuse(f"unexpected keys {sorted(set(tree) - {'jaxpr', 'version', 'jax_version'})}")
        if tree.get("jax_version", jax.__version__) != jax.__version__:
            raise refuse(f"the sandbox ran JAX {tree.get('jax_version')!r:.40}, the engine {jax.__version__}")
        tree = tree["jaxpr"]
    parser = _Parser(limits, refuse)
    top = parser.jaxpr(tree, "jaxpr", 0)

    rows_shape = tuple(int(d) for d in rows_shape)
    rows_dtype = np.dtype(rows_dtype)
    expected = [_Aval(rows_shape, rows_dtype), _Aval((int(capacity),), np.dtype(bool))]
    if [aval for _, aval in top.invars] != expected:
        raise refuse(f"the jaxpr's inputs {[(a.dtype.name, a.shape) for _, a in top.invars]} are not the block "
                     f"{[(a.dtype.name, a.shape) for a in expected]}")
    if len(top.outvars) != 1:
        raise refuse(f"the oracle must return one scalar, the jaxpr has {len(top.outvars)} outputs")
    evaluator = _Evaluator(limits, refuse)

    def rebuilt(rows, valid):
        (out,) = evaluator.run(top, [rows, valid], "jaxpr")
        return out

    try:
        closed = jax.make_jaxpr(rebuilt)(jax.ShapeDtypeStruct(rows_shape, rows_dtype),
                                         jax.ShapeDtypeStruct((int(capacity),), np.dtype(bool)))
    except OracleRefused:
        raise
    except Exception as exc:  # noqa: BLE001  (any failure of an untrusted tree is a refusal)
        raise refuse(f"the tree does not rebuild: {type(exc).__name__}: {str(exc)[:500]}") from None
    (out_aval,) = closed.out_avals
    if out_aval.shape != () or not (np.issubdtype(out_aval.dtype, np.floating)
                                    or np.issubdtype(out_aval.dtype, np.integer)):
        raise refuse(f"the oracle must return a scalar of a real dtype, got {out_aval.dtype}{list(out_aval.shape)}")
    names: set[str] = set()
    effects: list[str] = []
    _walk_primitives(closed.jaxpr, names, effects)
    stray = names - ALLOWED_PRIMITIVES - _ENGINE_EMITTED
    if stray or effects or closed.jaxpr.effects:
        raise refuse(f"the rebuilt oracle contains {sorted(stray)} / effects {effects}")
    rebuilt.__name__ = f"sandboxed_{oracle_name}".replace(" ", "_")[:80]
    return rebuilt
