"""The higher-dimensional approximate PLM with an exact radial sampler (Durfee 2025, end of Sec. 5.1).

Density on :math:`\\mathbb R^d`, with :math:`r = \\|y - f(x)\\|_p`, radii
:math:`R_l` (Def 5.1), :math:`\\mathcal R_l = \\sum_{k \\le l} R_k` and
:math:`a = \\varepsilon/2`:

.. math::
    \\pi(y) \\propto \\exp\\Big(-a\\Big(l + \\frac{r - \\mathcal R_{l-1}}{R_l}\\Big)\\Big),
    \\qquad r \\in (\\mathcal R_{l-1}, \\mathcal R_l].

Shell masses (Durfee 2025, end of Sec. 5.1, with :math:`\\lambda_l = a/R_l`, :math:`A = \\mathcal R_{l-1}`,
:math:`B = \\mathcal R_l`, :math:`Q` the regularised upper incomplete gamma):

.. math::
    M_l \\propto e^{-la} e^{\\lambda_l A}\\, \\Gamma(d)\\, \\lambda_l^{-d}\\,
    \\big(Q(d, \\lambda_l A) - Q(d, \\lambda_l B)\\big).

Step 1 picks a shell by these masses (log space); Step 2 draws the radius
from the truncated :math:`\\mathrm{Gamma}(d, \\lambda_l)` on :math:`(A, B]`
by bisection on :math:`Q` (exact up to float64, no rejection), and the
direction from the cone measure of the unit :math:`L_p` sphere
(normalised iid Laplace for :math:`p = 1`, Gaussian for :math:`p = 2`).
Beyond ``K`` the radii are the global sensitivity (§5.2 cap): one more
shell with :math:`B = \\infty`.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaincc, gammaln, logsumexp

from gpuprivacy import _threefry as threefry
from gpuprivacy._checks import check_epsilon, check_key, check_noise_scale, check_positive, is_tracer, epsilon_ok
from gpuprivacy._config import require_x64
from gpuprivacy._typing import Key
from gpuprivacy.accounting import PureDP
from gpuprivacy.mechanisms._common import check_choice
from gpuprivacy.mechanisms._release import Release, stated_guarantee, withheld_unless

NORMS = ("l1", "l2")
_BISECTION_STEPS = 64  # bracket / 2^64: below float64 resolution
# Dimensions up to which Q(d, .) is its closed form (d terms an evaluation); above it, JAX's incomplete gamma.
CLOSED_FORM_MAX_DIM = 64
# Terms the closed form holds at once: a vector of values is evaluated in batches of CLOSED_FORM_TERMS // d, so
# that the shells' masses of K radii take O(CLOSED_FORM_TERMS) memory, not O(K d).
CLOSED_FORM_TERMS = 2**20


class VectorInfo(NamedTuple):
    """Side information of :func:`piecewise_laplace_vector`.

    Attributes:
      epsilon: privacy parameter (public).
      nonprivate_value: :math:`f(x)` (NOT private).
      nonprivate_radius: the sampled :math:`\\|y - f(x)\\|_p` (NOT private).
    """

    epsilon: jax.Array
    nonprivate_value: jax.Array
    nonprivate_radius: jax.Array
    valid: jax.Array = True


def regularized_upper_gamma(d: int, x):
    """Q(d, x), the regularised upper incomplete gamma at an integer ``d >= 1``, elementwise over ``x >= 0``.

    For integer d it is the Poisson CDF :math:`Q(d, x) = \\sum_{k < d} e^{-x} x^k / k!` (DLMF 8.4.10), summed
    here term by term in log space (all terms positive: no cancellation) for ``d <= CLOSED_FORM_MAX_DIM``; larger
    dimensions use ``jax.scipy.special.gammaincc`` (one term per dimension would cost more than its series). Both
    are within 1e-13 relative of mpmath (d = 1..64, x = 1e-6..700: up to 7e-14 here, up to 9e-14 for gammaincc). The
    closed form compiles in a fraction of the time: XLA:CPU compiles the incomplete gamma's series and continued
    fraction over a vector in 0.15 s.
    """
    x = jnp.asarray(x, jnp.float64)
    if d > CLOSED_FORM_MAX_DIM:
        # One scalar at a time: XLA:CPU compiles the incomplete gamma's loops over a vector in about 3x the time of
        # the scalar loops.
        return gammaincc(float(d), x) if x.ndim == 0 else jax.lax.map(lambda r: gammaincc(float(d), r), x)
    if x.ndim == 1 and x.shape[0] * d > CLOSED_FORM_TERMS:
        return jax.lax.map(functools.partial(_poisson_sum, d), x, batch_size=max(1, CLOSED_FORM_TERMS // d))
    return _poisson_sum(d, x)


def _poisson_sum(d: int, x):
    """:func:`regularized_upper_gamma`'s closed form: its d terms along a last axis, summed."""
    terms_shape = (1,) * x.ndim + (d,)  # the terms along a last axis (explicit ranks: no implicit promotion)
    k = np.arange(d, dtype=np.float64).reshape(terms_shape)
    log_factorial = np.asarray([math.lgamma(i + 1.0) for i in range(d)]).reshape(terms_shape)
    positive = x > 0
    log_x = jnp.log(jnp.where(positive, x, 1.0))
    q = jnp.sum(jnp.exp(-x[..., None] + k * log_x[..., None] - log_factorial), axis=-1)
    return jnp.where(positive, jnp.where(jnp.isinf(x), 0.0, q), 1.0)


def _shell_radii(radii, global_sensitivity, a):
    """Inner radii A, outer radii B, widths, rates and levels of the K shells + the tail shell (B = inf), and the
    2 (K + 1) arguments of Q the shells' masses need: ``rate * A`` of each, then ``rate * B`` (0 for the tail,
    where Q(d, inf) = 0 is used instead)."""
    cumulative = jnp.concatenate([jnp.zeros(1), jnp.cumsum(radii)])
    K = radii.shape[0]
    inner = jnp.concatenate([cumulative[:-1], cumulative[-1:]])
    outer = jnp.concatenate([cumulative[1:], jnp.full(1, jnp.inf)])
    widths = jnp.concatenate([radii, jnp.reshape(global_sensitivity, (1,))])
    levels = jnp.arange(1, K + 2, dtype=jnp.float64)
    safe = jnp.where(widths > 0, widths, 1.0)
    rate = a / safe
    arguments = jnp.concatenate([rate * inner, rate * jnp.where(jnp.isinf(outer), 0.0, outer)])
    return inner, outer, widths, rate, levels, arguments


def _shell_masses(inner, outer, widths, rate, levels, a, d, q):
    """Log-masses of the shells from ``q``, Q(d, .) at :func:`_shell_radii`'s arguments; and Q at each shell's
    two radii."""
    K1 = inner.shape[0]
    q_inner, q_outer = q[:K1], jnp.where(jnp.isinf(outer), 0.0, q[K1:])
    log_mass = (-levels * a + rate * inner + gammaln(d) - d * jnp.log(rate)
                + jnp.log(jnp.maximum(q_inner - q_outer, 0.0)))
    return jnp.where(widths > 0, log_mass, -jnp.inf), q_inner, q_outer


def _shells(radii, global_sensitivity, a, d):
    """Inner radii A, outer radii B, rates, levels and log-masses of the K shells + the tail shell."""
    inner, outer, widths, rate, levels, arguments = _shell_radii(radii, global_sensitivity, a)
    q = regularized_upper_gamma(d, arguments)
    log_mass, q_inner, q_outer = _shell_masses(inner, outer, widths, rate, levels, a, float(d), q)
    return inner, outer, rate, levels, log_mass, q_inner, q_outer


def _direction(g, norm):
    """A point of the unit L_p sphere from the cone measure: iid Laplace (p = 1) or Gaussian (p = 2) coordinates
    ``g``, normalised."""
    if norm == "l1":
        return g / jnp.sum(jnp.abs(g))
    return g / jnp.linalg.norm(g)


@functools.partial(jax.jit, static_argnames=("norm",))
def _vector_release(key, center, radii, global_sensitivity, epsilon, norm):
    d = center.shape[0]
    a = 0.5 * epsilon
    inner, outer, widths, rate, levels, arguments = _shell_radii(radii, global_sensitivity, a)
    num_arguments = arguments.shape[0]
    k_shell, k_radius, k_direction = threefry.split(key, 3)
    # The three keys' draws from one hash (each call site of the hash compiles on its own).
    u_shell, u, g = threefry.draws(("uniform", k_shell, ()), ("uniform", k_radius, ()),
                                   ("laplace" if norm == "l1" else "normal", k_direction, (d,)))

    def choose_shell(q):
        """The shell (by its mass) and, in it, the bracket and target of the radius's bisection on Q."""
        log_mass, q_inner, q_outer = _shell_masses(inner, outer, widths, rate, levels, a, float(d), q)
        weights = jnp.exp(log_mass - jnp.max(log_mass))
        cumulative = jnp.cumsum(weights)
        j = jnp.minimum(jnp.searchsorted(cumulative, u_shell * cumulative[-1], side="right"), log_mass.shape[0] - 1)
        lam, lo_r = rate[j], inner[j]
        target = q_inner[j] - u * (q_inner[j] - q_outer[j])
        # Finite bracket for the tail shell: Q(d, .) falls by e^{-(2d+60)} beyond it (float64 resolution).
        hi_r = jnp.where(jnp.isinf(outer[j]), lo_r + (2.0 * d + 60.0) / lam, outer[j])
        return lam, target, lo_r, hi_r

    # One loop, one incomplete gamma: its first 2 (K + 1) steps evaluate Q at the shells' radii, the next
    # _BISECTION_STEPS bisect the chosen shell's radius. Two loops (the shells', the bisection's) held two copies
    # of Q's series and continued fraction, which XLA:CPU compiles over the trials' vector in 0.16 s each.
    def step(i, carry):
        q, lam, target, lo, hi = carry
        lam, target, lo, hi = jax.lax.cond(i == num_arguments, lambda _: choose_shell(q),
                                           lambda _: (lam, target, lo, hi), None)
        mid = 0.5 * (lo + hi)
        shells = i < num_arguments
        at = jnp.minimum(i, num_arguments - 1)
        value = regularized_upper_gamma(d, jnp.where(shells, arguments[at], lam * mid))
        q = q.at[at].set(jnp.where(shells, value, q[at]))  # one element a step (a select of all of q is O(K) a step)
        above = value > target  # Q decreasing in r: the root lies above mid
        lo = jnp.where(shells | ~above, lo, mid)
        hi = jnp.where(shells | above, hi, mid)
        return q, lam, target, lo, hi

    zero = jnp.zeros((), jnp.float64)
    _, _, _, lo, hi = jax.lax.fori_loop(0, num_arguments + _BISECTION_STEPS, step,
                                        (jnp.zeros(num_arguments, jnp.float64), zero, zero, zero, zero))
    radius = 0.5 * (lo + hi)
    return Release(center + radius * _direction(g, norm), VectorInfo(epsilon, center, radius))


def _check_vector_inputs(center, radii, global_sensitivity, norm):
    norm = check_choice("norm", norm, NORMS)
    if any(is_tracer(v) for v in (center, radii, global_sensitivity)):  # checks are skipped on tracers
        return (jnp.asarray(center, jnp.float64), jnp.asarray(radii, jnp.float64),
                jnp.asarray(global_sensitivity, jnp.float64), norm)
    center = np.asarray(center, np.float64)
    if center.ndim != 1 or center.size < 1 or not np.all(np.isfinite(center)):
        raise ValueError(f"center must be a finite 1-D vector f(x) of length d >= 1, got shape {center.shape}.")
    r = np.asarray(radii, np.float64)
    if r.ndim != 1 or r.size < 1 or not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError("radii must be a nonempty 1-D array of finite values >= 0 (R_1..R_K of Def 5.1).")
    gs = check_positive("global_sensitivity", global_sensitivity)
    if np.any(r > gs):
        raise ValueError(f"radii must be clipped to global_sensitivity={gs}.")
    return jnp.asarray(center), jnp.asarray(r), jnp.asarray(gs, jnp.float64), norm


def piecewise_laplace_vector(key: Key, center: Any, radii: Any, *, epsilon: float, global_sensitivity: float,
                             norm: str = "l2") -> Release:
    """The approximate PLM in :math:`\\mathbb R^d` with an exact radial sampler (Durfee 2025, §5.1, Lemma 5.2).

    .. math::
        \\pi(y) \\propto \\exp\\big(\\tfrac{\\varepsilon}{2}\\,\\tilde q(y; x)\\big), \\quad
        -\\tilde q = \\tilde\\ell + \\frac{\\|y - f(x)\\|_p - \\mathcal R_{\\tilde\\ell-1}}{R_{\\tilde\\ell}}.

    Sampled by shell (log-space masses via the incomplete gamma function),
    radius (truncated Gamma by bisection) and direction (cone measure); see
    the module docstring. The paper's rejection step is replaced by the
    exact radial draw (Durfee 2025, end of Sec. 5.1).

    Args:
      key: a single PRNG key.
      center: :math:`f(x)`, ``float64[d]``.
      radii: :math:`R_1..R_K` satisfying Def 5.1 (for the chosen norm),
        clipped to ``global_sensitivity``; beyond ``K`` the radius is the
        global sensitivity (§5.2).
      epsilon: privacy parameter.
      global_sensitivity: :math:`\\Delta` in the chosen norm, > 0.
      norm: "l1" or "l2".

    Returns:
      ``Release(value[d], VectorInfo)``.

    Raises:
      ValueError: bad shapes, negative or unclipped radii, bad epsilon/norm.

    Privacy:
      :math:`\\varepsilon`-DP when the radii satisfy Def 5.1 (Lemma 5.2).
      Idealized numerics; shells whose mass underflows float64 are never drawn.

    Examples:
      >>> import jax
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> r = io.piecewise_laplace_vector(jax.random.key(0), [0.0, 0.0], [1.0, 1.0], epsilon=1.0,
      ...                                 global_sensitivity=1.0)
      >>> r.value.shape
      (2,)
    """
    require_x64("piecewise_laplace_vector")
    key = check_key(key)
    epsilon = check_epsilon(epsilon)
    center, radii, gs, norm = _check_vector_inputs(center, radii, global_sensitivity, norm)
    if not is_tracer(global_sensitivity):  # the radial tail falls as e^(-epsilon r / (2 global_sensitivity))
        check_noise_scale(2.0 * float(np.max(global_sensitivity)), epsilon, what="piecewise_laplace_vector")
    # global_sensitivity as passed: _check_vector_inputs returns it as a device array for the kernel.
    guarantee = stated_guarantee(piecewise_laplace_vector_guarantee, epsilon=epsilon,
                                 global_sensitivity=global_sensitivity, norm=norm)
    release = _vector_release(key, center, radii, gs, jnp.asarray(epsilon, jnp.float64), norm)
    release = release._replace(guarantee=guarantee)  # static metadata, attached outside the jitted kernel
    return withheld_unless(release, epsilon_ok(epsilon))  # a traced epsilon skipped the eager check


def piecewise_laplace_vector_guarantee(*, epsilon: float, global_sensitivity: float,
                                       norm: str = "l2") -> PureDP:
    """:math:`\\varepsilon`-DP (Durfee 2025, Lemma 5.2)."""
    check_positive("global_sensitivity", global_sensitivity)
    check_choice("norm", norm, NORMS)
    return PureDP(check_epsilon(epsilon))


def _log_unit_ball_volume_times_d(d, norm):
    p = 1.0 if norm == "l1" else 2.0
    return math.log(d) + d * math.log(2 * math.gamma(1 + 1 / p)) - math.lgamma(1 + d / p)


def vector_log_density(y: Any, center: Any, radii: Any, *, epsilon: float, global_sensitivity: float,
                       norm: str = "l2") -> jax.Array:
    """Exact log-density of :func:`piecewise_laplace_vector` at points ``y[k, d]`` (Durfee 2025, end of Sec. 5.1).

    Examples:
      >>> from gpuprivacy.mechanisms import instance_optimal as io
      >>> float(io.vector_log_density([[0.5]], [0.0], [1.0], epsilon=2.0, global_sensitivity=1.0,
      ...                             norm="l1")[0]) < 0
      True
    """
    epsilon = check_epsilon(epsilon)
    center, radii, gs, norm = _check_vector_inputs(center, radii, global_sensitivity, norm)
    y = jnp.atleast_2d(jnp.asarray(y, jnp.float64))
    d = center.shape[0]
    a = 0.5 * epsilon
    _, _, _, _, log_mass, _, _ = _shells(radii, gs, a, d)
    log_z = logsumexp(log_mass) + _log_unit_ball_volume_times_d(d, norm)
    ord_ = 1 if norm == "l1" else 2
    r = jnp.linalg.norm(y - center[None, :], ord=ord_, axis=1)
    cumulative = jnp.concatenate([jnp.zeros(1), jnp.cumsum(radii)])
    K = radii.shape[0]
    idx = jnp.searchsorted(cumulative, r, side="left")  # first l with RR_l >= r
    in_tail = idx > K
    l_explicit = jnp.clip(idx, 1, K)
    width = jnp.where(in_tail, gs, radii[l_explicit - 1])
    base = jnp.where(in_tail, cumulative[K], cumulative[l_explicit - 1])
    level = jnp.where(in_tail, K + 1.0, l_explicit.astype(jnp.float64))
    safe = jnp.where(width > 0, width, 1.0)
    neg_q = level + (r - base) / safe
    neg_q = jnp.where(r == 0, 1.0, neg_q)
    return -a * neg_q - log_z
