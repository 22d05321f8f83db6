"""The approximate (symmetric) variant and the cost-lowering radii (Durfee 2025, Secs. 5.1-5.2).

Radius bounding functions :math:`R_l(x)` (Def 5.1) with

.. math::
    R_l(x) \\le R_{l+1}(x'), \\qquad R_1(x) \\ge \\|f(x) - f(x')\\|_p

for all neighbours give, in one dimension, the local bounds
:math:`U_l = f(x) + \\mathcal R_l(x)`, :math:`L_l = f(x) - \\mathcal R_l(x)`
with :math:`\\mathcal R_l = \\sum_{k \\le l} R_k` (end of §5.1), fed to
Algorithm 1 unchanged; Lemma 5.2 makes it :math:`\\varepsilon`-DP.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_finite_real, check_int, check_nonnegative, check_positive
from gpuprivacy._config import require_x64
from gpuprivacy.mechanisms._instance_optimal._local_bounds_type import LocalBounds


def radius_bounds(center: Any, radii: Any, *, global_sensitivity: float | None = None) -> LocalBounds:
    """Local bounds of the approximate variant from radii :math:`R_1..R_K` (Durfee 2025, Def 5.1, §5.1).

    .. math::
        U_l = f(x) + \\sum_{k \\le l} R_k, \\qquad L_l = f(x) - \\sum_{k \\le l} R_k,

    and beyond ``K`` the global-sensitivity cap :math:`R_l = \\Delta` of
    §5.2 (with our exact tail rule for an unbounded range). The radii must satisfy Def 5.1 for
    the user's ``f`` (e.g. from :func:`corollary_5_2_radii`); with the cap
    they must also be clipped to :math:`\\Delta`.

    Args:
      center: :math:`f(x)`.
      radii: ``[K]`` nonnegative radii :math:`R_1..R_K`.
      global_sensitivity: :math:`\\Delta` for ``l > K`` (None: the range ends
        at :math:`f(x) \\pm \\mathcal R_K`, which needs a bounded range there).

    Returns:
      :class:`LocalBounds`.

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> io.radius_bounds(0.0, [1.0, 2.0], global_sensitivity=2.0).upper.tolist()
      [0.0, 1.0, 3.0]
    """
    require_x64("radius_bounds")
    center = check_finite_real("center", center)
    r = np.asarray(radii, np.float64)
    if r.ndim != 1 or r.size < 1 or not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"radii must be a nonempty 1-D array of finite values >= 0, got {radii!r}.")
    step = 0.0
    if global_sensitivity is not None:
        step = check_positive("global_sensitivity", global_sensitivity)
        if np.any(r > step):
            raise ValueError(f"radii must be clipped to global_sensitivity={step} before the cap "
                             f"(Durfee 2025, Cor 5.1); got max radius {r.max()}.")
    cumulative = np.concatenate([[0.0], np.cumsum(r)])
    one = lambda v: jnp.asarray(v, jnp.float64)
    return LocalBounds(one(center + cumulative), one(center - cumulative), one(step), one(step),
                       one(math.inf), one(-math.inf))


def corollary_5_2_radii(local_sensitivity: float, *, sensitivity_of_local_sensitivity: float, max_pieces: int,
                        global_sensitivity: float | None = None) -> np.ndarray:
    """Radii :math:`R_l = \\min(\\Delta(x) + (l-1)\\Delta', \\Delta)` for ``l = 1..K`` (Durfee 2025, Cor 5.2).

    :math:`\\Delta(x)` is the local sensitivity and :math:`\\Delta'` a public
    bound on its sensitivity (e.g. 1 for triangle counting under edge
    privacy). The min with the global sensitivity is valid (Durfee 2025, Sec. 5.2).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> io.corollary_5_2_radii(1.0, sensitivity_of_local_sensitivity=0.5, max_pieces=4, global_sensitivity=2.0)
      array([1. , 1.5, 2. , 2. ])
    """
    ls = check_nonnegative("local_sensitivity", local_sensitivity)
    slope = check_nonnegative("sensitivity_of_local_sensitivity", sensitivity_of_local_sensitivity)
    K = check_int("max_pieces", max_pieces, minimum=1)
    radii = ls + slope * np.arange(K, dtype=np.float64)
    if global_sensitivity is not None:
        radii = np.minimum(radii, check_positive("global_sensitivity", global_sensitivity))
    return radii


def corollary_5_1_radii(ball_local_sensitivity_bounds: Any, *, tighter: bool = False,
                        global_sensitivity: float | None = None) -> np.ndarray:
    """Radii of Cor 5.1 from certified sups of local-sensitivity upper bounds over balls.

    ``ball_local_sensitivity_bounds[j]`` must be
    :math:`\\sup_{d(x,x'') \\le j} \\tilde\\Delta(x'')` for ``j = 0..K``.
    Paper (default): :math:`R_l = ` entry ``l`` (``l = 1..K``). ``tighter``
    (our addition to Durfee 2025, Sec. 5.2, opt-in): :math:`R_l = ` entry ``l - 1``. Clipped to the
    global sensitivity when given (Durfee 2025, Cor 5.1; see docs/errata.md).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> io.corollary_5_1_radii([1.0, 2.0, 3.0]).tolist(), io.corollary_5_1_radii([1.0, 2.0, 3.0], tighter=True).tolist()
      ([2.0, 3.0], [1.0, 2.0])
    """
    b = np.asarray(ball_local_sensitivity_bounds, np.float64)
    if b.ndim != 1 or b.size < 2 or not np.all(np.isfinite(b)) or np.any(b < 0) or np.any(np.diff(b) < 0):
        raise ValueError("ball_local_sensitivity_bounds must be a 1-D nondecreasing array of >= 2 finite values "
                         f">= 0 (sups over balls of radius 0..K), got {ball_local_sensitivity_bounds!r}.")
    radii = b[:-1] if tighter else b[1:]
    if global_sensitivity is not None:
        radii = np.minimum(radii, check_positive("global_sensitivity", global_sensitivity))
    return radii
