"""The Laplace-mechanism median baseline: the clamped median plus Laplace noise at the global sensitivity."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import check_epsilon, check_key, epsilon_ok, fail_closed
from gpuprivacy._config import require_x64
from gpuprivacy._sort import sort
from gpuprivacy._typing import Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._classic import LaplaceInfo
from gpuprivacy.mechanisms._instance_optimal._dataset_checks import check_dataset, check_domain, pure_guarantee
from gpuprivacy.mechanisms._release import Release, stated_guarantee


def laplace_median(key: Key, data: Any, *, epsilon: float, lower: float, upper: float,
                   clip: bool = False) -> Release:
    """Baseline: median plus :math:`\\mathrm{Lap}(\\mathrm{GS}/\\varepsilon)`, GS = upper - lower (swap).

    The global-sensitivity Laplace mechanism of Dwork et al. (2006) on the
    median, clipped into the domain (post-processing). Used as the "plain
    Laplace" baseline in the seed-001 study.

    .. math:: M(x) = \\mathrm{clip}(\\mathrm{med}(x) + \\mathrm{Lap}((u - \\ell)/\\varepsilon), \\ell, u)

    Args:
      key: a single PRNG key.
      data: ``float64[n]`` values in the domain.
      epsilon: privacy parameter.
      lower, upper: public domain.
      clip: clip out-of-domain data instead of raising.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.laplace_median(jax.random.key(0), [1.0, 2.0, 3.0], epsilon=1.0, lower=0.0, upper=4.0)
      >>> bool(0.0 <= float(r.value) <= 4.0)
      True
    """
    require_x64("laplace_median")
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    lower, upper = check_domain(lower, upper)
    x = check_dataset(data, lower, upper, clip)
    guarantee = stated_guarantee(laplace_median_guarantee, epsilon=epsilon, lower=lower, upper=upper, clip=clip)
    value, med = _laplace_median(key, x, jnp.asarray(epsilon, jnp.float64), lower, upper)
    ok = epsilon_ok(epsilon)  # a traced epsilon skipped check_epsilon: withhold the release if it is invalid
    return Release(fail_closed(value, ok), LaplaceInfo(jnp.asarray((upper - lower) / epsilon), med,
                                                       valid=jnp.asarray(ok)), guarantee)


@jax.jit
def _laplace_median(key, x, epsilon, lower, upper):
    n = x.shape[0]
    med = sort(x)[(n + 1) // 2 - 1]
    noise = threefry.laplace(key, (), jnp.float64)
    return jnp.clip(med + (upper - lower) / epsilon * noise, lower, upper), med


def laplace_median_guarantee(*, epsilon: float, lower: float, upper: float,
                             clip: bool = False) -> PureDP:
    """:math:`\\varepsilon`-DP (Dwork et al. 2006)."""
    return pure_guarantee(epsilon, lower, upper, clip)
