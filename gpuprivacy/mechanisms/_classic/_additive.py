"""The Laplace and Gaussian mechanisms (additive noise on a numeric query)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpuprivacy import noise
from gpuprivacy._checks import (all_ok, check_delta, check_epsilon, check_key, check_positive, epsilon_ok,
                                fail_closed, finite_ok, positive_ok)
from gpuprivacy._config import require_x64
from gpuprivacy._rounding import divide_up, float_up, step_up_until
from gpuprivacy._typing import Array, Key
from gpuprivacy.accounting import (
    ZCDP,
    ApproxDP,
    PureDP,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    gaussian_sigma_discrete,
    gaussian_sigma_zcdp,
)
from gpuprivacy.mechanisms._common import (
    check_bool,
    check_choice,
    check_value,
    concrete,
    unit_noise,
)
from gpuprivacy.mechanisms._release import Release, stated_guarantee

DEFAULT_GRANULARITY = 2.0**-20
GAUSSIAN_CALIBRATIONS = ("analytic", "classic")


class LaplaceInfo(NamedTuple):
    """Side information of :func:`laplace_mechanism`.

    Attributes:
      scale: the Laplace scale actually used, :math:`\\Delta_1/\\varepsilon`
        rounded up (public). In the secure path, the discrete scale in value units.
      nonprivate_value: the exact query value, float64 (NOT private).
      valid: False when a traced parameter (epsilon, sensitivity) or the traced value was invalid; the
        release is then NaN, whatever the data (fail closed, docs/fail_closed.md). Always True eagerly,
        where invalid input raises.
    """

    scale: Array
    nonprivate_value: Array
    valid: Array = True


class GaussianInfo(NamedTuple):
    """Side information of :func:`gaussian_mechanism` and :func:`gaussian_mechanism_zcdp`.

    Attributes:
      sigma: the noise standard deviation parameter actually used (public).
      nonprivate_value: the exact query value, float64 (NOT private).
    """

    sigma: Array
    nonprivate_value: Array


@jax.jit
def _additive_laplace(key: Key, value: Array, scale: Array) -> Array:
    return value + scale * unit_noise(noise.laplace, key, value.shape)


@jax.jit
def _additive_gaussian(key: Key, value: Array, sigma: Array) -> Array:
    return value + sigma * unit_noise(noise.gaussian, key, value.shape)


def _check_secure(secure, granularity) -> tuple[bool, float]:
    secure = check_bool("secure", secure)
    granularity = check_positive("granularity", granularity)
    if secure and math.frexp(granularity)[0] != 0.5:
        raise ValueError(f"granularity must be a power of two (e.g. 2.0**-20) when secure=True, got "
                         f"{granularity!r}.")
    return secure, granularity


def _snapped_l1_sensitivity(sensitivity: float, granularity: float, size: int) -> float:
    # gpuprivacy.noise.secure_laplace charges one grid step g for snapping a
    # scalar. Snapping d coordinates moves the grid index by up to d steps in
    # L1, so we pass Delta + (d - 1) g: its discrete scale becomes
    # (Delta + d g) / epsilon, which is epsilon-DP for the d-coordinate release.
    return float_up(Fraction(sensitivity) + max(size - 1, 0) * Fraction(granularity))


def _snapped_l2_sensitivity(sensitivity: float, granularity: float, size: int) -> float:
    # Snapping d coordinates moves each of two neighbouring values by at most
    # sqrt(d) g / 2 in L2, so the L2 sensitivity on the grid is at most
    # Delta + sqrt(d) g (gpuprivacy.noise.secure_gaussian). sqrt(d) rounded up.
    size = max(size, 1)
    root = step_up_until(math.sqrt(size), lambda r: Fraction(r) ** 2 >= size)
    return float_up(Fraction(sensitivity) + Fraction(root) * Fraction(granularity))


def laplace_mechanism(key: Key, value: Array, *, epsilon: float, sensitivity: float = 1.0,
                      secure: bool = False, granularity: float = DEFAULT_GRANULARITY) -> Release:
    """Adds Laplace noise to a numeric query (Dwork, McSherry, Nissim & Smith 2006).

    Each coordinate gets independent noise:

    .. math:: M(x)_j = f(x)_j + Z_j, \\qquad Z_j \\sim \\mathrm{Lap}(b),\\quad b = \\Delta_1/\\varepsilon,

    which is :math:`\\varepsilon`-DP when :math:`\\|f(x) - f(x')\\|_1 \\le \\Delta_1`
    for all neighbours. The scale is rounded up to a float64.

    Idealized numerics: the default path adds a float64 sample of a
    continuous law and is open to Mironov's (2012) floating-point attack.
    ``secure=True`` calls :func:`gpuprivacy.noise.secure_laplace` instead: the
    value is snapped to the grid :math:`g\\mathbb{Z}` (``granularity``, a
    power of two) and exact discrete Laplace noise is added. Snapping moves
    each of the :math:`d` coordinates by up to one grid step, which is
    charged to the noise: the discrete scale is
    :math:`(\\Delta_1 + d g)/\\varepsilon`, so the release is still
    :math:`\\varepsilon`-DP. ``info.scale`` reports the scale used. The
    secure path needs a concrete epsilon.

    Args:
      key: a single PRNG key, ``jax.random.key(seed)``.
      value: the exact query value :math:`f(x)`, a real scalar or array.
      epsilon: privacy parameter, finite and > 0.
      sensitivity: the L1 sensitivity :math:`\\Delta_1 > 0` of the whole
        array (not per coordinate).
      secure: use the floating-point-safe sampler.
      granularity: output grid spacing of the secure path, a power of two
        (ignored otherwise).

    Returns:
      ``Release(value, LaplaceInfo)``; ``value`` is float64 with the shape of
      the input.

    Raises:
      ValueError: if a parameter is out of range, ``value`` holds NaN or inf,
        or ``key`` is a batch of keys (use ``jax.vmap``).
      TypeError: for a wrongly typed argument.

    Privacy:
      Kernels are total: a NaN reaching the kernel under ``jit``/``vmap``
      (where value checks are skipped) gives a NaN release.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.laplace_mechanism(jax.random.key(0), [3.0, 4.0], epsilon=1.0)
      >>> release.value.shape, float(release.info.scale)
      ((2,), 1.0)

    References:
      Dwork, McSherry, Nissim & Smith, `Calibrating Noise to Sensitivity in
      Private Data Analysis <https://doi.org/10.1007/11681878_14>`_, TCC 2006;
      Dwork & Roth, The Algorithmic Foundations of Differential Privacy, 2014, Thm 3.6;
      Mironov, `On Significance of the Least Significant Bits for Differential
      Privacy <https://doi.org/10.1145/2382196.2382264>`_, CCS 2012.
    """
    require_x64("laplace_mechanism")
    key = check_key(key)
    value = check_value(value, "value")
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    secure, granularity = _check_secure(secure, granularity)
    guarantee = stated_guarantee(laplace_mechanism_guarantee, epsilon=epsilon, sensitivity=sensitivity,
                                 secure=secure, granularity=granularity)
    if secure:
        concrete("epsilon", epsilon, "laplace_mechanism(secure=True)")
        effective = _snapped_l1_sensitivity(sensitivity, granularity, value.size)
        # secure_laplace_scale is in grid units; multiplying by a power of two is exact.
        scale = jnp.asarray(noise.secure_laplace_scale(epsilon, effective, granularity) * granularity, jnp.float64)
        released = jnp.asarray(noise.secure_laplace(key, value, epsilon=epsilon, sensitivity=effective,
                                                    granularity=granularity), jnp.float64)
    else:
        scale = jnp.asarray(divide_up(sensitivity, epsilon, what=f"the Laplace scale sensitivity / epsilon = {sensitivity!r} / {epsilon!r}"), jnp.float64)
        released = _additive_laplace(key, value, scale)
    # Traced parameters or data skipped the eager checks: check them by value and withhold the release.
    ok = all_ok(epsilon_ok(epsilon), positive_ok("sensitivity", sensitivity), finite_ok("value", value))
    return Release(fail_closed(released, ok), LaplaceInfo(scale=scale, nonprivate_value=value,
                                                          valid=jnp.asarray(ok)), guarantee)


def laplace_mechanism_guarantee(*, epsilon: float, sensitivity: float = 1.0, secure: bool = False,
                                granularity: float = DEFAULT_GRANULARITY) -> PureDP:
    """The guarantee of :func:`laplace_mechanism`: :math:`\\varepsilon`-DP (Dwork & Roth 2014, Thm 3.6).

    Takes the mechanism's keyword parameters; only ``epsilon`` matters (the
    secure path charges its grid snapping to the noise scale, not to epsilon).
    """
    check_positive("sensitivity", sensitivity)
    _check_secure(secure, granularity)
    return PureDP(epsilon)


def _gaussian_release(key, value, sigma, secure, granularity):
    if secure:
        return jnp.asarray(noise.secure_gaussian(key, value, sigma=sigma, granularity=granularity), jnp.float64)
    return _additive_gaussian(key, value, jnp.asarray(sigma, jnp.float64))


def _gaussian_sigma(epsilon, delta, sensitivity, calibration, secure, granularity, size) -> float:
    calibration = check_choice("calibration", calibration, GAUSSIAN_CALIBRATIONS)
    if secure:
        if calibration != "analytic":
            raise ValueError(f"calibration={calibration!r} does not apply with secure=True: the secure path "
                             "calibrates the discrete Gaussian through zCDP (gaussian_sigma_discrete). Leave "
                             "calibration at its default.")
        sensitivity = check_positive("sensitivity", sensitivity)
        return gaussian_sigma_discrete(epsilon, delta, _snapped_l2_sensitivity(sensitivity, granularity, size))
    if calibration == "classic":
        return gaussian_sigma_classic(epsilon, delta, sensitivity)
    return gaussian_sigma_analytic(epsilon, delta, sensitivity)


def gaussian_mechanism(key: Key, value: Array, *, epsilon: float, delta: float, sensitivity: float = 1.0,
                       calibration: str = "analytic", secure: bool = False,
                       granularity: float = DEFAULT_GRANULARITY) -> Release:
    """Adds Gaussian noise calibrated to (epsilon, delta)-DP.

    .. math:: M(x) = f(x) + Z, \\qquad Z \\sim \\mathcal{N}(0, \\sigma^2 I),

    which is :math:`(\\varepsilon, \\delta)`-DP when
    :math:`\\|f(x) - f(x')\\|_2 \\le \\Delta_2` for all neighbours, with

    * ``calibration="analytic"`` (default): the smallest sigma satisfying
      Balle & Wang's exact condition (Thm 8; :func:`gaussian_sigma_analytic`),
      valid for every epsilon > 0;
    * ``calibration="classic"``:
      :math:`\\sigma = \\Delta_2\\sqrt{2\\ln(1.25/\\delta)}/\\varepsilon`
      (Dwork & Roth 2014, Thm A.1), valid only for epsilon < 1.

    Sigma is computed in Python (mpmath) and rounded up, so epsilon and delta
    must be concrete (not vmapped); vmap over keys and values instead.

    Idealized numerics unless ``secure=True``, which calls
    :func:`gpuprivacy.noise.secure_gaussian`: the value is snapped to the
    grid :math:`g\\mathbb{Z}` and exact discrete Gaussian noise is added.
    Balle & Wang's condition is proved for the continuous Gaussian only, so
    the secure path calibrates through zCDP instead
    (:func:`gaussian_sigma_discrete`, after Canonne, Kamath & Steinke 2020),
    with the snapping charged to the sensitivity,
    :math:`\\Delta_2 + \\sqrt{d}\\,g` for :math:`d` coordinates. Its sigma is
    a few percent larger; ``info.sigma`` reports it. ``calibration`` must stay
    ``"analytic"`` (the default) with ``secure=True``.

    Args:
      key: a single PRNG key.
      value: the exact query value, a real scalar or array.
      epsilon: > 0 (and < 1 for the classic calibration).
      delta: in (0, 1).
      sensitivity: the L2 sensitivity :math:`\\Delta_2 > 0`.
      calibration: ``"analytic"`` or ``"classic"``.
      secure: use the floating-point-safe sampler.
      granularity: output grid spacing of the secure path, a power of two.

    Returns:
      ``Release(value, GaussianInfo)``; ``value`` is float64 with the input's shape.

    Raises:
      ValueError: for out-of-range parameters, ``calibration="classic"`` with
        epsilon >= 1 or with ``secure=True``, an unknown calibration, NaN/inf
        in ``value``, or a batch of keys (use ``jax.vmap``).
      TypeError: for traced epsilon/delta or wrongly typed arguments.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> release = mechanisms.gaussian_mechanism(jax.random.key(0), 2.0, epsilon=1.0, delta=1e-5)
      >>> round(float(release.info.sigma), 6)
      3.730632

    References:
      Balle & Wang, `Improving the Gaussian Mechanism for Differential Privacy
      <https://arxiv.org/abs/1805.06530>`_, ICML 2018, Thm 8 and Alg. 1;
      Dwork & Roth, The Algorithmic Foundations of Differential Privacy, 2014, Thm A.1;
      Canonne, Kamath & Steinke, `The Discrete Gaussian for Differential Privacy
      <https://arxiv.org/abs/2004.00010>`_, NeurIPS 2020.
    """
    require_x64("gaussian_mechanism")
    key = check_key(key)
    value = check_value(value, "value")
    concrete("epsilon", epsilon, "gaussian_mechanism")
    concrete("delta", delta, "gaussian_mechanism")
    secure, granularity = _check_secure(secure, granularity)
    guarantee = stated_guarantee(gaussian_mechanism_guarantee, epsilon=epsilon, delta=delta, sensitivity=sensitivity,
                                 calibration=calibration, secure=secure, granularity=granularity)
    sigma = _gaussian_sigma(epsilon, delta, sensitivity, calibration, secure, granularity, value.size)
    released = _gaussian_release(key, value, sigma, secure, granularity)
    return Release(released, GaussianInfo(sigma=jnp.asarray(sigma, jnp.float64), nonprivate_value=value), guarantee)


def gaussian_mechanism_guarantee(*, epsilon: float, delta: float, sensitivity: float = 1.0,
                                 calibration: str = "analytic", secure: bool = False,
                                 granularity: float = DEFAULT_GRANULARITY) -> ApproxDP:
    """The guarantee of :func:`gaussian_mechanism`: :math:`(\\varepsilon, \\delta)`-DP.

    Validates the parameters as the mechanism does (so ``calibration="classic"``
    with epsilon >= 1, or with ``secure=True``, raises here too).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    check_positive("sensitivity", sensitivity)
    secure, granularity = _check_secure(secure, granularity)
    calibration = check_choice("calibration", calibration, GAUSSIAN_CALIBRATIONS)
    if calibration == "classic":
        gaussian_sigma_classic(epsilon, delta, sensitivity)  # raises for epsilon >= 1
        if secure:
            raise ValueError("calibration='classic' does not apply with secure=True; leave calibration at "
                             "its default.")
    return ApproxDP(epsilon, delta)


def gaussian_mechanism_zcdp(key: Key, value: Array, *, rho: float, sensitivity: float = 1.0,
                            secure: bool = False, granularity: float = DEFAULT_GRANULARITY) -> Release:
    """Adds Gaussian noise calibrated to rho-zero-concentrated DP.

    .. math:: M(x) = f(x) + \\mathcal{N}(0, \\sigma^2 I), \\qquad
              \\sigma = \\frac{\\Delta_2}{\\sqrt{2\\rho}},

    which is :math:`\\rho`-zCDP (Bun & Steinke 2016, Prop. 1.6). Sigma is
    rounded up with an exact rational check. With ``secure=True`` the
    discrete Gaussian on the grid :math:`g\\mathbb{Z}` is used
    (:func:`gpuprivacy.noise.secure_gaussian`); it has the same zCDP bound
    (Canonne, Kamath & Steinke 2020, Sec. 2) with the snapping charged to the
    sensitivity, :math:`\\Delta_2 + \\sqrt{d}\\,g` for :math:`d` coordinates.

    Args:
      key: a single PRNG key.
      value: the exact query value, a real scalar or array.
      rho: > 0, concrete.
      sensitivity: the L2 sensitivity :math:`\\Delta_2 > 0`.
      secure: use :func:`gpuprivacy.noise.secure_gaussian`.
      granularity: output grid spacing of the secure path, a power of two.

    Returns:
      ``Release(value, GaussianInfo)``.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> float(mechanisms.gaussian_mechanism_zcdp(jax.random.key(0), 0.0, rho=0.5).info.sigma)
      1.0

    References:
      Bun & Steinke, `Concentrated Differential Privacy: Simplifications,
      Extensions, and Lower Bounds <https://arxiv.org/abs/1605.02065>`_, TCC 2016, Prop. 1.6;
      Canonne, Kamath & Steinke, `The Discrete Gaussian for Differential Privacy
      <https://arxiv.org/abs/2004.00010>`_, NeurIPS 2020.
    """
    require_x64("gaussian_mechanism_zcdp")
    key = check_key(key)
    value = check_value(value, "value")
    concrete("rho", rho, "gaussian_mechanism_zcdp")
    sensitivity = check_positive("sensitivity", sensitivity)
    secure, granularity = _check_secure(secure, granularity)
    guarantee = stated_guarantee(gaussian_mechanism_zcdp_guarantee, rho=rho, sensitivity=sensitivity, secure=secure,
                                 granularity=granularity)
    if secure:
        sensitivity = _snapped_l2_sensitivity(sensitivity, granularity, value.size)
    sigma = gaussian_sigma_zcdp(rho, sensitivity)
    released = _gaussian_release(key, value, sigma, secure, granularity)
    return Release(released, GaussianInfo(sigma=jnp.asarray(sigma, jnp.float64), nonprivate_value=value), guarantee)


def gaussian_mechanism_zcdp_guarantee(*, rho: float, sensitivity: float = 1.0, secure: bool = False,
                                      granularity: float = DEFAULT_GRANULARITY) -> ZCDP:
    """The guarantee of :func:`gaussian_mechanism_zcdp`: :math:`\\rho`-zCDP (Bun & Steinke 2016, Prop. 1.6)."""
    gaussian_sigma_zcdp(rho, sensitivity)
    _check_secure(secure, granularity)
    return ZCDP(rho)
