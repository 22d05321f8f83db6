"""Applications of the privacy wrappers (Linder et al. 2025, App. A): oracles for average, 1-D convex ERM, edge density.

These are *trusted* helpers that build oracles ``f(rows, valid) -> scalar``
for :func:`sens_o_matic`, :func:`subset_extension` and the other wrappers.
Each wrapper stays private for every oracle; these choices make them
accurate (Cor A.1, Thms A.3-A.4, Sec A.3).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy.oracle import is_trusted, trusted

from gpuprivacy._checks import (
    check_finite_real,
    check_int,
    check_key,
    check_positive,
    check_probability,
)


@functools.lru_cache(maxsize=16)
def average_oracle(empty_value: float = 0.0):
    """``avg(z) = (1/|z|) sum_{v in z} v`` for 1-D rows, with the public convention ``avg(empty) = empty_value``.

    Cor A.1: if all points lie within sigma of each other,
    ``DS_lam(x) <= lam sigma/(n - lam)`` and avg is ``sigma/(n - lam + 1)``-Lipschitz
    on ``N_lam(x)``. So Sens-o-Matic on a public grid needs no sigma, and
    Subset-Extension with a claimed ``c = sigma/(n_min - 21 tau + 1)`` (n_min a
    *public* lower bound on n) releases ``avg(x) + Lap(600 c/epsilon)``.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy.mechanisms import wrappers
      >>> x = np.linspace(0.45, 0.55, 14)
      >>> out = wrappers.sens_o_matic(jax.random.key(3), x, oracle_fn=wrappers.average_oracle(),
      ...                             grid=np.linspace(0, 1, 21), epsilon=4.0, beta=0.1)
      >>> abs(float(out.value) - 0.5) <= 0.05
      True
    """
    empty_value = check_finite_real("empty_value", empty_value)

    def average(rows, valid):
        count = valid.sum(dtype=jnp.int64).astype(jnp.float64)
        total = jnp.where(valid, rows.astype(jnp.float64), 0.0).sum()
        return jnp.where(count > 0, total / jnp.maximum(count, 1.0), empty_value)

    return trusted(average)  # package code: the trusted fast path


def _huber_derivative(residual, width):
    return jnp.clip(residual, -width, width)


@functools.lru_cache(maxsize=16)
def convex_minimizer_oracle(*, lower: float, upper: float, huber_width: float = 1.0, steps: int = 200,
                            learning_rate: float = 0.5):
    """User-level 1-D convex ERM (App A.2): ``theta*(z) = argmin_{theta in [lower, upper]} L(theta, z)``.

    Rows are users ``[m]`` (m items each, an atom is a user), the loss is the
    Huber loss of ``theta - item`` (convex, G = huber_width-Lipschitz):

    .. math:: L(\\theta, z) = \\frac{1}{|z| m} \\sum_{u \\in z} \\sum_{j} h(\\theta - u_j).

    Fitted with ``optax.sgd`` for a fixed number of steps from the midpoint
    and projected onto [lower, upper] (deterministic, vmapped over subsets by
    the evaluator). The empty subset returns the midpoint (public convention).

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy.mechanisms import wrappers
      >>> f = wrappers.convex_minimizer_oracle(lower=-5.0, upper=5.0)
      >>> rows = np.array([[0.0, 1.0], [2.0, 3.0]])
      >>> round(float(f(rows, np.array([True, True]))), 3)
      1.5
    """
    lower, upper = check_finite_real("lower", lower), check_finite_real("upper", upper)
    if not lower < upper:
        raise ValueError(f"lower must be < upper, got {lower!r}, {upper!r}.")
    huber_width = check_positive("huber_width", huber_width)
    steps = check_int("steps", steps, minimum=1)
    learning_rate = check_positive("learning_rate", learning_rate)
    import optax  # here, not at import: optax is a third of `import gpuprivacy`'s own time

    optimizer = optax.sgd(learning_rate)

    def minimizer(rows, valid):
        items = rows.astype(jnp.float64).reshape(rows.shape[0], -1)
        weight = jnp.broadcast_to(valid[:, None], items.shape).astype(jnp.float64)
        total = jnp.maximum(weight.sum(), 1.0)

        def gradient(theta):
            return (weight * _huber_derivative(theta - items, huber_width)).sum() / total

        def step(_, carry):
            from optax import apply_updates  # not from the closure: it holds plain values and the optimizer

            theta, state = carry
            updates, state = optimizer.update(gradient(theta), state, theta)
            return jnp.clip(apply_updates(theta, updates), lower, upper), state

        start = jnp.asarray((lower + upper) / 2, jnp.float64)
        theta, _ = jax.lax.fori_loop(0, steps, step, (start, optimizer.init(start)))
        return theta

    return trusted(minimizer)  # package code: the trusted fast path


def _density(adjacency, valid):
    size = valid.sum(dtype=jnp.int64).astype(jnp.float64)
    both = valid[:, None] & valid[None, :]
    edges = jnp.where(both, adjacency, 0.0).sum() / 2
    pairs = size * (size - 1) / 2
    return jnp.where(size > 1, edges / jnp.maximum(pairs, 1.0), 0.0)


@functools.lru_cache(maxsize=16)
def induced_subgraph_oracle(graph_fn):
    """Node privacy (Linder et al. 2025, Sec. 7): rows ``[id, adjacency row over the public id universe]`` -> induced subgraph.

    The (trusted) adapter keeps only the columns of the vertices present in
    the subset, so ``graph_fn(adjacency[cap, cap], valid)`` sees exactly the
    induced subgraph: never an edge to a removed vertex, never n. The
    result runs in-process only when ``graph_fn`` is trusted
    (:func:`gpuprivacy.oracle.trusted`); an untrusted ``graph_fn`` is refused
    by the sandbox.
    """
    def oracle(rows, valid):
        ids = jnp.where(valid, rows[:, 0], 0).astype(jnp.int64)
        adjacency = rows[:, 1:][:, ids].astype(jnp.float64)
        adjacency = jnp.where(valid[:, None] & valid[None, :], adjacency, 0.0)
        return graph_fn(adjacency, valid)

    # The adapter is package code; the whole oracle runs in-process only when graph_fn is trusted too
    # (gpuprivacy.oracle.trusted, or the package's own _density). Otherwise it goes to the sandbox, which
    # refuses a closure over a function it cannot see, so an analyst's graph statistic never runs here.
    return trusted(oracle) if graph_fn is _density or is_trusted(graph_fn) else oracle


def edge_density_oracle():
    """Edge density of the induced subgraph, ``e(S) = E(S)/C(|S|, 2)`` (0 for |S| <= 1), App A.3.

    For G(n, p) the down sensitivity is about ``lam sqrt(p log n / n**3)``
    (Lemma A.6), far below the 1/n of a naive node-level Laplace.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import wrappers
      >>> rows = wrappers.gnp_adjacency(8, 0.5, key=jax.random.key(0))
      >>> f = wrappers.edge_density_oracle()
      >>> 0.0 <= float(f(rows, rows[:, 0] >= 0)) <= 1.0
      True
    """
    return induced_subgraph_oracle(_density)


def gnp_adjacency(n: int, p: float, *, key, universe: int | None = None) -> np.ndarray:
    """A G(n, p) graph as node rows ``[id, adjacency over universe ids]`` (ids 0..n-1), float64 ``[n, 1 + universe]``."""
    key = check_key(key)
    n = check_int("n", n, minimum=1)
    p = check_probability("p", p, open_interval=False)
    universe = n if universe is None else check_int("universe", universe, minimum=n)
    upper = np.triu(np.asarray(jax.random.bernoulli(key, p, (n, n))), 1)
    adjacency = np.zeros((n, universe))
    adjacency[:n, :n] = (upper | upper.T).astype(np.float64)
    return np.concatenate([np.arange(n, dtype=np.float64)[:, None], adjacency], axis=1)
