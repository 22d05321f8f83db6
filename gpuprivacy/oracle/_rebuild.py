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
* checks every parameter engine-side, right before binding, against the
  UNBATCHED operands' ranks (:mod:`gpuprivacy.oracle._rebuild_params`):
  exact parameter names, axes that are Python ints in ``[0, rank)`` without
  duplicates, sizes that add up. JAX's own shape rules are not enough: they
  accept values (``sort`` with ``dimension=-1``) whose meaning changes once
  the engine vmaps the oracle, letting one subset see another's data;
* bounds the work of one evaluation (one subset) by a single public budget,
  :attr:`RebuildLimits.max_work` loop iterations across all loops, nested or
  not: ``scan`` iterations are counted when the tree is rebuilt (an oracle
  over budget is refused), ``while`` iterations at run time by one counter
  threaded through the whole oracle, so nested loops cannot multiply it;
* traces the rebuilt function in the engine and refuses unless it is a
  scalar of a real dtype built only from allowed primitives without effects,
  then compiles the unbatched function once and refuses it if that fails.

Honest oracles are rebuilt to the same operations, so ``jax.vmap`` of the
rebuilt function equals ``jax.vmap`` of the original bit for bit unless a
``while`` loop reaches the budget (that evaluation is then NaN, a non-response) or an integer
result of an oracle with a ``while`` loop (then a float of the same value).

This module must not import the worker module.
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np
from jax import lax

from gpuprivacy.oracle._rebuild_params import check_param_values
from gpuprivacy.oracle._rebuild_parse import _Aval, _Dropped, _Eqn, _Jaxpr, _Lit, _Parser, _check_json
from gpuprivacy.oracle._rebuild_rules import (ALLOWED_PRIMITIVES, DEFAULT_LIMITS, INLINED, SCATTERS, _PRIMITIVES,
                                             OracleRefused, RebuildLimits)


# --- the work budget ------------------------------------------------------------------------------

def _static_work(jaxpr: _Jaxpr, limits: RebuildLimits, refuse: Callable[[str], Exception], where: str,
                 work_of: dict[int, int]) -> int:
    """Loop iterations a jaxpr runs whatever its data; fills ``work_of`` for it and every jaxpr inside.

    A ``scan`` of length ``n`` costs ``n * (1 + body)``, a ``cond`` all its branches, an inlined call
    its body, a ``while`` loop its first test only: its iterations are charged at run time (each costs
    ``1 + body + cond``). Refuses a jaxpr whose static work alone exceeds ``limits.max_work``; the
    sums therefore stay below ``max_work * max_scan_length``.
    """
    def sub(inner: _Jaxpr, label: str) -> int:
        return _static_work(inner, limits, refuse, label, work_of)

    total = 0
    for index, eqn in enumerate(jaxpr.eqns):
        name, params, here = eqn.primitive, eqn.params, f"{where}.eqns[{index}] ({eqn.primitive})"
        if name == "scan":
            cost = params["length"] * (1 + sub(params["jaxpr"], f"{here}.body"))
        elif name == "cond":
            # Every branch: under the engine's vmap, subsets that disagree on the index run them all.
            cost = sum(sub(b, f"{here}.branches[{i}]") for i, b in enumerate(params["branches"]))
        elif name == "while":
            sub(params["body_jaxpr"], f"{here}.body")
            cost = sub(params["cond_jaxpr"], f"{here}.cond")
        elif name in INLINED:
            cost = sub(next(params[k] for k in INLINED[name] if k in params), here)
        elif name == "custom_linear_solve":
            cost = sub(params["jaxprs"]["solve"], f"{here}.solve")  # the only one the rebuild runs
        else:
            cost = 0
        total += cost
        if total > limits.max_work:
            raise refuse(f"{here}: its loops run at least {total} iterations whatever the data, more than the "
                         f"work budget max_work={limits.max_work}")
    work_of[id(jaxpr)] = total
    return total


# --- evaluation -----------------------------------------------------------------------------------

class _Evaluator:
    """Runs a parsed jaxpr by binding allowed primitives, threading the work counter through it.

    ``run`` takes and returns ``work``, an int64 scalar: the iterations this evaluation has been
    charged so far. Static work is charged by whoever runs a jaxpr (``rebuild`` charges the top
    jaxpr's up front, a ``while`` iteration its body's and test's); ``while`` iterations add to it at
    run time and stop before it would pass ``max_work``.
    """

    def __init__(self, limits: RebuildLimits, refuse: Callable[[str], Exception], work_of: dict[int, int]):
        self.limits = limits
        self.refuse = refuse
        self.work_of = work_of
        self.has_while = False  # set while tracing: the oracle has a loop the budget can cut

    def check(self, value, aval: _Aval, where: str) -> None:
        shape, dtype = tuple(np.shape(value)), np.dtype(getattr(value, "dtype", None) or np.asarray(value).dtype)
        if shape != aval.shape or dtype != aval.dtype:
            raise self.refuse(f"{where}: declared type {aval.dtype}{list(aval.shape)} but computed "
                              f"{dtype}{list(shape)}")

    def run(self, jaxpr: _Jaxpr, args: list, where: str, work) -> tuple[list, object]:
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
            outs, work = self.apply(eqn, [read(a) for a in eqn.invars], here, work)
            if len(outs) != len(eqn.outvars):
                raise self.refuse(f"{here}: {len(outs)} results for {len(eqn.outvars)} declared outputs")
            for (ident, aval), out in zip(eqn.outvars, outs):
                self.check(out, aval, here)
                env[ident] = out
        return [read(a) for a in jaxpr.outvars], work

    def apply(self, eqn: _Eqn, args: list, where: str, work) -> tuple[list, object]:
        name = eqn.primitive
        params = {k: (None if isinstance(v, _Dropped) else v) for k, v in eqn.params.items()}
        # Engine-side, against the UNBATCHED operands: JAX's shape rules accept values (a negative
        # axis) whose meaning changes once the engine vmaps the oracle.
        check_param_values(name, params, args, self.refuse, where)
        if name in INLINED:
            body = next(params[k] for k in INLINED[name] if k in params)
            return self.run(body, args, where, work)
        if name == "custom_linear_solve":
            lengths = params["const_lengths"]
            order = ("matvec", "vecmat", "solve", "transpose_solve")
            starts = np.cumsum([0] + [lengths[k] for k in order])
            if starts[-1] > len(args):
                raise self.refuse(f"{where}: malformed linear solve constants")
            consts = args[starts[2]:starts[3]]
            return self.run(params["jaxprs"]["solve"], list(consts) + list(args[starts[-1]:]), where, work)
        if name == "cond":
            return self.cond(params, args, where, work)
        if name == "while":
            return self.while_loop(params, args, where, work)
        if name == "scan":
            return self.scan(params, args, where, work)
        if name in SCATTERS:
            kwargs = {k: params[k] for k in ("indices_are_sorted", "unique_indices", "mode")}
            return [SCATTERS[name](*args, params["dimension_numbers"], **kwargs)], work
        primitive = _PRIMITIVES.get(name)
        if primitive is None:
            raise self.refuse(f"primitive {name!r} is not available in this JAX")
        out = primitive.bind(*args, **params)
        return (list(out) if primitive.multiple_results else [out]), work

    def cond(self, params, args, where, work):
        if not args:
            raise self.refuse(f"{where}: cond without an index")
        branches = params["branches"]
        # lax.switch clamps the index the same way; clamping a cond's index (already in range) is exact.
        index = lax.clamp(np.int32(0), lax.convert_element_type(args[0], np.int32), np.int32(len(branches) - 1))
        # Under the engine's vmap, subsets that disagree on the index make JAX run EVERY branch and
        # select the results; a branch a subset did not take gets an exhausted counter, so its loops
        # do not iterate for that subset (unbatched, the branch taken gets the counter unchanged).
        exhausted = np.int64(self.limits.max_work)
        counters = tuple(lax.select(lax.eq(index, np.int32(i)), work, exhausted) for i in range(len(branches)))

        def branch(i, jaxpr):
            def fn(counters, *ops):
                outs, spent = self.run(jaxpr, list(ops), f"{where}.branches[{i}]", counters[i])
                return tuple(outs), spent
            return fn

        outs, work = lax.switch(index, [branch(i, b) for i, b in enumerate(branches)], counters, *args[1:])
        return list(outs), work

    def while_loop(self, params, args, where, work):
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        if cn + bn > len(args):
            raise self.refuse(f"{where}: malformed while constants")
        cconsts, bconsts, init = args[:cn], args[cn:cn + bn], args[cn + bn:]
        test, body = params["cond_jaxpr"], params["body_jaxpr"]
        # One iteration costs itself, its body's static work and the test that follows it.
        cost = 1 + self.work_of[id(body)] + self.work_of[id(test)]
        last_start = np.int64(self.limits.max_work - cost)  # an iteration starting later would end past the budget
        exhausted = np.int64(self.limits.max_work)

        def keep_going(vals, work):
            (keep,), work = self.run(test, list(cconsts) + list(vals), f"{where}.cond", work)
            return keep, work

        def live(work, keep):
            return lax.bitwise_and(keep, lax.le(work, last_start))

        # The test runs inside the carried state (the loop is rotated: test, then body + test per
        # iteration), because loops inside the test spend the counter too and lax.while_loop's
        # condition cannot return what it spent.
        keep, work = keep_going(init, work)

        def step(carry):
            work, keep, vals = carry
            # Under the engine's vmap the body also runs for subsets whose loop has ended (JAX keeps
            # their old state afterwards); they get an exhausted counter, so loops inside do not
            # iterate for them. Unbatched, the body only runs when ``live`` holds.
            work = lax.select(live(work, keep), work + np.int64(cost), exhausted)
            vals, work = self.run(body, list(bconsts) + list(vals), f"{where}.body", work)
            keep, work = keep_going(vals, work)
            return work, keep, tuple(vals)

        work, keep, out = lax.while_loop(lambda carry: live(*carry[:2]), step,
                                         (lax.convert_element_type(work, np.int64), keep, tuple(init)))
        # The loop ends with its test still true only when the budget cut it: the counter then passes
        # max_work, which stops every enclosing loop and makes the whole evaluation a non-response.
        self.has_while = True
        return list(out), lax.select(keep, np.int64(self.limits.max_work) + np.int64(1), work)

    def scan(self, params, args, where, work):
        nc, nk, length = params["num_consts"], params["num_carry"], params["length"]
        if nc + nk > len(args):
            raise self.refuse(f"{where}: malformed scan counts")
        consts, init, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]

        # The scan's own iterations were charged statically; the counter is carried so that while
        # loops in the body see what earlier iterations spent.
        def body(carry, x):
            work, vals = carry
            outs, work = self.run(params["jaxpr"], list(consts) + list(vals) + list(x), f"{where}.body", work)
            return (work, tuple(outs[:nk])), tuple(outs[nk:])

        unroll = params["unroll"]
        (work, carry), ys = lax.scan(body, (lax.convert_element_type(work, np.int64), tuple(init)), tuple(xs),
                                     length=length, reverse=params["reverse"],
                                     unroll=max(1, min(int(unroll), max(length, 1))))
        return list(carry) + list(ys), work


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
            oracle_name: str = "oracle", cut_to_nan: bool = True) -> Callable:
    """Validates an untrusted jaxpr tree from the sandbox and rebuilds the oracle from allowed primitives.

    Args:
      tree: the decoded JSON response of the worker (``{"version", "jax_version", "jaxpr"}``) or its
        ``"jaxpr"`` member.
      rows_shape: the block's shape ``(capacity, ...)``.
      rows_dtype: the block's dtype.
      capacity: the block's capacity (``valid`` is ``bool[capacity]``).
      limits: public caps (:class:`RebuildLimits`); the defaults when omitted.
      oracle_name: named in refusals.
      cut_to_nan: an evaluation whose ``while`` loop the work budget cut returns NaN (the default);
        ``False`` returns the cut loop's state instead (for tests of the budget's accounting only: that
        state is not the oracle's answer).

    Returns:
      ``f(rows, valid) -> scalar``, an ordinary JAX function built only from allowed primitives. If
      the oracle has a ``while`` loop, the scalar is a float (an integer result is converted to the
      default float dtype) and is NaN, a non-response, for an evaluation whose loops reached
      ``limits.max_work``: which evaluations did depends on the data, so it is never reported apart
      from the value itself, which the releases map to their public NaN value like any NaN answer.

    Raises:
      OracleRefused: the tree is malformed or too large; uses a primitive off the allow-list, a
        parameter name that primitive does not have in JAX 0.10.2, or a parameter value that is not
        valid for its unbatched operands (a negative, out-of-range or repeated axis, a bool where an
        int belongs, sizes that do not add up); its loops run more than ``limits.max_work``
        iterations whatever the data; or it does not rebuild, trace and compile into a scalar of a
        real dtype on the expected inputs.
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
    work_of: dict[int, int] = {}
    static_work = np.int64(_static_work(top, limits, refuse, "jaxpr", work_of))
    evaluator = _Evaluator(limits, refuse, work_of)

    def rebuilt(rows, valid):
        # The counter starts at the static work of the whole oracle: while loops spend only the rest.
        (out,), work = evaluator.run(top, [rows, valid], "jaxpr", static_work)
        if not evaluator.has_while or not cut_to_nan:
            return out
        # A while loop cut by the budget leaves a state that is not the oracle's answer: the evaluation
        # is a non-response (NaN, which every release maps to its public NaN value), never that state.
        out = out if np.issubdtype(out.dtype, np.floating) else lax.convert_element_type(
            out, jax.dtypes.canonicalize_dtype(np.float64))
        return lax.select(lax.gt(work, np.int64(limits.max_work)), np.array(np.nan, out.dtype), out)

    structs = (jax.ShapeDtypeStruct(rows_shape, rows_dtype), jax.ShapeDtypeStruct((int(capacity),), np.dtype(bool)))
    try:
        closed = jax.make_jaxpr(rebuilt)(*structs)
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
    try:
        # A backstop: JAX's shape rules let through what its lowering rejects (a negative reduction
        # axis, before the parameter schema refused it). Compiled once here, unbatched, such a tree is
        # refused before any data is touched instead of failing inside the engine's batched program.
        jax.jit(rebuilt).lower(*structs).compile()
    except OracleRefused:
        raise
    except Exception as exc:  # noqa: BLE001  (any failure of an untrusted tree is a refusal)
        raise refuse(f"the rebuilt oracle does not compile: {type(exc).__name__}: {str(exc)[:500]}") from None
    rebuilt.__name__ = f"sandboxed_{oracle_name}".replace(" ", "_")[:80]
    return rebuilt
