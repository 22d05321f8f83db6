"""One registry of sampler cases driving the invariant tests (STYLE rule 22)."""

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from gpuprivacy import noise


class Case(NamedTuple):
    name: str
    sample: Callable  # (key, shape) -> Array
    dtype: np.dtype


# noise.gaussian and noise.gumbel are argument checks around jax.random.normal
# and jax.random.gumbel, whose jit/vmap invariance is JAX's; they are left out
# to keep the compile-bound invariant tests fast (test_continuous checks them).
SAMPLER_CASES = [
    Case("laplace", lambda key, shape: noise.laplace(key, shape), np.dtype(np.float64)),
    Case("truncated_laplace", lambda key, shape: noise.truncated_laplace(key, -1.0, 3.0, shape),
         np.dtype(np.float64)),
    Case("exponential_float32", lambda key, shape: noise.exponential(key, shape, jnp.float32),
         np.dtype(np.float32)),
    Case("discrete_laplace", lambda key, shape: noise.discrete_laplace(key, 2.5, shape), np.dtype(np.int64)),
    Case("discrete_gaussian", lambda key, shape: noise.discrete_gaussian(key, 1.5, shape), np.dtype(np.int64)),
    Case("secure_laplace",
         lambda key, shape: noise.secure_laplace(key, jnp.full(shape, 0.3), epsilon=1.0, sensitivity=1.0,
                                                 granularity=2.0**-4),
         np.dtype(np.float64)),
    Case("secure_gaussian",
         lambda key, shape: noise.secure_gaussian(key, jnp.full(shape, -2.7), sigma=1.0, granularity=2.0**-4),
         np.dtype(np.float64)),
]
