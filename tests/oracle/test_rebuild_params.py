"""The rebuild's parameter schema and global work budget (issue 27, items 3 and 4).

Trees are built in-process (``encode_closed_jaxpr(jax.make_jaxpr(f)(...))``) and rebuilt directly,
without the sandbox worker: the properties here are the engine's, whatever the worker sends.
"""

from __future__ import annotations

import copy
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from gpuprivacy.oracle._rebuild import OracleRefused, RebuildLimits, rebuild
from gpuprivacy.oracle._rebuild_params import PARAM_SCHEMA
from gpuprivacy.oracle._rebuild_rules import ALLOWED_PRIMITIVES
from gpuprivacy.oracle._sandbox_worker import encode_closed_jaxpr

CAP = 4
BATCH = 3
ROWS_1D = (CAP,)
ROWS_2D = (CAP, 3)
# A constant projection: under vmap, ``W @ rows`` puts the subsets axis LAST (dot_general's batching rule
# appends the rhs's free dimensions), which is what a negative axis then names.
W = np.arange(2 * CAP, dtype=np.float64).reshape(2, CAP) / 7.0 - 0.5


def _structs(shape):
    return jax.ShapeDtypeStruct(shape, np.float64), jax.ShapeDtypeStruct((CAP,), np.bool_)


def _tree(f, shape=ROWS_1D):
    return {"jaxpr": encode_closed_jaxpr(jax.make_jaxpr(f)(*_structs(shape))), "jax_version": jax.__version__}


def _rebuild(tree, shape=ROWS_1D, **kw):
    return rebuild(tree, rows_shape=shape, rows_dtype=np.float64, capacity=CAP, oracle_name="f", **kw)


def _blocks(shape, batch=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(batch,) + shape)
    valid = np.arange(CAP)[None, :] < rng.integers(1, CAP + 1, size=(batch, 1))
    return jnp.asarray(rows), jnp.asarray(valid)


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint64) if x.dtype == np.float64 else x


def _vmap_equals_loop(f, shape, seed=0):
    rows, valid = _blocks(shape, seed=seed)
    batched = jax.jit(jax.vmap(f))(rows, valid)
    one = jax.jit(f)
    looped = np.stack([np.asarray(one(rows[i], valid[i])) for i in range(BATCH)])
    return np.array_equal(_bits(batched), _bits(looped))


def _eqns(jaxpr_node):
    """Every equation of an encoded jaxpr, nested ones included."""
    for eqn in jaxpr_node["eqns"]:
        yield eqn
        for value in eqn["params"].values():
            stack = [value]
            while stack:
                v = stack.pop()
                if isinstance(v, dict) and set(v) == {"jaxpr"}:
                    yield from _eqns(v["jaxpr"])
                elif isinstance(v, (list, tuple)):
                    stack.extend(v)
                elif isinstance(v, dict):
                    stack.extend(v.values())


def _eqn(tree, primitive):
    return next(e for e in _eqns(tree["jaxpr"]) if e["primitive"] == primitive)


# --- the schema: exactly the parameter names JAX 0.10.2 emits -------------------------------------

def _representatives():
    x = jnp.ones((4, 3))
    v = jnp.ones(4, bool)
    i = jnp.arange(4)
    u = jnp.ones(4, jnp.uint32)
    sq = x[:3] @ x[:3].T + 3.0 * jnp.eye(3)

    @jax.custom_jvp
    def softplus(y):
        return jnp.logaddexp(y, 0.0)
    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0]))

    @jax.custom_vjp
    def sin(y):
        return jnp.sin(y)
    sin.defvjp(lambda y: (jnp.sin(y), jnp.cos(y)), lambda c, g: (g * c,))

    return [
        lambda: (x + x - x * x / x % x, -jnp.abs(x) * jnp.sign(x), jnp.floor(x), jnp.ceil(x), jnp.round(x)),
        lambda: (jnp.exp(x), jnp.exp2(x), jnp.log(x), jnp.log1p(x), jnp.expm1(x), jnp.sqrt(x), lax.rsqrt(x),
                 jnp.cbrt(x), x ** x, x ** 3, jnp.square(x), jnp.tanh(x), jax.nn.sigmoid(x)),
        lambda: (jnp.sin(x), jnp.cos(x), jnp.tan(x), jnp.arcsin(x), jnp.arccos(x), jnp.arctan(x),
                 jnp.arctan2(x, x), jnp.sinh(x), jnp.cosh(x), jnp.arcsinh(x), jnp.arccosh(x), jnp.arctanh(x)),
        lambda: (lax.erf(x), lax.erfc(x), lax.erf_inv(x), lax.lgamma(x), lax.digamma(x), jnp.isfinite(x),
                 jnp.maximum(x, x), jnp.minimum(x, x), jnp.nextafter(x, x), lax.clamp(0.0, x, 1.0)),
        lambda: (jnp.where(x > 0, x, x), x == x, x != x, x < x, x <= x, x >= x, v & v, v | v, ~v, v ^ v,
                 u << u, u >> u, lax.shift_right_arithmetic(i, i), lax.population_count(u), lax.clz(u)),
        lambda: (x.astype(jnp.float32), lax.bitcast_convert_type(x, jnp.int64), lax.reduce_precision(x, 5, 10),
                 lax.stop_gradient(x), jax.grad(lambda y: (y * y).sum())(x), jnp.copy(x)),
        lambda: (jnp.broadcast_to(x[0], (4, 3)), x.reshape(12), x[None].squeeze(0), x.T, lax.rev(x, (0,)),
                 jnp.concatenate([x, x]), jnp.pad(x, 1), x[1:3], lax.dynamic_slice(x, (i[1], 0), (2, 3)),
                 lax.dynamic_update_slice(x, x[:1], (i[1], 0)), x[i], jnp.split(x, 2), jnp.arange(5)),
        lambda: (x.sum(0), x.max(1), x.min(), x.prod(), v.all(), v.any(), lax.reduce_xor(v, (0,)),
                 jnp.argmax(x, 0), jnp.argmin(x, 1), jnp.cumsum(x, 0), jnp.cumprod(x), lax.cummax(x),
                 lax.cummin(x), lax.cumlogsumexp(x), jnp.sort(x, 0), lax.top_k(x, 2), x @ x.T),
        lambda: (jax.scipy.linalg.lu(sq), jnp.linalg.cholesky(sq), jax.scipy.linalg.solve_triangular(sq, sq[0]),
                 lax.linalg.lu_pivots_to_permutation(i[:3].astype(jnp.int32), 4)),
        lambda: (x.at[i].set(1.0), x.at[i].add(1.0), x.at[i].mul(2.0), x.at[i].min(1.0), x.at[i].max(1.0),
                 x.at[i].subtract(1.0)),
        lambda: (jax.jit(lambda y: y + 1)(x), jax.checkpoint(lambda y: jnp.sin(y))(x), softplus(x), sin(x)),
        lambda: (lax.cond(x[0, 0] > 0, lambda y: y, lambda y: -y, x), lax.while_loop(lambda c: c < 10,
                 lambda c: c + 1, 0), lax.scan(lambda c, y: (c + y, c), 0.0, x[:, 0]),
                 lax.custom_linear_solve(lambda y: sq @ y, x[:3, 0], lambda mv, b: b)),
    ]


def test_schema_names_are_exactly_what_jax_emits():
    from jax._src import core
    seen: dict[str, set] = {}

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            seen.setdefault(eqn.primitive.name, set()).add(frozenset(eqn.params))
            for sub in core.jaxprs_in_params(eqn.params):
                walk(sub)

    for f in _representatives():
        walk(jax.make_jaxpr(f)().jaxpr)
    assert set(PARAM_SCHEMA) == ALLOWED_PRIMITIVES
    # closed_call is only emitted by custom_vjp's DCE rule, as dict(call_jaxpr=...) (custom_derivatives.py).
    assert set(PARAM_SCHEMA["closed_call"]) == {"call_jaxpr"}
    assert set(seen) & ALLOWED_PRIMITIVES == ALLOWED_PRIMITIVES - {"closed_call"}
    for name in set(seen) & ALLOWED_PRIMITIVES:
        assert seen[name] == {frozenset(PARAM_SCHEMA[name])}, name


def test_unknown_and_missing_parameter_names_are_refused():
    def f(rows, valid):
        return jnp.where(valid, jnp.sort(rows), 0.0).sum()

    tree = _tree(f)
    _rebuild(copy.deepcopy(tree))
    bad = copy.deepcopy(tree)
    _eqn(bad, "sort")["params"]["descending"] = True
    with pytest.raises(OracleRefused, match=r"primitive 'sort' has no parameter 'descending'"):
        _rebuild(bad)
    bad = copy.deepcopy(tree)
    del _eqn(bad, "sort")["params"]["is_stable"]
    with pytest.raises(OracleRefused, match=r"'sort' is missing parameters \['is_stable'\]"):
        _rebuild(bad)
    bad = copy.deepcopy(tree)
    _eqn(bad, "reduce_sum")["params"]["linear"] = False
    with pytest.raises(OracleRefused, match=r"'reduce_sum' has no parameter 'linear'"):
        _rebuild(bad)


def test_batching_dimension_numbers_are_refused():
    def f(rows, valid):
        return jnp.where(valid, rows, 0.0)[jnp.argsort(rows)[:2]].sum()

    tree = _tree(f)
    _eqn(tree, "gather")["params"]["dimension_numbers"]["fields"]["operand_batching_dims"] = [0]
    with pytest.raises(OracleRefused, match="'gather' parameter 'dimension_numbers': batching dimension"):
        _rebuild(tree)


def test_closed_call_is_inlined():
    def f(rows, valid):
        return jax.jit(lambda r: jnp.where(valid, r, 0.0).sum())(rows)

    tree = _tree(f)
    eqn = _eqn(tree, "jit")
    eqn["primitive"], eqn["params"] = "closed_call", {"call_jaxpr": eqn["params"]["jaxpr"]}
    assert _vmap_equals_loop(_rebuild(tree), ROWS_1D)


# --- positive controls: what JAX's unbatched shape rules let through ------------------------------

def _sort_last(rows, valid):
    z = jnp.asarray(W) @ jnp.where(valid, rows, 0.0)
    return lax.sort_p.bind(z, dimension=-1, is_stable=True, num_keys=1)[0][0]


def _split_last(rows, valid):
    z = jnp.asarray(W) @ jnp.where(valid, rows, 0.0)
    low, high = lax.split_p.bind(z, sizes=(1, 1), axis=-1)
    return low[0] - 2.0 * high[0]


@pytest.mark.parametrize("f, parameter", [(_sort_last, "'sort' parameter 'dimension'"),
                                          (_split_last, "'split' parameter 'axis'")])
def test_negative_axes_mix_subsets_under_vmap_and_are_refused(f, parameter):
    # Positive control: the unbatched trace accepts the oracle, and under vmap subset 0's value moves
    # when only subset 1's rows change (split's sizes (1, 1) must match the batch of 2 to run at all).
    rows, valid = _blocks(ROWS_1D, batch=2)
    batched = jax.jit(jax.vmap(f))
    looped = np.array([float(jax.jit(f)(rows[i], valid[i])) for i in range(2)])
    assert not np.array_equal(np.asarray(batched(rows, valid)), looped)
    assert float(batched(rows.at[1].add(1.0), valid)[0]) != float(batched(rows, valid)[0])
    with pytest.raises(OracleRefused, match=parameter):
        _rebuild(_tree(f))


@pytest.mark.parametrize("primitive", [lax.reduce_or_p, lax.reduce_and_p, lax.reduce_xor_p])
def test_negative_reduction_axes_pass_the_unbatched_trace_and_are_refused(primitive):
    def f(rows, valid):
        z = jnp.asarray(W) @ jnp.where(valid, rows, 0.0) > 0.0
        return primitive.bind(z[:, None], axes=(-2,)).astype(jnp.float64).sum()

    # Positive control: JAX's unbatched shape rule accepts -2 (in JAX 0.10.2 the program then fails to
    # lower, batched or not; the rebuild refuses it by name before that).
    jax.make_jaxpr(f)(*_structs(ROWS_1D))
    with pytest.raises(OracleRefused, match=rf"'{primitive.name}' parameter 'axes'"):
        _rebuild(_tree(f))


# --- fuzz: hostile values for every axis-like parameter --------------------------------------------

def _case(primitive, f, shape, *paths):
    return pytest.param(primitive, f, shape, paths, id=f"{primitive}:{'/'.join(map(str, paths[0]))}")


def _masked(rows, valid):
    return jnp.where(valid[:, None], rows, 0.0) if rows.ndim == 2 else jnp.where(valid, rows, 0.0)


def _total(*outs):
    return sum(jnp.sum(o.astype(jnp.float64)) for o in outs)


X = _masked
FUZZ = [
    _case("broadcast_in_dim", lambda r, v: _total(lax.broadcast_in_dim(X(r, v), (2, CAP, 3), (1, 2))), ROWS_2D,
          ("broadcast_dimensions",), ("shape",)),
    _case("reshape", lambda r, v: _total(lax.reshape(X(r, v), (3, CAP), (1, 0))), ROWS_2D,
          ("dimensions",), ("new_sizes",)),
    _case("squeeze", lambda r, v: _total(lax.squeeze(X(r, v)[:, :1], (1,))), ROWS_2D, ("dimensions",)),
    _case("transpose", lambda r, v: _total(X(r, v).T[0]), ROWS_2D, ("permutation",)),
    _case("rev", lambda r, v: _total(lax.rev(X(r, v), (0,))[0]), ROWS_2D, ("dimensions",)),
    _case("concatenate", lambda r, v: _total(jnp.concatenate([X(r, v), X(r, v)], 0)[1]), ROWS_2D, ("dimension",)),
    _case("pad", lambda r, v: _total(lax.pad(X(r, v), 0.0, ((1, 0, 0), (0, 1, 1)))[0]), ROWS_2D,
          ("padding_config",)),
    _case("slice", lambda r, v: _total(X(r, v)[1:3, ::2]), ROWS_2D,
          ("start_indices",), ("limit_indices",), ("strides",)),
    _case("dynamic_slice", lambda r, v: _total(lax.dynamic_slice(X(r, v), (jnp.argmax(v), 0), (2, 3))), ROWS_2D,
          ("slice_sizes",)),
    _case("gather", lambda r, v: _total(X(r, v)[jnp.argsort(r[:, 0])[:2]]), ROWS_2D,
          ("dimension_numbers", "fields", "offset_dims"), ("dimension_numbers", "fields", "collapsed_slice_dims"),
          ("dimension_numbers", "fields", "start_index_map"), ("slice_sizes",)),
    _case("iota", lambda r, v: _total(lax.broadcasted_iota(jnp.float64, (CAP, 3), 1) * X(r, v)), ROWS_2D,
          ("dimension",), ("shape",)),
    _case("split", lambda r, v: _total(lax.split(X(r, v), (1, 3), 0)[0]), ROWS_2D, ("axis",), ("sizes",)),
    *[_case(name, lambda r, v, p=p: _total(p.bind(X(r, v) > 0.0, axes=(0,))[0]), ROWS_2D, ("axes",))
      for name, p in (("reduce_or", lax.reduce_or_p), ("reduce_and", lax.reduce_and_p),
                      ("reduce_xor", lax.reduce_xor_p))],
    *[_case(name, lambda r, v, fn=fn: _total(fn(X(r, v), 0)[0]), ROWS_2D, ("axes",))
      for name, fn in (("reduce_sum", jnp.sum), ("reduce_max", jnp.max), ("reduce_min", jnp.min),
                       ("reduce_prod", jnp.prod), ("argmax", jnp.argmax), ("argmin", jnp.argmin))],
    *[_case(name, lambda r, v, fn=fn: _total(fn(X(r, v), axis=0)[0]), ROWS_2D, ("axis",))
      for name, fn in (("cumsum", lax.cumsum), ("cumprod", lax.cumprod), ("cummax", lax.cummax),
                       ("cummin", lax.cummin), ("cumlogsumexp", lax.cumlogsumexp))],
    _case("sort", lambda r, v: _total(lax.sort(X(r, v), dimension=0)[0]), ROWS_2D, ("dimension",), ("num_keys",)),
    _case("top_k", lambda r, v: _total(lax.top_k(X(r, v), 2)[0][0]), ROWS_2D, ("axis",), ("k",)),
    _case("dot_general", lambda r, v: _total(X(r, v).T @ X(r, v)), ROWS_2D,
          ("dimension_numbers", 0, 0), ("dimension_numbers", 0, 1), ("dimension_numbers", 1, 0)),
    *[_case(name, lambda r, v, fn=fn: _total(fn(X(r, v).at[jnp.argsort(r[:, 0])[:2]], 1.0)[0]), ROWS_2D,
            ("dimension_numbers", "fields", "update_window_dims"),
            ("dimension_numbers", "fields", "inserted_window_dims"),
            ("dimension_numbers", "fields", "scatter_dims_to_operand_dims"))
      for name, fn in (("scatter", lambda a, y: a.set(y)), ("scatter-add", lambda a, y: a.add(y)))],
    _case("reduce_precision", lambda r, v: _total(lax.reduce_precision(X(r, v), 5, 10)), ROWS_2D,
          ("exponent_bits",), ("mantissa_bits",)),
    _case("lu_pivots_to_permutation",
          lambda r, v: _total(lax.linalg.lu_pivots_to_permutation(jnp.argsort(r[:, 0]).astype(jnp.int32), CAP)),
          ROWS_2D, ("permutation_size",)),
]


def _hostile(value):
    """Values no honest tree holds where ``value`` is: negative, out of range, repeated, bools, huge."""
    if isinstance(value, list):
        n = len(value)
        if n == 0:
            return [[0], [-1], [5], [True], [0, 0]]
        out = [[-1] * n, list(range(-n, 0)), [2] * n, [9] * n, [True] * n, [2**40] * n, value[:-1],
               value + value[-1:]]
        if n >= 2:
            out.append([value[0]] * n)
        return out
    if value is None:  # an optional permutation or strides
        return [[-1, 0], [0, 0], [1, 2], [True, False], [0]]
    return [-1, -2, 2, 3, 9, True, False, 2**40, -(2**40), {"float": "0x0.0p+0"}]  # 2 is the rank of ROWS_2D


def _get(node, path):
    for key in path:
        node = node[key]
    return node


def _set(node, path, value):
    _get(node, path[:-1])[path[-1]] = value


@pytest.mark.parametrize("primitive, f, shape, paths", FUZZ)
def test_hostile_parameters_are_refused_or_do_not_mix_subsets(primitive, f, shape, paths):
    tree = _tree(f, shape)
    _rebuild(copy.deepcopy(tree), shape)  # the honest tree is accepted
    refused = accepted = 0
    for path in paths:
        honest = _get(_eqn(tree, primitive)["params"], path)
        for value in _hostile(honest):
            bad = copy.deepcopy(tree)
            _set(_eqn(bad, primitive)["params"], path, value)
            try:
                rebuilt = _rebuild(bad, shape)
            except OracleRefused:
                refused += 1
                continue
            accepted += 1
            assert _vmap_equals_loop(rebuilt, shape), (path, value)
    assert refused > 0


# --- honest oracles stay bitwise equal to jit(vmap(f)) ---------------------------------------------

def _fori_fit(rows, valid):
    w = valid.astype(jnp.float64)
    x, y = rows[:, 0], rows[:, 1]

    def step(i, theta):
        intercept, slope = theta
        residual = w * (intercept + slope * x - y)
        scale = 0.1 / jnp.maximum(w.sum(), 1.0)
        return intercept - scale * residual.sum(), slope - scale * (residual * x).sum()
    # A tuple carry: jnp.stack is its own primitive in JAX 0.10.2, which the allow-list does not hold.
    return lax.fori_loop(0, 40, step, (jnp.zeros((), jnp.float64), jnp.zeros((), jnp.float64)))[1]


def _while_newton(rows, valid):
    s = jnp.where(valid, jnp.abs(rows), 0.0).sum() + 1.0

    def cond(c):
        return (c[1] < 100) & (jnp.abs(c[0] * c[0] - s) > 1e-12 * s)
    return lax.while_loop(cond, lambda c: (0.5 * (c[0] + s / c[0]), c[1] + 1), (s, 0))[0]


def _cond(rows, valid):
    return lax.cond(valid.sum() > 2, lambda r: jnp.where(valid, r, 0.0).sum(),
                    lambda r: jnp.where(valid, r, -jnp.inf).max(), rows)


def _scan(rows, valid):
    return lax.scan(lambda c, y: (0.5 * c + y, c * y), 0.0, jnp.where(valid, rows, 0.0))[1].sum()


def _axis0(rows, valid):
    x = jnp.where(valid[:, None], rows, 0.0)
    first = jnp.argmax(x, axis=0).sum().astype(jnp.float64)
    return jnp.sort(x, axis=0)[1].sum() + jnp.cumsum(x, axis=0)[-1].sum() + first


@pytest.mark.parametrize("f, shape", [(_fori_fit, ROWS_2D), (_while_newton, ROWS_1D), (_cond, ROWS_1D),
                                      (_scan, ROWS_1D), (_axis0, ROWS_2D)],
                         ids=["fori_fit", "while", "cond", "scan", "axis0"])
def test_honest_oracles_match_bitwise(f, shape):
    rows, valid = _blocks(shape, batch=16, seed=1)
    got = jax.jit(jax.vmap(_rebuild(_tree(f, shape), shape)))(rows, valid)
    want = jax.jit(jax.vmap(f))(rows, valid)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(_bits(got), _bits(want))


# --- the global work budget ------------------------------------------------------------------------

def _nested_whiles(outer_n, inner_n):
    def f(rows, valid):
        def outer(carry):
            i, total = carry
            inner = lax.while_loop(lambda c: c[0] < inner_n, lambda c: (c[0] + 1, c[1] + 1), (0, total))
            return i + 1, inner[1]
        return lax.while_loop(lambda c: c[0] < outer_n, outer, (0, 0))[1]
    return f


def test_nested_while_loops_share_one_budget():
    f = _nested_whiles(2000, 2000)
    rows, valid = _blocks(ROWS_1D, batch=1)
    assert int(jax.jit(f)(rows[0], valid[0])) == 4_000_000  # positive control: trusted, it runs 4e6 iterations
    rebuilt = _rebuild(_tree(f), cut_to_nan=False)  # the cut state, to read the count
    counts = np.asarray(jax.jit(jax.vmap(rebuilt))(*_blocks(ROWS_1D)))
    # Every iteration (outer and inner) is charged to the one counter of its evaluation.
    assert 0 < counts.max() <= RebuildLimits().max_work
    assert int(jax.jit(rebuilt)(rows[0], valid[0])) == counts[0]


def test_static_scan_work_is_refused_at_rebuild():
    def long_scan(rows, valid):
        return lax.scan(lambda c, _: (c + rows[0], None), 0.0, None, length=2 * 10**6)[0]

    with pytest.raises(OracleRefused, match="work budget max_work=1000000"):
        _rebuild(_tree(long_scan))

    def nested(outer, inner):
        def f(rows, valid):
            body = lambda c, _: (lax.scan(lambda d, _: (d + 1.0, None), c, None, length=inner)[0], None)
            return lax.scan(body, rows[0], None, length=outer)[0]
        return f

    _rebuild(_tree(nested(990, 1000)))  # 990 * (1 + 1000) = 990_990 iterations: within budget
    with pytest.raises(OracleRefused, match="1001000 iterations"):
        _rebuild(_tree(nested(1000, 1000)))  # lengths multiply: 1000 * (1 + 1000)


def _unbounded_count(start=0):
    return lax.while_loop(lambda c: c >= 0, lambda c: c + 1, start)


@pytest.mark.parametrize("where", ["after_scan", "in_scan", "in_branch", "in_while_test"])
def test_while_loops_spend_what_the_rest_of_the_oracle_left(where):
    budget = 10_000

    def f(rows, valid):
        if where == "after_scan":  # 3 * (1 + 1000) iterations charged statically, up front
            done = lax.scan(lambda c, _: (lax.scan(lambda d, _: (d + 1, None), c, None, length=1000)[0], None),
                            0, None, length=3)[0]
            return done + _unbounded_count()
        if where == "in_scan":  # each of 100 scan iterations runs a loop that would never stop
            return lax.scan(lambda c, _: (c + _unbounded_count(), None), 0, None, length=100)[0]
        if where == "in_branch":
            return lax.cond(valid[0], lambda: _unbounded_count() + _unbounded_count(), lambda: 0)
        # A loop whose test itself runs a loop that would never stop.
        return lax.while_loop(lambda c: _unbounded_count(c[1]) > 0, lambda c: (c[0] + 1, c[1] + 1), (0, 0))[0]

    limits = RebuildLimits(max_work=budget)
    rebuilt = _rebuild(_tree(f), limits=limits, cut_to_nan=False)  # the cut state, to read the count
    counts = np.asarray(jax.jit(jax.vmap(rebuilt))(*_blocks(ROWS_1D)))
    assert counts.max() <= budget
    # As released, every evaluation here hit the budget: each is a non-response.
    assert np.isnan(np.asarray(jax.jit(jax.vmap(_rebuild(_tree(f), limits=limits)))(*_blocks(ROWS_1D)))).all()
    if where == "after_scan":
        # 3000 from the scans, then the loop runs exactly what their static work (3 * 1001) left.
        assert counts.max() == 3000 + (budget - 3 * 1001)


@pytest.mark.parametrize("where", ["untaken_branch", "ended_loop"])
def test_work_that_vmap_runs_and_discards_is_not_a_second_budget(where):
    # Under vmap, JAX runs a branch for subsets that did not take it, and a loop body for subsets whose
    # loop has ended, then discards those results. Given the subset's live counter, a loop in there
    # would spin up to the budget on every outer iteration, only for subsets whose data chose it:
    # outer_n * budget = 10**9 iterations (about 10 s here, measured with the gating disabled) instead
    # of about budget. The bound below is loose: the gated run takes milliseconds.
    outer_n, budget = 5000, 200_000

    def f(rows, valid):
        flag = valid[1]
        if where == "untaken_branch":
            spin = lambda i: lax.cond(flag, lambda: 0, lambda: _unbounded_count())
            n = outer_n
        else:  # subsets with ``flag`` end after 3 iterations; their discarded body would spin from then on
            spin = lambda i: lax.cond(flag & (i >= 3), lambda: _unbounded_count(), lambda: 0)
            n = jnp.where(flag, 3, outer_n)
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + spin(c[0])), (0, 0))[1]

    rebuilt = jax.jit(jax.vmap(_rebuild(_tree(f), limits=RebuildLimits(max_work=budget), cut_to_nan=False)))
    rows = jnp.zeros((2, CAP))
    valid = jnp.asarray([[True] * CAP, [True, False] + [True] * (CAP - 2)])
    rebuilt(rows, valid).block_until_ready()
    start = time.perf_counter()
    counts = np.asarray(rebuilt(rows, valid))
    assert time.perf_counter() - start < 2.0
    assert counts.max() <= budget


def test_an_evaluation_the_budget_cuts_is_a_nonresponse_never_the_cut_state():
    # Loops that end by themselves within the budget keep their values (an int result becomes a float of
    # the same value); one that the budget cuts returns NaN, which every release maps to its public NaN value.
    def f(rows, valid):
        return lax.while_loop(lambda c: c < jnp.abs(rows[0]).astype(jnp.int32), lambda c: c + 1, 0)

    rows = jnp.zeros((4,) + ROWS_1D).at[:, 0].set(jnp.asarray([5.0, 999.0, 1000.0, 10**7]))
    valid = jnp.ones((4, CAP), bool)
    got = np.asarray(jax.jit(jax.vmap(_rebuild(_tree(f), limits=RebuildLimits(max_work=1000))))(rows, valid))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got[:3], [5.0, 999.0, 1000.0])
    assert np.isnan(got[3])
    # Positive control: without the NaN the cut state (1000 iterations) would pass for an answer.
    cut = jax.jit(jax.vmap(_rebuild(_tree(f), limits=RebuildLimits(max_work=1000), cut_to_nan=False)))
    assert np.asarray(cut(rows, valid))[3] == 1000
    # A cut inner loop makes the whole evaluation a non-response, whatever the outer loop does next.
    def nested(rows, valid):
        inner = lambda c: lax.while_loop(lambda d: d < rows[0], lambda d: d + 1.0, 0.0)
        return lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + inner(c)), (0, 0.0))[1]

    rows = rows.at[:, 0].set(jnp.asarray([5.0, 400.0, 999.0, 10**7]))  # 2 * 999 + 2 iterations > 1000
    got = np.asarray(jax.jit(jax.vmap(_rebuild(_tree(nested), limits=RebuildLimits(max_work=1000))))(rows, valid))
    np.testing.assert_array_equal(got[:2], [10.0, 800.0])
    assert np.isnan(got[2:]).all()
    # An oracle without a while loop is unchanged (its dtype too).
    plain = _rebuild(_tree(lambda rows, valid: jnp.sum(valid).astype(jnp.int32)))
    assert jax.jit(plain)(rows[0], valid[0]).dtype == np.int32


def test_limits_validate_and_keep_the_deprecated_alias():
    assert RebuildLimits(max_while_iterations=1000).max_work == 1000
    with pytest.raises(ValueError, match="not both"):
        RebuildLimits(max_work=10, max_while_iterations=1000)
    for bad in (0, -1, True, 1.5, 2**63):
        with pytest.raises(ValueError, match="max_work"):
            RebuildLimits(max_work=bad)
