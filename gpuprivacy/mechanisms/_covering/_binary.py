"""Binary-output black-box estimate: a Laplace-noised hitting-set count (Steinke & Steinke 2025, Sec. 1.2).

Step 5 of the covering-design pipeline (:mod:`._grid`) for Y = {0, 1}.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp

from gpuprivacy import noise as _noise
from gpuprivacy._checks import check_epsilon, check_key, check_probability
from gpuprivacy.accounting import PureDP
from gpuprivacy.designs import DEFAULT_MAX_WORK, required_t, robust_order_statistics
from gpuprivacy.mechanisms._covering._grid import _as_grid_values, _info, _prepare_design, grid_values
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.subsets import SubsetFamily
from gpuprivacy.mechanisms._common import concrete


# ---------------------------------------------------------------------------------------------------------------
# Binary outputs Y = {0, 1} (Steinke & Steinke 2025, Sec. 1.2; explicit thresholds ours).

def blackbox_binary_from_values(key, values, *, design: SubsetFamily, epsilon: float, beta: float = 1e-2,
                                max_work: int = DEFAULT_MAX_WORK) -> Release:
    """Binary-output estimator from grid values in {0, 1} (see :func:`blackbox_binary`)."""
    concrete("epsilon", epsilon, "blackbox_binary_from_values")  # calibrated in Python
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    t, cap = required_t("binary", epsilon=epsilon, beta=check_probability("beta", beta))
    plan = _prepare_design(design, t, cap, max_work)
    guarantee = stated_guarantee(blackbox_binary_guarantee, epsilon=epsilon)
    gv = _as_grid_values(values, design, 2)
    f = robust_order_statistics(gv.indices, design, cap=cap, plan=plan)
    threshold = (t + 1) / 2.0
    index = _binary_release(key, f, epsilon, threshold)
    return Release(index.astype(jnp.float64), _info(index, t, cap, threshold, 2, design, plan, f, gv), guarantee)


@jax.jit
def _binary_kernel(key, count, scale, threshold):
    noisy = count + scale * _noise.laplace(key, (), jnp.float64)
    return (noisy > threshold).astype(jnp.int64)


def _binary_release(key, f, epsilon, threshold):
    count = (jnp.asarray(f) > 0).sum().astype(jnp.float64)  # l_C(x, 0): capped min hitting set of {K_i : v_i = 1}
    return _binary_kernel(key, count, jnp.float64(1.0 / epsilon), jnp.float64(threshold))


def blackbox_binary(key, data, oracle_fn, *, design: SubsetFamily, epsilon: float, beta: float = 1e-2,
                    present=None, max_work: int = DEFAULT_MAX_WORK, chunk_size: int | None = None,
                    progress: bool = False) -> Release:
    """Pure epsilon-DP estimate of a {0, 1}-valued black-box statistic (Steinke & Steinke 2025, Sec. 1.2).

    ``l(x, 0)`` is the minimum number of rows to remove so that every intact
    evaluation outputs 0 (a minimum hitting set of ``{K_i : v_i = 1}``,
    capped at ``C = t + 1``). The release is

    .. math:: M(x) = \\mathbb{1}\\big[\\ell_C(x, 0) + \\mathrm{Lap}(1/\\varepsilon) > (t+1)/2\\big],
              \\qquad t = \\lceil (2/\\varepsilon)\\ln(1/(2\\beta)) \\rceil - 1,

    epsilon-DP (Laplace mechanism on a sensitivity-1 count). Oracle values are
    rounded to the nearest of {0, 1}; NaN or values outside [0, 1] are
    nonresponses (counted as 0). If every evaluation says 1 (0), the output is
    1 (0) with probability >= 1 - beta.

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import designs, oracle
      >>> from gpuprivacy.mechanisms import blackbox
      >>> t, _ = designs.required_t("binary", epsilon=1.0, beta=0.01)
      >>> design = designs.sample_and_aggregate(80, t=t)
      >>> always_one = oracle.trusted(lambda rows, valid: 1.0)  # our own statistic: runs in-process
      >>> int(blackbox.blackbox_binary(jax.random.key(0), np.zeros(80), always_one, design=design, epsilon=1.0).value)
      1

    References:
      Steinke & Steinke 2025, Sec. 1.2 (binary case). The explicit threshold (t + 1)/2 and
      the value of t are ours (two Laplace tails of 1/2 e^{-eps (t+1)/2}), not the paper's.
    """
    concrete("epsilon", epsilon, "blackbox_binary")  # calibrated in Python
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    t, cap = required_t("binary", epsilon=epsilon, beta=check_probability("beta", beta))
    _prepare_design(design, t, cap, max_work)
    guarantee = stated_guarantee(blackbox_binary_guarantee, epsilon=epsilon)  # stated before the oracle runs
    values = grid_values(data, oracle_fn, design, lower=0.0, upper=1.0, resolution=1.0, present=present,
                         chunk_size=chunk_size, progress=progress)
    release = blackbox_binary_from_values(key, values, design=design, epsilon=epsilon, beta=beta, max_work=max_work)
    return release._replace(guarantee=guarantee)  # the same statement, by the same function


def blackbox_binary_guarantee(*, epsilon: float) -> PureDP:
    """epsilon-DP (Laplace noise of scale 1/epsilon on a sensitivity-1 count)."""
    return PureDP(check_epsilon(epsilon))
