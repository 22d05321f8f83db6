"""The inverse sensitivity mechanism (Asi & Duchi 2020; Durfee 2025, Def 4.1, (M.2)).

Continuous setting: Step 1 of Alg 1 unchanged, then a *uniform* draw inside
the chosen piece (Durfee 2025, Def 4.1). Shares the segment engine of
:mod:`._piecewise_laplace`.
"""

from __future__ import annotations

from gpuprivacy._compat import renamed_keywords
from gpuprivacy._checks import check_epsilon
from gpuprivacy._typing import Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._instance_optimal._local_bounds_type import LocalBounds, _check_smoothness
from gpuprivacy.mechanisms._instance_optimal._piecewise_laplace import release_from_bounds
from gpuprivacy.mechanisms._release import Release


@renamed_keywords(rho="smoothness")
def inverse_sensitivity(key: Key, bounds: LocalBounds, *, epsilon: float, smoothness: float = 0.0) -> Release:
    """The inverse sensitivity mechanism in the continuous setting (Durfee 2025, Def 4.1, (M.2)).

    .. math::
        \\pi_{\\text{inv}}(y) = \\frac{\\exp(-\\mathrm{len}_f(y; x)\\,\\varepsilon/2)}{W},
        \\qquad W = \\sum_{l \\ge 1} e^{-l\\varepsilon/2}\\big(\\Delta(x;l) + \\Delta(x;-l)\\big),

    with :math:`\\mathrm{len}_f(y;x) = \\ell(y;x)` for sample-monotone ``f``
    (Cor 4.1). Sampled as Step 1 of Alg 1 followed by a uniform draw in the
    chosen piece. For non-sample-monotone ``f`` this is "Alg 1 + uniform",
    which is still :math:`\\varepsilon`-DP. By Thm 2
    its absolute error is stochastically larger than that of
    :func:`piecewise_laplace`. ``smoothness > 0``: the smooth variant of
    Asi & Duchi (2020b), with ``len = 0`` on :math:`[f(x)-\\rho, f(x)+\\rho]`.

    Args:
      key: a single PRNG key.
      bounds: local bounds of one dataset.
      epsilon: privacy parameter, finite and > 0.
      smoothness: smoothing width (public), >= 0.

    Returns:
      ``Release(value, PiecewiseLaplaceInfo)``.

    Raises:
      ValueError, TypeError: for bad parameters or malformed bounds.

    Privacy:
      :math:`\\varepsilon`-DP when the bounds satisfy (V0)-(V2) (Durfee 2025, Sec. 5).
      Idealized numerics.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> b = io.make_local_bounds([5.0, 5.2, 10.0], [5.0, 4.5, 0.0])
      >>> r = io.inverse_sensitivity(jax.random.key(0), b, epsilon=1.0)
      >>> bool(0.0 <= float(r.value) <= 10.0)
      True

    References:
      Asi & Duchi, `Instance-optimality in differential privacy via
      approximate inverse sensitivity mechanisms <https://arxiv.org/abs/2005.10630>`_,
      NeurIPS 2020; Durfee 2025, Def 4.1, Cor 4.1, Thm 2.
    """
    return release_from_bounds(key, bounds, epsilon, smoothness, "inverse_sensitivity",
                               inverse_sensitivity_guarantee)


@renamed_keywords(rho="smoothness")
def inverse_sensitivity_guarantee(*, epsilon: float, smoothness: float = 0.0) -> PureDP:
    """:math:`\\varepsilon`-DP (Durfee 2025, Def 4.1; Asi & Duchi 2020)."""
    _check_smoothness(smoothness)
    return PureDP(check_epsilon(epsilon))
