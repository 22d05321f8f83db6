"""Pure-DP black-box estimate: the exponential mechanism on the capped rank score (Steinke & Steinke Thm 4.4).

Step 5 of the covering-design pipeline (:mod:`._grid`) with the score of (A.4) and the
release (A.5) (Steinke & Steinke 2025, Thm 4.4, App. A.1).
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_epsilon, check_key, check_probability
from gpuprivacy.accounting import PureDP
from gpuprivacy.designs import DEFAULT_MAX_WORK, hitting_counts, required_t, robust_order_statistics
from gpuprivacy.mechanisms._covering._grid import _as_grid_values, _info, _prepare_design, grid_values, output_grid
from gpuprivacy.mechanisms._release import Release, stated_guarantee
from gpuprivacy.mechanisms._selection._exponential import exponential_mechanism, exponential_mechanism_probabilities
from gpuprivacy.subsets import SubsetFamily
from gpuprivacy.mechanisms._common import concrete


# ---------------------------------------------------------------------------------------------------------------
# Pure DP: the exponential mechanism (Thm 4.4, (A.4)-(A.5)).

def pure_scores(order_statistics, *, tau: int, num_outputs: int) -> np.ndarray:
    """``max(l_C(y) - tau, tau - lbar_C(y))`` for every grid point y (A.4).

    The counts are capped at a public C, which keeps their sensitivity 1.
    """
    ell, ell_bar = hitting_counts(order_statistics, num_outputs)
    xp = jnp if isinstance(order_statistics, jax.Array) else np
    return xp.maximum(ell - tau, tau - ell_bar).astype(xp.float64)


def blackbox_estimate_probabilities(order_statistics, *, epsilon: float, tau: int, num_outputs: int) -> np.ndarray:
    """Exact output probabilities (A.5) of the pure-DP estimator given F(0..C-1), in float64.

    .. math:: \\Pr[M = y] = \\frac{\\exp(-\\tfrac{\\varepsilon}{2}\\hat\\ell_\\tau(y))}
              {\\sum_{\\hat y} \\exp(-\\tfrac{\\varepsilon}{2}\\hat\\ell_\\tau(\\hat y))}.

    Examples:
      >>> import numpy as np
      >>> from gpuprivacy.mechanisms import blackbox
      >>> p = blackbox.blackbox_estimate_probabilities(np.array([3, 2]), epsilon=1.0, tau=1, num_outputs=4)
      >>> [round(float(x), 4) for x in p]
      [0.1888, 0.1888, 0.3112, 0.3112]
    """
    scores = pure_scores(order_statistics, tau=tau, num_outputs=num_outputs)
    return np.asarray(exponential_mechanism_probabilities(np.asarray(-scores), epsilon=epsilon))


def _pure_parameters(epsilon, beta, grid_size):
    t, cap = required_t("pure", epsilon=epsilon, num_outputs=grid_size, beta=beta)
    return t, cap, cap // 2


def blackbox_estimate_from_values(key, values, *, design: SubsetFamily, epsilon: float, lower: float, upper: float,
                                  resolution: float, beta: float = 1e-2,
                                  max_work: int = DEFAULT_MAX_WORK) -> Release:
    """Pure-DP estimator (Thm 4.4) from oracle values already on the grid (see :func:`blackbox_estimate`).

    Args:
      key: a single PRNG key.
      values: int ``[k]`` grid indices from :func:`grid_values` (0 = min Y / nonresponse).
      design, epsilon, lower, upper, resolution, beta, max_work: as in :func:`blackbox_estimate`.
    """
    concrete("epsilon", epsilon, "blackbox_estimate_from_values")  # calibrated in Python
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    t, cap, tau = _pure_parameters(epsilon, check_probability("beta", beta), grid.size)
    plan = _prepare_design(design, t, cap, max_work)
    guarantee = stated_guarantee(blackbox_estimate_guarantee, epsilon=epsilon)
    gv = _as_grid_values(values, design, grid.size)
    f = robust_order_statistics(gv.indices, design, cap=cap, plan=plan)
    index = _pure_release(key, f, epsilon, tau, grid.size)
    return Release(jnp.asarray(grid)[index], _info(index, t, cap, float(tau), grid.size, design, plan, f, gv),
                   guarantee)


def _pure_release(key, f, epsilon, tau, grid_size):
    utilities = -pure_scores(jnp.asarray(f), tau=tau, num_outputs=grid_size)
    # Our own utilities, traced under the caller's jit: clip=True is the documented map (NaN to the lowest
    # score, +-inf to the largest magnitude) the kernel applies anyway; it is a no-op on finite utilities.
    return exponential_mechanism(key, utilities, epsilon=epsilon, clip=True).value


def blackbox_estimate(key, data, oracle_fn, *, design: SubsetFamily, epsilon: float, lower: float, upper: float,
                      resolution: float, beta: float = 1e-2, present=None, max_work: int = DEFAULT_MAX_WORK,
                      chunk_size: int | None = None, progress: bool = False) -> Release:
    """Pure epsilon-DP estimate of any black-box statistic over a covering design (Thm 4.4).

    The oracle runs on the k kept sets of ``design`` (each of n - m rows); the
    release is the exponential mechanism (A.5) over the grid Y with the
    capped score of (A.4) computed from the exact order statistics F:

    .. math:: \\Pr[M(x) = y] \\propto \\exp\\!\\big(-\\tfrac{\\varepsilon}{2}
              \\max\\{\\ell_C(x,y) - \\tau,\\ \\tau - \\bar\\ell_C(x,y)\\}\\big),
              \\qquad \\tau = \\Big\\lceil \\frac{2}{\\varepsilon}\\ln\\frac{|Y|}{\\beta}\\Big\\rceil,\\ C = 2\\tau.

    Privacy: epsilon-DP under adding/removing one slot (⊥, Sec. 3.2) for ANY
    design and ANY oracle (footnote 10); replacing a row costs 2 epsilon.
    Accuracy (4.7): the design must cover t = 2 tau (checked exactly here); then
    with probability >= 1 - beta, ``min_i v_i <= M <= max_i v_i`` on grid values.

    Args:
      key: a single PRNG key.
      data: ``[n, ...]`` rows (row j = slot j of the design; keep a data-independent order).
      oracle_fn: ``oracle_fn(rows, valid) -> scalar``.
      design: covering design over n slots (e.g. ``designs.plan_design(...).build()``).
      epsilon: > 0.
      lower, upper, resolution: the public output grid.
      beta: accuracy failure probability (sets tau and the t the design must cover).
      present: optional bool ``[n]`` of occupied slots.
      max_work: public limit on exact aggregation work; larger designs are refused before any data is seen.
      chunk_size: oracle evaluation chunk size.
      progress: show a progress bar over the k oracle calls (stderr).

    Returns:
      ``Release(value, BlackboxInfo)``: the grid value released.

    Raises:
      ValueError: for a design that does not cover t, an empty grid, bad parameters, or a design too large to
        aggregate exactly (all decided from public inputs).

    Examples:
      >>> import jax, numpy as np
      >>> from gpuprivacy import designs, oracle
      >>> from gpuprivacy.mechanisms import blackbox
      >>> data = np.linspace(0.0, 1.0, 240)
      >>> design = designs.sample_and_aggregate(240, t=22)
      >>> r = blackbox.blackbox_estimate(jax.random.key(0), data, oracle.median, design=design, epsilon=1.0,
      ...                                lower=0.0, upper=1.0, resolution=0.25, beta=0.1)
      >>> float(r.value) in (0.0, 0.25, 0.5, 0.75, 1.0)
      True

    References:
      Steinke & Steinke, *Privately Estimating Black-Box Statistics*, Algorithm 4.1, Thm 4.4, App. A.1.
    """
    concrete("epsilon", epsilon, "blackbox_estimate")  # calibrated in Python
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    grid = output_grid(lower=lower, upper=upper, resolution=resolution)
    t, cap, _ = _pure_parameters(epsilon, check_probability("beta", beta), grid.size)
    _prepare_design(design, t, cap, max_work)  # refuse bad designs before touching data
    guarantee = stated_guarantee(blackbox_estimate_guarantee, epsilon=epsilon)  # stated before the oracle runs
    values = grid_values(data, oracle_fn, design, lower=lower, upper=upper, resolution=resolution, present=present,
                         chunk_size=chunk_size, progress=progress)
    release = blackbox_estimate_from_values(key, values, design=design, epsilon=epsilon, lower=lower, upper=upper,
                                            resolution=resolution, beta=beta, max_work=max_work)
    return release._replace(guarantee=guarantee)  # the same statement, by the same function


def blackbox_estimate_guarantee(*, epsilon: float) -> PureDP:
    """epsilon-DP (Thm 4.4; the exponential mechanism with a sensitivity-1 score, Dwork & Roth Thm 3.10)."""
    return PureDP(check_epsilon(epsilon))
