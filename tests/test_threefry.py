"""gpuprivacy._threefry: jax.random's draws bit for bit, with the hash on rank-1 operands under vmap."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import _threefry as threefry

KEYS = jax.random.split(jax.random.key(7), 12)
GRID = KEYS.reshape(3, 4)
SHAPES = [(), (1,), (5,), (3, 4)]


def _pair(name, dtype, **jax_options):
    """``(ours, jax.random's)`` for the draw ``name``, each ``(key, shape) -> array``."""
    return (lambda k, s: getattr(threefry, name)(k, s, dtype),
            lambda k, s: getattr(jax.random, name)(k, s, dtype, **jax_options))


DRAWS = {f"{name}-{np.dtype(dtype).name}": _pair(name, dtype)
         for name in ("bits", "uniform", "normal", "laplace") for dtype in
         ((jnp.uint32, jnp.uint64) if name == "bits" else (jnp.float32, jnp.float64))}
DRAWS["gumbel-float64"] = _pair("gumbel", jnp.float64, mode="high")
DRAWS["split"] = (lambda k, s: jax.random.key_data(threefry.split(k, max(1, int(np.prod(s))))),
                  lambda k, s: jax.random.key_data(jax.random.split(k, max(1, int(np.prod(s))))))

# How a release calls a draw: eagerly, jitted, vmapped over keys (one and two levels), and with one key
# under a vmap over something else (the key not batched). Eager calls run each operation as its own program (a
# product and a sum are never fused into one multiply-add there), jitted ones inside one: both are checked.
# Eagerly and under two vmaps at two shapes (each eager operation at a new shape compiles a program of its own;
# jax.random under two vmaps compiles slowly: what this module avoids).
CALLS = {
    "eager": (lambda f: f(KEYS[0]), [(), (3, 4)]),
    "jit": (lambda f: jax.jit(f)(KEYS[0]), SHAPES),
    "vmap": (lambda f: jax.jit(jax.vmap(f))(KEYS), SHAPES),
    "vmap-of-vmap": (lambda f: jax.jit(jax.vmap(jax.vmap(f)))(GRID), [(), (3, 4)]),
    "key-not-batched": (lambda f: jax.jit(jax.vmap(lambda i: f(KEYS[1])))(jnp.arange(3)), SHAPES),
}


def _bitwise_equal(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8), err_msg=what)


def _all_draws(side, shapes):
    """Every draw at every shape, in one function (one program per way of calling it)."""
    return lambda k: {(draw, shape): fns[side](k, shape) for draw, fns in DRAWS.items() for shape in shapes}


@pytest.mark.parametrize("call", CALLS)
def test_every_draw_is_jax_random_s_bit_for_bit(call):
    run, shapes = CALLS[call]
    ours, theirs = run(_all_draws(0, shapes)), run(_all_draws(1, shapes))
    for what in ours:
        _bitwise_equal(ours[what], theirs[what], f"{what} called {call}")


def _hash_operand_ranks(fn, *args) -> set[int]:
    """Ranks of the operands of every Threefry hash in the lowered program of ``fn``."""
    text = jax.jit(fn).lower(*args).as_text()
    ranks = set()
    for signature in re.findall(r"func\.func private @threefry2x32\w*\(([^)]*)\)", text):
        for shape in re.findall(r"tensor<([0-9x]*)xui32>", signature):
            ranks.add(len([d for d in shape.split("x") if d]))
    assert ranks, "no Threefry hash found in the lowered program"
    return ranks


def test_the_hash_is_rank_one_under_nested_vmap_where_jax_random_s_is_not():
    ours = jax.vmap(jax.vmap(lambda k: threefry.bits(k, (3, 4), jnp.uint64)))
    theirs = jax.vmap(jax.vmap(lambda k: jax.random.bits(k, (3, 4), jnp.uint64)))
    assert _hash_operand_ranks(ours, GRID) == {1}
    assert max(_hash_operand_ranks(theirs, GRID)) >= 3  # the positive control: what the flat hash avoids
    assert _hash_operand_ranks(jax.vmap(lambda k: threefry.normal(k, (5,))), KEYS) == {1}


def test_other_keys_and_settings_go_to_jax_random():
    legacy = jax.random.PRNGKey(3)  # a raw uint32 key
    _bitwise_equal(threefry.uniform(legacy, (4,)), jax.random.uniform(legacy, (4,)))
    rbg = jax.random.key(3, impl="rbg")
    _bitwise_equal(threefry.normal(rbg, (4,)), jax.random.normal(rbg, (4,)))
    _bitwise_equal(jax.random.key_data(threefry.split(rbg, 3)), jax.random.key_data(jax.random.split(rbg, 3)))
    previous = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", False)
    try:
        _bitwise_equal(threefry.bits(KEYS[0], (5,), jnp.uint64), jax.random.bits(KEYS[0], (5,), jnp.uint64))
        _bitwise_equal(jax.vmap(lambda k: threefry.gumbel(k, (3,)))(KEYS),
                       jax.vmap(lambda k: jax.random.gumbel(k, (3,), mode="high"))(KEYS))
    finally:
        jax.config.update("jax_threefry_partitionable", previous)


def test_several_draws_from_one_hash_are_the_draws_one_by_one():
    def together(key):
        a, b, c = threefry.split(key, 3)
        return threefry.draws(("uniform", a, ()), ("normal", b, (3,)), ("laplace", c, (2, 2)))

    def one_by_one(key):
        a, b, c = threefry.split(key, 3)
        return [threefry.uniform(a, ()), threefry.normal(b, (3,)), threefry.laplace(c, (2, 2))]

    for run in (lambda f: f(KEYS[0]), lambda f: jax.jit(jax.vmap(f))(KEYS)):
        for ours, theirs in zip(run(together), run(one_by_one)):
            _bitwise_equal(ours, theirs)
    # The split's hash and one for the three draws, where one by one there are four.
    hashes = [len(re.findall(r"call @threefry2x32", jax.jit(jax.vmap(f)).lower(KEYS).as_text()))
              for f in (together, one_by_one)]
    assert hashes == [2, 4], hashes
