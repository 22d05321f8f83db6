"""The oracle sandbox: honest oracles rebuild bit for bit; attacks are refused before data is touched."""

from __future__ import annotations

import copy
import gc
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import oracle as lib
from gpuprivacy.oracle import _sandbox as sandbox
from gpuprivacy.oracle._rebuild import OracleRefused, RebuildLimits, rebuild

CAP = 16
BATCH = 64
ROWS_1D = (CAP,)
ROWS_2D = (CAP, 3)


def _blocks(shape, *, labels=False, seed=0):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(BATCH,) + shape)
    if labels:
        rows[..., -1] = rng.random(rows.shape[:-1]) < 0.5
    rows = np.sort(rows, axis=1) if len(shape) == 1 else rows
    valid = np.arange(CAP)[None, :] < rng.integers(0, CAP + 1, size=(BATCH, 1))
    valid[0] = True
    return jnp.asarray(rows), jnp.asarray(valid)


def _same(sandboxed, direct, shape, **kw):
    rows, valid = _blocks(shape, **kw)
    got = np.asarray(jax.jit(jax.vmap(sandboxed))(rows, valid))
    want = np.asarray(jax.jit(jax.vmap(direct))(rows, valid))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint64) if got.dtype == np.float64 else got,
                                  want.view(np.uint64) if want.dtype == np.float64 else want)


def _source_oracle(source, shape=ROWS_1D, name="f", **kw):
    return sandbox.sandboxed_oracle(source=source, name=name, rows_shape=shape, capacity=CAP, **kw)


def _exec(source, name="f"):
    namespace = {}
    exec(compile(source, "<test>", "exec"), namespace)
    return namespace[name]


HEADER = "import jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax import lax\n"

HONEST = {
    "custom_mean": """
def f(rows, valid):
    w = valid.astype(jnp.float64)
    return (w * rows).sum() / w.sum()
""",
    "nanquantile": """
def f(rows, valid):
    return jnp.nanquantile(jnp.where(valid, rows, jnp.nan), 0.3)
""",
    "cond": """
def f(rows, valid):
    c = valid.sum()
    return lax.cond(c > 5, lambda r: jnp.where(valid, r, 0.0).sum(), lambda r: jnp.where(valid, r, -jnp.inf).max(), rows)
""",
    "while_loop": """
def f(rows, valid):
    s = jnp.where(valid, jnp.abs(rows), 0.0).sum() + 1.0
    def cond(c):
        return (c[1] < 100) & (jnp.abs(c[0] * c[0] - s) > 1e-12 * s)
    def body(c):
        return 0.5 * (c[0] + s / c[0]), c[1] + 1
    return lax.while_loop(cond, body, (s, 0))[0]
""",
    "fori_grad": """
def f(rows, valid):
    w = valid.astype(jnp.float64)
    def loss(m):
        return (w * (rows - m) ** 2).sum() / jnp.maximum(w.sum(), 1.0) + 0.01 * m * m
    def step(i, carry):
        m, v = carry
        g = jax.grad(loss)(m)
        v = 0.9 * v + g
        return m - 0.1 * v, v
    return lax.fori_loop(0, 60, step, (jnp.zeros((), jnp.float64), jnp.zeros((), jnp.float64)))[0]
""",
    "custom_jvp": """
@jax.custom_jvp
def softplus(x):
    return jnp.logaddexp(x, 0.0)
softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))
def f(rows, valid):
    return jnp.where(valid, softplus(rows), 0.0).sum() + jax.grad(lambda r: softplus(r).sum())(rows).sum()
""",
    "custom_vjp": """
@jax.custom_vjp
def clip_grad_sin(x):
    return jnp.sin(x)
clip_grad_sin.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (jnp.clip(g * c, -0.5, 0.5),))
def f(rows, valid):
    return jnp.where(valid, clip_grad_sin(rows), 0.0).sum() + jax.grad(lambda r: clip_grad_sin(r).sum())(rows).sum()
""",
    "structure_scatter_scan_remat": """
def f(rows, valid):
    x = jnp.where(valid, rows, 0.0)
    a = x.at[jnp.array([1, 2, 2])].add(1.5).sum() + x.at[3].set(7.0).sum() + x.at[4].max(0.2).sum()
    b = lax.top_k(x, 3)[0].sum() + jnp.cumsum(x).sum() + jnp.split(x, 2)[1].sum() + x[jnp.argsort(x)[0]]
    c = jax.checkpoint(lambda z: jnp.sin(z).sum())(x) + jnp.round(x, 2).sum() + lax.cummax(x).sum()
    d = lax.scan(lambda c, y: (c + y, c * y), 0.0, x)[1].sum() + jnp.pad(x, 2).sum() + jnp.flip(x)[0]
    return a + b + c + d
""",
}


@pytest.mark.parametrize("label", sorted(HONEST))
def test_honest_source_oracles_match_bitwise(label):
    source = HEADER + HONEST[label]
    _same(_source_oracle(source), _exec(source), ROWS_1D)


LIBRARY = [
    ("count", lib.count, ROWS_1D), ("sum_", lib.sum_, ROWS_1D), ("mean", lib.mean, ROWS_1D),
    ("variance", lib.variance, ROWS_1D), ("median", lib.median, ROWS_1D), ("quantile", lib.quantile(0.3), ROWS_1D),
    ("trimmed_mean", lib.trimmed_mean(0.1), ROWS_1D), ("clipped_mean", lib.clipped_mean(0, 1), ROWS_1D),
    ("least_squares", lib.least_squares(), ROWS_2D),
]


@pytest.mark.parametrize("label, fn, shape", LIBRARY, ids=[x[0] for x in LIBRARY])
def test_library_oracles_by_reference_match_bitwise(label, fn, shape):
    _same(sandbox.sandboxed_oracle(fn, rows_shape=shape, capacity=CAP), fn, shape)


def test_logistic_regression_by_source_matches_bitwise():
    # Its closure holds an optax optimizer (not plain data): by reference it is refused; by source it runs.
    with pytest.raises(OracleRefused, match="optimizer"):
        sandbox.sandboxed_oracle(lib.logistic_regression(), rows_shape=ROWS_2D, capacity=CAP)
    source = "from gpuprivacy.oracle import logistic_regression\nf = logistic_regression()\n"
    _same(_source_oracle(source, ROWS_2D), lib.logistic_regression(), ROWS_2D, labels=True)


def test_while_loops_are_bounded():
    source = HEADER + "def f(rows, valid):\n    return lax.while_loop(lambda c: c >= 0.0, lambda c: c + 1.0, 0.0)\n"
    f = _source_oracle(source, limits=RebuildLimits(max_while_iterations=1000))
    rows, valid = _blocks(ROWS_1D)
    # The budget cuts every evaluation: each is a non-response (NaN), not the cut state (1000.0).
    assert np.isnan(np.asarray(jax.jit(jax.vmap(f))(rows, valid))).all()


# --- attacks --------------------------------------------------------------------------------------

ATTACKS = {
    "custom_vmap": ("custom_vmap", """
from jax.custom_batching import custom_vmap
@custom_vmap
def leak(x):
    return x.sum()
@leak.def_vmap
def _rule(axis_size, in_batched, x):
    return x.sum(axis=1) + 1e-9 * x.sum(), True  # the rule sees every subset's rows
def f(rows, valid):
    return leak(rows)
"""),
    "debug_callback": ("debug_callback", """
STOLEN = []
def f(rows, valid):
    jax.debug.callback(lambda r: STOLEN.append(np.asarray(r)), rows)
    return rows.sum()
"""),
    "io_callback": ("io_callback", """
from jax.experimental import io_callback
def f(rows, valid):
    return io_callback(lambda r: np.float64(r.sum()), jax.ShapeDtypeStruct((), jnp.float64), rows)
"""),
    "pure_callback": ("pure_callback", """
def f(rows, valid):
    return jax.pure_callback(lambda r: np.float64(r.sum()), jax.ShapeDtypeStruct((), jnp.float64), rows)
"""),
    "pure_callback_raises": ("pure_callback", """
def _raise(r):
    raise ValueError("exfiltrated: " + repr(np.asarray(r).tolist()))
def f(rows, valid):
    return jax.pure_callback(_raise, jax.ShapeDtypeStruct((), jnp.float64), rows)
"""),
    "randomness": ("random", """
def f(rows, valid):
    return jnp.where(valid, rows, 0.0).sum() + jax.random.normal(jax.random.key(0), (), jnp.float64)
"""),
    "legacy_prng": ("random|threefry", """
def f(rows, valid):
    return jnp.where(valid, rows, 0.0).sum() + jax.random.uniform(jax.random.PRNGKey(0), (), jnp.float64)
"""),
}


@pytest.mark.parametrize("label", sorted(ATTACKS))
def test_attacks_are_refused_by_name(label):
    pattern, body = ATTACKS[label]
    with pytest.raises(OracleRefused, match=pattern) as info:
        _source_oracle(HEADER + body, name="f")
    assert "'f'" in str(info.value)  # names the oracle


def test_monkeypatched_worker_encoder_is_still_refused():
    source = HEADER + """
import sys
def _install():
    for module in (sys.modules.get("__main__"), sys.modules.get("gpuprivacy.oracle._sandbox_worker")):
        if module is None or not hasattr(module, "encode_closed_jaxpr"):
            continue
        original = module.encode_closed_jaxpr
        def hiding(closed, _original=original):
            out = _original(closed)
            for eqn in out["eqns"]:
                if eqn["primitive"] == "debug_callback":  # disguise the callback as an allowed primitive
                    eqn["primitive"] = "copy"
                    eqn["effects"] = []
            out["effects"] = []
            return out
        module.encode_closed_jaxpr = hiding
_install()
def f(rows, valid):
    jax.debug.callback(lambda r: print(r), rows)
    return rows.sum()
"""
    try:
        with pytest.raises(OracleRefused, match="copy"):
            _source_oracle(source)
    finally:
        sandbox.shutdown_worker()  # the patched worker is not reused


MARKER = 271828.1828  # a value only the engine's data holds

INTROSPECTION = HEADER + """
import gc, sys
def _search():
    found, largest = 0.0, np.zeros(1)
    candidates = list(gc.get_objects())
    frame = sys._getframe()
    while frame is not None:
        candidates.extend(frame.f_locals.values())
        candidates.extend(frame.f_globals.values())
        frame = frame.f_back
    for obj in candidates:
        try:
            if isinstance(obj, (np.ndarray, jax.Array)) and obj.size and np.asarray(obj).dtype.kind == "f":
                arr = np.asarray(obj)
                if np.any(arr == MARKER):
                    found = 1.0
                if arr.size > largest.size:
                    largest = arr
        except Exception:
            pass
    return found, largest
MARKER = %r
def f(rows, valid):
    found, largest = _search()
    stolen = jnp.asarray(largest.ravel()[:100000], jnp.float64)
    honest = jnp.where(valid, rows, 0.0).sum()
    return honest + found + 0.0 * jnp.where(jnp.isfinite(stolen), stolen, 0.0).sum()
""" % MARKER


def test_trace_time_introspection_finds_no_data():
    secret = jnp.asarray(np.full((BATCH, CAP), MARKER))  # the engine's data, reachable by gc in this process
    secret_np = np.full(5000, MARKER)
    rows, valid = _blocks(ROWS_1D)
    honest = jax.jit(jax.vmap(lambda r, v: jnp.where(v, r, 0.0).sum()))(rows, valid)
    # In-process, the attack works: it finds the marker.
    in_process = jax.jit(jax.vmap(_exec(INTROSPECTION)))(rows, valid)
    assert np.all(np.asarray(in_process) == np.asarray(honest) + 1.0)
    # Sandboxed, it runs in a process that holds no data.
    try:
        f = _source_oracle(INTROSPECTION)
    except OracleRefused as exc:
        assert "constant" in str(exc)
        print("\nintrospection oracle: refused (constant cap)")
    else:
        print("\nintrospection oracle: ran; found no marker")
        np.testing.assert_array_equal(jax.jit(jax.vmap(f))(rows, valid), honest)
    del secret, secret_np
    gc.collect()


# --- a lying sandbox: trees fed to the engine directly ---------------------------------------------

@pytest.fixture(scope="module")
def honest_tree():
    source = HEADER + HONEST["custom_mean"]
    tree = sandbox.trace_in_sandbox(source=source, name="f", rows_shape=ROWS_1D, rows_dtype="float64", capacity=CAP)
    assert "jaxpr" in tree, tree
    return tree


def _rebuild(tree, **kw):
    return rebuild(tree, rows_shape=ROWS_1D, rows_dtype="float64", capacity=CAP, oracle_name="liar", **kw)


def test_honest_tree_rebuilds(honest_tree):
    json.dumps(honest_tree)  # plain JSON data
    _rebuild(honest_tree)


def _first_eqn(tree, primitive=None):
    return next(e for e in tree["jaxpr"]["eqns"] if primitive is None or e["primitive"] == primitive)


def test_lying_tree_custom_vmap_call(honest_tree):
    tree = copy.deepcopy(honest_tree)
    _first_eqn(tree)["primitive"] = "custom_vmap_call"
    with pytest.raises(OracleRefused, match="custom_vmap_call.*not allowed"):
        _rebuild(tree)


def test_lying_tree_opaque_param(honest_tree):
    tree = copy.deepcopy(honest_tree)
    _first_eqn(tree)["params"]["sneaky"] = {"opaque": "Exfiltrator"}
    with pytest.raises(OracleRefused, match="opaque"):
        _rebuild(tree)


def test_lying_tree_dropped_in_wrong_slot(honest_tree):
    tree = copy.deepcopy(honest_tree)
    _first_eqn(tree)["params"]["new_dtype"] = {"dropped": "callable"}
    with pytest.raises(OracleRefused, match="dropped"):
        _rebuild(tree)


def test_an_unknown_enum_is_dropped_only_where_its_value_is_never_bound():
    # Newer JAX (0.11) writes jit's ``inline`` parameter as an enum ('Inline'.'AUTO'); the rebuild inlines
    # jit and never binds that value, so it must not refuse an honest oracle. Everywhere else an enum the
    # allow-list does not know is still refused.
    source = HEADER + """
def f(rows, valid):
    twice = jax.jit(lambda r: r * 2.0)
    w = valid.astype(jnp.float64)
    return (w * twice(rows)).sum() / w.sum()
"""
    tree = sandbox.trace_in_sandbox(source=source, name="f", rows_shape=ROWS_1D, rows_dtype="float64", capacity=CAP)
    jit_eqn = next(e for e in tree["jaxpr"]["eqns"] if e["primitive"] in ("jit", "pjit"))
    jit_eqn["params"]["inline"] = {"enum": "Inline", "member": "AUTO"}
    _rebuild(copy.deepcopy(tree))
    other = copy.deepcopy(tree)
    _first_eqn(other, "mul")["params"]["inline"] = {"enum": "Inline", "member": "AUTO"}
    with pytest.raises(OracleRefused, match="dropped enum"):
        _rebuild(other)
    other = copy.deepcopy(tree)
    _first_eqn(other, "reduce_sum")["params"]["axes_kind"] = {"enum": "Exfiltrator", "member": "X"}
    with pytest.raises(OracleRefused, match="enum 'Exfiltrator'"):
        _rebuild(other)


def test_lying_tree_shapes(honest_tree):
    tree = copy.deepcopy(honest_tree)
    _first_eqn(tree)["outvars"][0]["aval"]["shape"] = [CAP + 1]
    with pytest.raises(OracleRefused, match="declared type"):
        _rebuild(tree)
    tree = copy.deepcopy(honest_tree)
    tree["jaxpr"]["invars"][0]["aval"]["shape"] = [CAP * 2]
    with pytest.raises(OracleRefused, match="inputs"):
        _rebuild(tree)
    tree = copy.deepcopy(honest_tree)
    tree["jaxpr"]["outvars"] = [tree["jaxpr"]["invars"][0]["id"]]  # returns the whole block
    with pytest.raises(OracleRefused, match="scalar"):
        _rebuild(tree)


def test_lying_tree_not_json(honest_tree):
    for bad in (["not", "an", "object"], {"jaxpr": {"eqns": {1, 2}}}, {"jaxpr": lambda: 0},
                {"jaxpr": {"constvars": [], "consts": [], "invars": [], "eqns": [], "outvars": [], "x": 1}}, 42):
        with pytest.raises(OracleRefused):
            _rebuild(bad)
    tree = copy.deepcopy(honest_tree)
    _first_eqn(tree)["invars"] = [{"var": 0}]
    with pytest.raises(OracleRefused):
        _rebuild(tree)
    tree = copy.deepcopy(honest_tree)
    _first_eqn(tree)["effects"] = ["IOEffect"]
    with pytest.raises(OracleRefused, match="effects"):
        _rebuild(tree)


def test_lying_tree_huge_constant(honest_tree):
    tree = copy.deepcopy(honest_tree)
    size = 200_000
    ident = 10_000
    tree["jaxpr"]["constvars"].append({"id": ident, "aval": {"shape": [size], "dtype": "float64", "weak_type": False}})
    tree["jaxpr"]["consts"].append({"const": [{"float": "0x1.0p+0"}] * size, "shape": [size], "dtype": "float64"})
    with pytest.raises(OracleRefused, match="constant"):
        _rebuild(tree)
    tree = copy.deepcopy(honest_tree)
    tree["jaxpr"]["invars"][0]["aval"]["shape"] = [1 << 40]
    with pytest.raises(OracleRefused, match="element cap"):
        _rebuild(tree)


def test_lying_tree_deep(honest_tree):
    inner = honest_tree["jaxpr"]
    for _ in range(40):  # jit(jit(...(f))), deeper than max_depth=32
        invars = [{"id": i, "aval": v["aval"]} for i, v in enumerate(inner["invars"])]
        out = {"id": len(invars), "aval": {"shape": [], "dtype": "float64", "weak_type": False}}
        inner = {"constvars": [], "consts": [], "invars": invars, "outvars": [out["id"]], "effects": [],
                 "eqns": [{"primitive": "jit", "params": {"jaxpr": {"jaxpr": inner}, "name": "f"},
                           "invars": [v["id"] for v in invars], "outvars": [out], "effects": []}]}
    with pytest.raises(OracleRefused, match="nest deeper"):
        _rebuild({"jaxpr": inner})
    nested: object = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(OracleRefused, match="nests deeper"):
        _rebuild({"jaxpr": {"constvars": nested}})


def test_lying_tree_wrong_jax_version(honest_tree):
    tree = dict(honest_tree, jax_version="0.0.1")
    with pytest.raises(OracleRefused, match="JAX"):
        _rebuild(tree)


def test_tracing_errors_come_back_as_refusals():
    with pytest.raises(OracleRefused, match="ZeroDivisionError"):
        _source_oracle("def f(rows, valid):\n    return 1 / 0\n")
    with pytest.raises(OracleRefused, match="lambda"):
        sandbox.sandboxed_oracle(lambda r, v: r.sum(), rows_shape=ROWS_1D, capacity=CAP)


# --- the cache and latency ------------------------------------------------------------------------

def test_cache_skips_the_worker_and_prints_latency():
    source = HEADER + HONEST["custom_mean"] + "\n# latency probe\n"
    sandbox.shutdown_worker()
    start = time.perf_counter()
    first = _source_oracle(source)
    first_s = time.perf_counter() - start
    sent = sandbox._WORKER.requests
    start = time.perf_counter()
    second = _source_oracle(source)
    cached_s = time.perf_counter() - start
    assert second is first
    assert sandbox._WORKER.requests == sent
    print(f"\nsandbox latency: first (worker start + trace + rebuild) {first_s * 1e3:.1f} ms, "
          f"cached {cached_s * 1e6:.1f} us")
    other = sandbox.sandboxed_oracle(source=source, name="f", rows_shape=(8,), capacity=8)  # one more request
    assert other is not first and sandbox._WORKER.requests == sent + 1


def test_a_killed_engine_s_private_folder_is_removed_by_the_next_engine(tmp_path):
    """An engine killed with SIGKILL cannot remove its worker's folder; the next engine removes it."""
    import os
    import subprocess
    import sys
    import tempfile

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now names no running process
    stale = tmp_path / f"{sandbox._PRIVATE_PREFIX}{dead.pid}-abc"
    (stale / "scratch").mkdir(parents=True)
    (stale / "scratch" / "data.npy").write_bytes(b"x")
    live = tmp_path / f"{sandbox._PRIVATE_PREFIX}{os.getppid()}-def"  # a running engine's folder stays
    live.mkdir()
    ours = tmp_path / f"{sandbox._PRIVATE_PREFIX}{os.getpid()}-ghi"  # and so does this engine's own
    ours.mkdir()
    old_style = tmp_path / f"{sandbox._PRIVATE_PREFIX}zzz"  # no engine pid in the name: not ours to judge
    old_style.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    link = tmp_path / f"{sandbox._PRIVATE_PREFIX}{dead.pid}-link"  # a symbolic link is never followed
    link.symlink_to(target, target_is_directory=True)
    assert sandbox.remove_stale_private_dirs(str(tmp_path)) == [str(stale)]
    assert not stale.exists() and live.exists() and ours.exists() and old_style.exists()
    assert link.is_symlink() and (target / "keep.txt").read_text() == "keep"
    # A worker names its folder after this engine, in this process's temporary directory.
    _source_oracle(HEADER + HONEST["custom_mean"] + "\n# private folder probe\n")
    private = sandbox._WORKER.private_dir
    assert os.path.dirname(private) == tempfile.gettempdir()
    assert os.path.basename(private).startswith(f"{sandbox._PRIVATE_PREFIX}{os.getpid()}-")
    sandbox.shutdown_worker()
    assert not os.path.exists(private)
