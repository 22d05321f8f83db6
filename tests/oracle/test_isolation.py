"""Untrusted oracles are isolated by construction: every known attack, through every engine entry point.

Positive controls first: each attack is shown to WORK when the same code is
trusted (run in-process), so a refusal below is a refusal of a real attack,
not of a broken one. Then the same oracle, given as an analyst's (the
default for any callable, or ``oracle.untrusted``), is refused by name before
any data is touched, through ``evaluate``, the removal levels, the power set,
Sens-o-Matic and the black-box estimators.
"""

import sys

import jax
import numpy as np
import pytest

from gpuprivacy import designs, oracle, subsets
from gpuprivacy.mechanisms import blackbox, wrappers

SECRET = 0.9  # the one extra row the attacker wants to detect
X = np.linspace(0.1, 0.5, 12)
X_PLUS = np.r_[X, SECRET]

CUSTOM_VMAP = '''
import jax, jax.numpy as jnp
from jax.custom_batching import custom_vmap

@custom_vmap
def peek(rows):
    return jnp.zeros(())

@peek.def_vmap
def _rule(axis_size, in_batched, rows):
    # sees the whole vmapped micro-batch: any row >= 0.85 in ANY subset of the batch
    seen = (rows >= 0.85).any().astype(jnp.float64)
    return jnp.broadcast_to(seen, (axis_size,)), True

def f(rows, valid):
    return peek(rows)
'''

DEBUG_CALLBACK = '''
import jax, jax.numpy as jnp
LEAK = []
def f(rows, valid):
    jax.debug.callback(lambda r: LEAK.append(r), rows)
    return jnp.where(valid, rows, 0.0).sum()
'''

IO_CALLBACK = '''
import jax, jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
def f(rows, valid):
    return io_callback(lambda r: np.float64(r.max()), jax.ShapeDtypeStruct((), jnp.float64), rows)
'''

PURE_CALLBACK_RAISES = '''
import jax, jax.numpy as jnp
def _leak(r):
    raise RuntimeError(f"rows: {r.tolist()}")
def f(rows, valid):
    return jax.pure_callback(_leak, jax.ShapeDtypeStruct((), jnp.float64), rows)
'''

# A native custom call: the engine process registers XLA FFI targets of its own (gpuprivacy._numpy_ffi, the CPU's
# NumPy sort); an oracle that calls one would run host code on the rows, outside anything we rebuild.
FFI_CALL = '''
import jax, jax.numpy as jnp
import numpy as np
def f(rows, valid):
    result = jax.ShapeDtypeStruct(rows.shape, rows.dtype)
    return jax.ffi.ffi_call("gpuprivacy_numpy_sort", result, vmap_method="expand_dims")(rows, axis=np.int64(-1))[-1]
'''

RANDOM = '''
import jax, jax.numpy as jnp
def f(rows, valid):
    return jnp.where(valid, rows, 0.0).sum() + jax.random.normal(jax.random.key(0))
'''

# Trace-time introspection: look for a float64 array holding SECRET anywhere in the process
# (frames and the gc heap), and report whether one was found.
INTROSPECTION = '''
import gc, sys
import numpy as np
import jax.numpy as jnp

def _found():
    for obj in gc.get_objects():
        try:
            if isinstance(obj, np.ndarray) and obj.dtype == np.float64 and obj.size < 10**6 and (obj == 0.9).any():
                return True
        except Exception:
            pass
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, np.ndarray) and value.dtype == np.float64 and (value == 0.9).any():
                return True
        frame = frame.f_back
    return False

def f(rows, valid):
    return jnp.where(valid, rows, 0.0).sum() * 0.0 + (1.0 if _found() else 0.0)
'''

ATTACKS = {
    "custom_vmap": (CUSTOM_VMAP, "custom_vmap"),
    "debug_callback": (DEBUG_CALLBACK, "debug_callback"),
    "io_callback": (IO_CALLBACK, "io_callback"),
    "pure_callback_raises": (PURE_CALLBACK_RAISES, "pure_callback"),
    "ffi_call": (FFI_CALL, "ffi_call"),
    "randomness": (RANDOM, "random"),
}


def _load(source):
    namespace = {}
    exec(compile(source, "<attack>", "exec"), namespace)  # noqa: S102  (the positive control runs it in-process)
    return namespace["f"]


def test_the_custom_vmap_attack_works_when_trusted():
    # Positive control: trusted, the batching rule sees other subsets and detects the extra row on
    # subsets that exclude it.
    values = np.asarray(oracle.evaluate(oracle.trusted(_load(CUSTOM_VMAP)), X_PLUS, subsets.removals(13, 1)))
    excluded = values[1 + int(np.flatnonzero(np.sort(X_PLUS) == SECRET)[0])]  # removal of the secret row
    assert excluded == 1.0  # it "saw" 0.9 on a subset that does not contain it
    clean = np.asarray(oracle.evaluate(oracle.trusted(_load(CUSTOM_VMAP)), X, subsets.removals(12, 1)))
    assert (clean == 0.0).all()


def test_the_ffi_call_attack_works_when_trusted():
    # Positive control: trusted, the oracle runs the engine's native target on its rows (the largest row).
    values = np.asarray(oracle.evaluate(oracle.trusted(_load(FFI_CALL)), X_PLUS, subsets.removals(13, 1)))
    assert values[0] == SECRET and values.max() == SECRET


def test_the_introspection_attack_works_when_trusted():
    values = np.asarray(oracle.evaluate(oracle.trusted(_load(INTROSPECTION)), X_PLUS, subsets.removals(13, 0)))
    assert values[0] == 1.0  # trace-time introspection found the engine's array holding the secret


@pytest.mark.parametrize("name", sorted(ATTACKS))
@pytest.mark.parametrize("entry", ["evaluate", "levels", "powerset", "sens_o_matic", "blackbox"])
def test_every_attack_is_refused_by_name_through_every_entry_point(name, entry, monkeypatch):
    source, primitive = ATTACKS[name]
    f = oracle.untrusted(source=source, name="f")
    touched = []
    original = oracle.canonical_order
    monkeypatch.setattr("gpuprivacy.oracle._evaluate.canonical_order",
                        lambda data: touched.append(1) or original(data))
    calls = {
        "evaluate": lambda: oracle.evaluate(f, X_PLUS, subsets.removals(13, 2)),
        "levels": lambda: oracle.evaluate_levels(f, X_PLUS, depth=1),
        "powerset": lambda: oracle.evaluate_powerset(f, X_PLUS[:6]),
        "sens_o_matic": lambda: wrappers.sens_o_matic(jax.random.key(0), X_PLUS[:6], oracle_fn=f,
                                                      grid=np.array([0.0, 1.0]), epsilon=1.0, beta=0.5),
        "blackbox": lambda: blackbox.blackbox_estimate(jax.random.key(0), np.r_[np.linspace(0.1, 0.5, 39), SECRET],
                                                       f, design=designs.sample_and_aggregate(40, t=10),
                                                       epsilon=1.0, lower=0.0, upper=1.0, resolution=0.25, beta=0.5),
    }
    with pytest.raises(oracle.OracleRefused, match=primitive):
        calls[entry]()
    assert not touched, "the data were read before the refusal"


@pytest.mark.parametrize("name", ["custom_vmap", "debug_callback"])
def test_a_plain_callable_is_sandboxed_by_default(name, tmp_path, monkeypatch):
    # A function object the engine did not write is untrusted: its module source goes to the sandbox.
    module = tmp_path / f"analyst_{name}.py"
    module.write_text(ATTACKS[name][0])
    monkeypatch.syspath_prepend(str(tmp_path))
    f = __import__(f"analyst_{name}").f
    with pytest.raises(oracle.OracleRefused, match=ATTACKS[name][1]):
        oracle.evaluate(f, X_PLUS, subsets.removals(13, 1))
    sys.modules.pop(f"analyst_{name}", None)


def test_the_introspection_attack_is_neutralised():
    # In the sandbox the oracle's Python runs where there is no data: it finds nothing, and the
    # engine's values equal the honest values on x and on x plus the secret row.
    f = oracle.untrusted(source=INTROSPECTION, name="f")
    for data in (X, X_PLUS):
        values = np.asarray(oracle.evaluate(f, data, subsets.removals(data.size, 1)))
        assert (values == 0.0).all()


def test_an_untrusted_file_oracle_and_the_same_source_agree_bitwise_with_the_trusted_library(tmp_path):
    path = tmp_path / "analyst.py"
    path.write_text("import jax.numpy as jnp\n\ndef f(rows, valid):\n"
                    "    return jnp.where(valid, rows, 0.0).astype(jnp.float64).sum(axis=0) / "
                    "valid.sum(dtype=jnp.int64).astype(jnp.float64)\n")
    family = subsets.removals(X.size, 2)
    sandboxed = np.asarray(oracle.evaluate(oracle.untrusted(str(path), "f"), X, family))
    library = np.asarray(oracle.evaluate(oracle.mean, X, family))
    np.testing.assert_array_equal(sandboxed, library)


def test_untrusted_oracles_cannot_be_called_directly_and_factories_are_named():
    f = oracle.untrusted(source="def f(rows, valid):\n    return rows.sum()\n", name="f")
    with pytest.raises(TypeError, match="runs only inside gpuprivacy's engine"):
        f(np.zeros(3), np.ones(3, bool))
    with pytest.raises(TypeError, match=r"oracle factory.*quantile\(0.5\)"):
        oracle.evaluate(oracle.quantile, X, subsets.removals(X.size, 1))
    with pytest.raises(ValueError, match="exactly one of a file path or source"):
        oracle.untrusted(name="f")
    with pytest.raises(ValueError, match="cannot read the oracle file"):
        oracle.untrusted("/nonexistent/analyst.py", "f")


def test_a_lambda_is_refused_with_both_ways_out():
    with pytest.raises(oracle.OracleRefused, match=r"oracle\.trusted\(f\).*untrusted\('file\.py', 'f'\)"):
        oracle.evaluate(lambda rows, valid: rows.sum(), X, subsets.removals(X.size, 1))


def test_the_sandbox_costs_once_per_oracle_and_shape():
    source = "import jax.numpy as jnp\ndef f(rows, valid):\n    return jnp.where(valid, rows, 0.0).max()\n"
    f = oracle.untrusted(source=source, name="f")
    oracle.evaluate(f, X, subsets.removals(X.size, 1))
    from gpuprivacy.oracle import _sandbox

    requests = []
    original = _sandbox.trace_in_sandbox
    _sandbox_trace = lambda **kw: requests.append(kw) or original(**kw)  # noqa: E731
    try:
        _sandbox.trace_in_sandbox = _sandbox_trace
        for _ in range(3):
            oracle.evaluate(f, X, subsets.removals(X.size, 1))
    finally:
        _sandbox.trace_in_sandbox = original
    assert requests == []


AUDIT_SAMPLES = 10**4
AUDIT_CONFIDENCE = 1 - 1e-6


@pytest.mark.parametrize("entry", ["sens-o-matic", "blackbox-estimate"])
def test_the_auditor_confirms_the_claims_against_the_neutralised_attack(entry):
    # The claim is "private for EVERY oracle": with the analyst's introspection oracle (sandboxed, so it
    # finds nothing) the audited epsilon stays within the claim, >= 10^4 samples per side, 1 - 1e-6.
    from gpuprivacy import audit

    f = oracle.untrusted(source=INTROSPECTION, name="f")
    mechanism = audit.get(entry, oracle_fn=f, **({"capacity": 8} if entry == "sens-o-matic" else {}))
    pairs = list(mechanism.worst_case_pairs)
    if entry == "sens-o-matic":
        pairs.append((X[:4], np.r_[X[:4], SECRET]))  # the dataset with and without the secret row
    for x, x_prime in pairs:
        result = audit.audit(mechanism, x, x_prime, num_samples=AUDIT_SAMPLES, confidence=AUDIT_CONFIDENCE,
                             key=jax.random.key(7))
        assert not result.violated, result
        assert result.epsilon_lower <= result.claimed_epsilon


def test_the_audit_has_power_against_a_trusted_attack():
    # Companion power check: the same pipeline DOES flag Sens-o-Matic when the custom_vmap attack is trusted
    # (runs in-process and sees the batch), at the same sample size and confidence.
    from gpuprivacy import audit

    mechanism = audit.get("sens-o-matic", oracle_fn=oracle.trusted(_load(CUSTOM_VMAP)), grid_size=2, epsilon=1.0,
                          capacity=8)
    result = audit.audit(mechanism, X[:4], np.r_[X[:4], SECRET], num_samples=AUDIT_SAMPLES,
                         confidence=AUDIT_CONFIDENCE, key=jax.random.key(7))
    assert result.violated and result.epsilon_lower > 1.0, result


@pytest.mark.parametrize("source,cause", [
    ("def f(rows, valid):\n    return rows\n", r"must return a scalar of a real dtype, got float64\[13\]"),
    ("def f(rows, valid)\n    return 1\n", "SyntaxError"),
    ("def f(rows, valid):\n    return 'a'\n", "not a valid JAX type"),
    ("def g(rows, valid):\n    return rows.sum()\n", "no callable named 'f'"),
])
def test_bad_oracles_get_one_clear_error_naming_the_oracle_and_nothing_is_evaluated(source, cause, monkeypatch):
    touched = []
    original = oracle.canonical_order
    monkeypatch.setattr("gpuprivacy.oracle._evaluate.canonical_order",
                        lambda data: touched.append(1) or original(data))
    with pytest.raises(oracle.OracleRefused, match=rf"(?s)oracle 'f' refused: .*{cause}"):
        oracle.evaluate(oracle.untrusted(source=source, name="f"), X_PLUS, subsets.removals(13, 1))
    assert not touched
