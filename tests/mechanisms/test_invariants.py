"""Invariants every public release function must satisfy, over one registry (STYLE rule 22).

XLA compile time dominates these tests on a CPU, so each case compiles one
program, ``jit(vmap(mechanism))`` over a batch of keys, and compares every row
with an eager call: that checks jit == eager (bitwise) and vmap over keys ==
a Python loop over the same keys at once. Mechanisms that cannot be jitted
(host-side oracles or noise) compare ``vmap`` with the loop instead.
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import mechanisms
from gpuprivacy.mechanisms import blackbox, instance_optimal, median, wrappers
from tests.mechanisms._cases import MECHANISM_CASES, RELEASE_CASES

BATCH = 3
NAMESPACES = [mechanisms, wrappers, median, instance_optimal, blackbox]
NOT_COMPARED = {"key", "oracle_fn"}  # the key and the (untrusted) oracle are no privacy parameters


def cases_for(invariant, registry=RELEASE_CASES):
    params = []
    for case in registry:
        if invariant == "vmap" and not case.vmappable:
            continue  # declared, with its reason: see test_non_vmappable_cases_say_why
        marks = [pytest.mark.xfail(strict=True, reason=case.xfail[invariant])] if invariant in case.xfail else []
        params.append(pytest.param(case, id=case.name, marks=marks))
    return pytest.mark.parametrize("case", params)


def call(case, key, data=None):
    return case.mechanism(key, case.data if data is None else data, *case.args, **case.kwargs)


def assert_same_release(a, b):
    assert type(a.info) is type(b.info)
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def row(batched, index):
    return jax.tree_util.tree_map(lambda leaf: leaf[index], batched)


def batch_of(data):
    # Distinct inputs per row, so that a vmap that mixed rows up would show.
    offsets = np.arange(BATCH, dtype=np.float64).reshape((BATCH,) + (1,) * np.ndim(data))
    return data[None] + offsets * 0.25


def public_release_functions():
    """{name: function} of every public function of the namespaces that takes a key and returns a Release."""
    found = {}
    for namespace in NAMESPACES:
        for name in dir(namespace):
            obj = getattr(namespace, name)
            if name.startswith("_") or not inspect.isfunction(obj):
                continue
            signature = inspect.signature(obj)
            takes_key = list(signature.parameters)[:1] == ["key"]
            returns_release = signature.return_annotation in ("Release", mechanisms.Release)
            if takes_key and (returns_release or hasattr(namespace, f"{name}_guarantee")):
                found[f"{namespace.__name__}.{name}"] = obj
    return found


def public_guarantees():
    found = {}
    for namespace in NAMESPACES:
        for name in dir(namespace):
            # stated_guarantee is the helper that calls a guarantee function, not one itself.
            if name.endswith("_guarantee") and not name.startswith("_") and name != "stated_guarantee":
                found[f"{namespace.__name__}.{name}"] = getattr(namespace, name)
    return found


def test_every_public_release_function_has_a_case():
    covered = {id(case.mechanism) for case in RELEASE_CASES}
    missing = sorted(name for name, fn in public_release_functions().items() if id(fn) not in covered)
    assert not missing, f"add a case to tests/mechanisms/_cases.py for {missing}"
    assert len({case.name for case in RELEASE_CASES}) == len(RELEASE_CASES)


@cases_for("shape")
def test_release_shape_and_dtype(key, case):
    release = call(case, key)
    assert isinstance(release, mechanisms.Release)
    if case.value_shape is not None:
        assert release.value.shape == case.value_shape
        assert release.value.dtype == case.value_dtype
    # A leaf is a JAX array, or a public Python/NumPy scalar that depends only on the parameters (e.g. a
    # wrapper's depth tau); a string only where the case declares the release not vmappable.
    scalars = (int, float, bool, np.number) + (() if case.vmappable else (str,))
    for leaf in jax.tree_util.tree_leaves(release.info):
        assert isinstance(leaf, (jax.Array, np.ndarray) + scalars), type(leaf)
    assert all(not name.startswith("_") for name in release.info._fields)


@cases_for("same_key")
def test_same_key_same_release_and_different_keys_differ(key, case):
    release = call(case, key)
    assert_same_release(release, call(case, key))
    others = [call(case, jax.random.fold_in(key, i)) for i in range(1, 4)]
    leaves = [np.concatenate([np.ravel(np.asarray(leaf, dtype=np.float64)) for leaf in jax.tree_util.tree_leaves(r)
                              if not isinstance(leaf, str)]) for r in [release] + others]
    assert any(not np.array_equal(leaves[0], other) for other in leaves[1:]), "four keys gave one release"


@cases_for("vmap")
def test_jit_of_vmap_equals_eager_loop(key, case):
    keys = jax.random.split(key, BATCH)
    data = batch_of(case.data) if case.batch_data else None
    if case.trace_data and case.batch_data:
        batched_fn = jax.vmap(lambda k, d: case.mechanism(k, d, *case.args, **case.traced_kwargs))
        args = (keys, jnp.asarray(data))
    elif case.trace_data:
        batched_fn = jax.vmap(lambda k, d: case.mechanism(k, d, *case.args, **case.traced_kwargs), in_axes=(0, None))
        args = (keys, jax.tree_util.tree_map(jnp.asarray, case.data))
    else:
        batched_fn = jax.vmap(lambda k: call(case, k))
        args = (keys,)
    batched = (jax.jit(batched_fn) if case.jittable else batched_fn)(*args)
    for i in range(BATCH):
        assert_same_release(row(batched, i), call(case, keys[i], None if data is None else data[i]))
    if case.run_trials:
        assert_same_release(mechanisms.run_trials(case.mechanism, key, BATCH, data, *case.args, batched_args=True,
                                                  **case.traced_kwargs), batched)


def test_non_vmappable_cases_say_why():
    # A release left out of the vmap invariant must say why (host-side work between data and noise), and be
    # an exception: every other case is batched.
    out = [case for case in RELEASE_CASES if not case.vmappable]
    assert all(case.notes.get("vmap") for case in out)
    assert len(out) <= 6, [case.name for case in out]


@cases_for("batch_of_keys", MECHANISM_CASES)
def test_batch_of_keys_is_rejected(key, case):
    with pytest.raises(ValueError, match="Use jax.vmap for batching"):
        call(case, jax.random.split(key, 3))


@cases_for("guarantee_on_release")
def test_release_carries_the_guarantee_its_function_states(key, case):
    """Release.guarantee is the ``*_guarantee`` function's value for the same parameters (one source of truth).

    Eagerly, under ``jax.jit`` with the parameters closed over (data traced where the case allows) and
    under ``jax.vmap``: the guarantee is static metadata of the release, never a leaf, so it survives all
    three unchanged. ``guarantee_of`` reads it without drawing noise. The jitted and vmapped calls are
    traced, not compiled (``jax.eval_shape``): a transformed call's output tree, the guarantee in it, is fixed
    when the call is traced and is the one a compiled run returns.
    """
    accepted = inspect.signature(case.guarantee).parameters
    params = {k: v for k, v in case.kwargs.items() if k in accepted}
    expected = case.guarantee(**params, **case.guarantee_kwargs)
    release = call(case, key)
    assert release.guarantee is not None, f"{case.name} returns a release without its guarantee"
    assert release.guarantee == expected
    if case.jittable and case.trace_data:
        traced = jax.eval_shape(jax.jit(lambda k, d: case.mechanism(k, d, *case.args, **case.traced_kwargs)),
                                key, jax.tree_util.tree_map(jnp.asarray, case.data))
        assert traced.guarantee == expected
    if case.vmappable:
        batched = jax.eval_shape(jax.vmap(lambda k: call(case, k)), jax.random.split(key, 2))
        assert batched.guarantee == expected
    assert mechanisms.guarantee_of(case.mechanism, key, case.data, *case.args, **case.kwargs) == expected


def test_a_traced_privacy_parameter_gives_a_release_without_a_stated_guarantee(key):
    out = jax.jit(lambda e: mechanisms.laplace_mechanism(key, 1.0, epsilon=e))(0.5)
    assert out.guarantee is None
    with pytest.raises(ValueError, match="without a guarantee"):
        mechanisms.guarantee_of(jax.jit(lambda e: mechanisms.laplace_mechanism(key, 1.0, epsilon=e)), 0.5)


@cases_for("guarantee_keywords")
def test_guarantee_takes_the_mechanism_keywords(case):
    """One meaning per keyword: a guarantee takes the mechanism's own names for what it depends on.

    Every keyword of ``X_guarantee`` is a keyword of ``X`` with the same
    default (so ``X_guarantee(**params)`` works with the mechanism's params
    restricted to those names), except the declared ``keyword_exceptions``:
    quantities the guarantee needs that the mechanism reads off its data
    (e.g. ``grid_size = len(grid)``, ``num_candidates = len(scores)``).
    Keywords the guarantee does not take are those the guarantee does not
    depend on (the data domain of a rank-based mechanism, a design, a beta
    that only steers accuracy).
    """
    guarantee = case.guarantee
    if case.expected_guarantee is not None:  # the mechanism's params, restricted to the guarantee's keywords
        accepted = inspect.signature(guarantee).parameters
        params = {name: value for name, value in case.kwargs.items() if name in accepted}
        expected = case.expected_guarantee
        expected = expected() if callable(expected) else expected  # computed here, not at collection (_cases.py)
        assert guarantee(**params, **case.guarantee_kwargs) == expected
    for namespace in NAMESPACES:  # the public guarantee, not a test wrapper that fixes a data-derived keyword
        guarantee = getattr(namespace, f"{case.mechanism.__name__}_guarantee", guarantee)
    data_names = list(inspect.signature(case.mechanism).parameters)[1:2 + len(case.args)]
    mechanism_parameters = inspect.signature(case.mechanism).parameters
    mechanism_keywords = set(mechanism_parameters) - NOT_COMPARED - set(data_names)
    guarantee_parameters = inspect.signature(guarantee).parameters
    exceptions = set(case.keyword_exceptions)
    unknown = set(guarantee_parameters) - mechanism_keywords - exceptions
    assert not unknown, f"{guarantee.__name__} takes {sorted(unknown)}, which {case.mechanism.__name__} does not"
    for name in set(guarantee_parameters) & mechanism_keywords:
        default, mechanism_default = guarantee_parameters[name].default, mechanism_parameters[name].default
        if default is inspect.Parameter.empty:
            continue
        if mechanism_default is inspect.Parameter.empty:
            # The mechanism requires it: the guarantee may make it optional only as None ("does not affect
            # the guarantee"), never with a made-up value (a silent lower=0, upper=1 was a bug).
            assert default is None, (name, default, "the mechanism requires it")
        else:
            assert default == mechanism_default, (name, default, mechanism_default)


GUARANTEE_XFAIL: dict[str, str] = {}  # public name -> reason (known library bugs; strict)


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=GUARANTEE_XFAIL[name])]
                 if name in GUARANTEE_XFAIL else [])
    for name in sorted(public_guarantees())])
def test_guarantee_parameters_are_keyword_only(name):
    parameters = inspect.signature(public_guarantees()[name]).parameters.values()
    assert all(parameter.kind is inspect.Parameter.KEYWORD_ONLY for parameter in parameters), \
        [(p.name, p.kind.name) for p in parameters]


@cases_for("legacy_key", MECHANISM_CASES)
def test_legacy_uint32_key_is_accepted(key, case):
    legacy = jax.random.key_data(key)
    assert_same_release(call(case, legacy), call(case, key))
