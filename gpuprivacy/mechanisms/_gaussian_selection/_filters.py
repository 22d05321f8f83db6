"""Privacy filters for fully adaptive composition: FSRC and the Whitehouse et al. filter.

A privacy filter decides, before each adaptively chosen mechanism
:math:`M_t` runs, whether the interaction may continue. Both filters here
are written as small pure functions over a NamedTuple state, so the same
code drives a plain Python loop (one adaptive mechanism after another) and a
``jax.lax.scan`` kernel (:func:`gaussian_sparse_vector`), and vmaps over runs.

**Filtered self-reporting composition (FSRC).** Lebensold, Precup & Balle
(arXiv 2402.06137v2), Algorithm 2 = Algorithm 4: before running :math:`M_t`,
HALT if

.. math:: \\sum_{i<t} \\varepsilon^{\\mathrm{post}}_i(o_i) + \\varepsilon^{\\max}_t \\ge \\varepsilon,

otherwise run it, release :math:`o_t` and add its realised ex-post loss
:math:`\\varepsilon^{\\mathrm{post}}_t(o_t)`. Each :math:`M_t` must be
:math:`\\varepsilon^{\\mathrm{post}}_t`-ex-post DP and
:math:`(\\varepsilon^{\\max}_t, \\delta_t)`-pDP (probabilistic DP:
:math:`\\Pr[L_t > \\varepsilon^{\\max}_t] \\le \\delta_t`).

*Correction of the paper (Lebensold et al. 2024, Thm 11 (Algorithm 2); see docs/errata.md).* Theorem 11
= Theorem 19 claims :math:`(\\varepsilon, \\delta)`-DP with the *same*
:math:`\\delta` for every :math:`M_t`, not summed. That is false: the index
:math:`T` of the last mechanism run is a data-dependent stopping time, so
"``M_T`` is pDP" does not bound :math:`\\Pr[L_T > \\varepsilon^{\\max}_T]`.
A two-output counterexample (every :math:`M_t` outputs *bad* with probability
:math:`p = 0.01` on :math:`D` and :math:`p e^{-5}` on :math:`D'`; budget 1)
has :math:`\\Pr_D[L > 1] \\approx 0.63` against a claimed :math:`\\delta = 0.01`
(reproduced in ``tests/audit/test_gaussian_selection_controls.py``). The valid version
(derived by us; see docs/errata.md) uses a *predictable* schedule with
:math:`\\sum_t \\delta_t \\le \\delta`: on the event that every reached
:math:`M_t` has :math:`L_t \\le \\varepsilon^{\\max}_t` (probability
:math:`\\ge 1 - \\sum_t \\delta_t` by the union bound) the total loss is
below :math:`\\varepsilon`. :func:`self_reporting_filter_deltas` returns

* ``"inverse_square"`` (default): :math:`\\delta_t = 6\\delta/(\\pi^2 t^2)`,
  unbounded number of mechanisms;
* ``"uniform"``: :math:`\\delta_t = \\delta/T_{\\max}` for
  :math:`t \\le T_{\\max}` and 0 afterwards (a hard cap: with
  :math:`\\delta_t = 0` no finite :math:`\\varepsilon^{\\max}_t` exists and the
  filter halts);
* ``paper_mode=True``: :math:`\\delta_t = \\delta` every step, the paper's
  unsound rule, only for reproducing its figures; it emits a
  :class:`PaperModeWarning`.

**Whitehouse et al. filter.** Whitehouse, Ramdas, Rogers & Wu (2023), as
restated by Lebensold et al., App. C, Theorem 20, eq. (40) and (41), with our
corrected reading (the printed eq. (41) "HALT if N > t" is inverted):
release :math:`o_t` iff

.. math:: \\sqrt{2 \\log(1/\\delta') \\textstyle\\sum_{m \\le t} \\varepsilon_m^2}
          + \\tfrac12 \\textstyle\\sum_{m \\le t} \\varepsilon_m^2 \\le \\varepsilon
          \\quad\\text{and}\\quad \\textstyle\\sum_{m \\le t} \\delta_m \\le \\delta'',

otherwise HALT and stay halted. The released prefix :math:`M_{1:N}` is
:math:`(\\varepsilon, \\delta' + \\delta'')`-DP when each :math:`M_t` is
:math:`(\\varepsilon_t, \\delta_t)`-DP given the past.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from gpuprivacy._checks import check_delta, check_epsilon, check_finite_real, check_int, is_tracer
from gpuprivacy._rounding import float_down, sum_up
from gpuprivacy._typing import Array
from gpuprivacy.accounting import ApproxDP
from gpuprivacy.mechanisms._common import check_bool, check_choice

DELTA_SCHEDULES = ("inverse_square", "uniform")

# 6 / pi^2 in float64, and every delta_t shrunk by one part in 10^12, so that the float schedule sums
# to at most delta (the exact series sums to delta; float error is ~1e-16 relative).
_BASEL = 6.0 / math.pi**2
_SHRINK = 1.0 - 1e-12


class PaperModeWarning(UserWarning):
    """Warns that an unsound, paper-faithful accounting mode was switched on."""


def _warn_paper_mode(where: str) -> None:
    warnings.warn(
        f"{where}: paper_mode=True uses the same delta for every mechanism, as in Lebensold et al. "
        "(arXiv 2402.06137v2) Theorem 11/19. That theorem is FALSE (Lebensold et al. 2024, Thm 11 (Algorithm 2); see docs/errata.md: the two-output "
        "counterexample has Pr[L > epsilon] = 0.63 for a claimed delta of 0.01), so the result carries NO "
        "(epsilon, delta) guarantee; the valid delta is the sum over the mechanisms run. Use it only to "
        "reproduce the paper's figures.", PaperModeWarning, stacklevel=3)


def self_reporting_filter_deltas(num_steps: int, *, delta: float, schedule: str = "inverse_square",
                                 max_steps: int | None = None, paper_mode: bool = False) -> np.ndarray:
    """The per-mechanism deltas :math:`\\delta_1, \\dots, \\delta_{\\text{num\\_steps}}` of FSRC.

    .. math:: \\delta_t = \\frac{6\\,\\delta}{\\pi^2 t^2}\\ (\\texttt{"inverse\\_square"}), \\qquad
              \\delta_t = \\frac{\\delta}{T_{\\max}}\\,[t \\le T_{\\max}]\\ (\\texttt{"uniform"}),

    both with :math:`\\sum_{t \\ge 1} \\delta_t \\le \\delta` (float values are
    rounded down). ``eps_max[t]`` of the filter must be a
    :math:`(\\varepsilon^{\\max}_t, \\delta_t)`-pDP bound of the t-th mechanism
    (Lebensold et al. 2024, Thm 11 (Algorithm 2); see docs/errata.md; the paper's Theorem 11 uses
    :math:`\\delta_t = \\delta`, which is unsound).

    Args:
      num_steps: how many deltas to return (>= 1).
      delta: the total delta of the composed interaction, in (0, 1).
      schedule: ``"inverse_square"`` (default) or ``"uniform"``.
      max_steps: :math:`T_{\\max}`, required by (and only used with) ``"uniform"``.
      paper_mode: return :math:`\\delta` for every step (the paper's unsound
        rule); emits a :class:`PaperModeWarning`.

    Returns:
      float64 NumPy array ``[num_steps]``; entries are 0 beyond the hard cap of ``"uniform"``.

    Raises:
      ValueError: for bad arguments, or ``"uniform"`` without ``max_steps``.

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> deltas = mechanisms.self_reporting_filter_deltas(3, delta=1e-3)
      >>> [round(float(d), 10) for d in deltas]
      [0.0006079271, 0.0001519818, 6.75475e-05]
      >>> mechanisms.self_reporting_filter_deltas(3, delta=1e-3, schedule="uniform", max_steps=2).tolist()
      [0.0005, 0.0005, 0.0]

    References:
      Lebensold, Precup & Balle, `On the Privacy of Selection Mechanisms with
      Gaussian Noise <https://arxiv.org/abs/2402.06137>`_, AISTATS 2024
      (arXiv v2), Algorithm 4 and Theorem 19 (corrected; see docs/errata.md).
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    delta = check_delta(delta)
    schedule = check_choice("schedule", schedule, DELTA_SCHEDULES)
    paper_mode = check_bool("paper_mode", paper_mode)
    if max_steps is not None:
        max_steps = check_int("max_steps", max_steps, minimum=1)
    if schedule == "uniform" and max_steps is None:
        raise ValueError("schedule='uniform' needs max_steps (the hard cap T_max on the number of mechanisms); "
                         "pass e.g. max_steps=100, or use schedule='inverse_square'.")
    if paper_mode:
        _warn_paper_mode("self_reporting_filter_deltas")
        return np.full(num_steps, delta)
    steps = np.arange(1, num_steps + 1, dtype=np.float64)
    if schedule == "inverse_square":
        return _BASEL * delta / (steps * steps) * _SHRINK
    share = float_down(Fraction(delta) / max_steps)  # round down: max_steps shares never exceed delta
    return np.where(steps <= max_steps, share, 0.0)


def self_reporting_filter_guarantee(*, epsilon: float, delta: float) -> ApproxDP:
    """The guarantee of FSRC with a sound delta schedule: :math:`(\\varepsilon, \\delta)`-DP.

    Valid when every mechanism's ``epsilon_max`` is a pDP bound at the
    :func:`self_reporting_filter_deltas` of the same ``delta`` (any schedule
    except ``paper_mode``), by a union bound over the schedule (our correction of Lebensold
    et al. 2024, Thm 11 (Algorithm 2); see docs/errata.md). There is no guarantee function for
    paper mode: its claim is false.
    """
    return ApproxDP(check_epsilon(epsilon), check_delta(delta))


class SelfReportingFilterState(NamedTuple):
    """The state of an FSRC filter (a pytree: usable as a ``lax.scan`` carry).

    Attributes:
      spent: float64, sum of the realised ex-post losses of the released outputs.
      num_run: int32, number of mechanisms admitted so far.
      halted: bool, whether the filter has halted (it never resumes).
    """

    spent: Array
    num_run: Array
    halted: Array


def self_reporting_filter_init() -> SelfReportingFilterState:
    """A fresh FSRC state: nothing spent, nothing run, not halted."""
    return SelfReportingFilterState(spent=jnp.zeros((), jnp.float64), num_run=jnp.zeros((), jnp.int32),
                                    halted=jnp.zeros((), jnp.bool_))


def self_reporting_filter_admit(state: SelfReportingFilterState, epsilon_max, *,
                                epsilon) -> tuple[SelfReportingFilterState, Array]:
    """Algorithm 4's test before running :math:`M_t`: admit iff not halted and spent + eps_max < epsilon.

    Returns the new state (halted if not admitted; ``num_run`` + 1 if
    admitted) and the bool ``admitted``. Jittable; ``epsilon_max = inf``
    (e.g. :math:`\\delta_t = 0`) always halts.
    """
    epsilon = check_epsilon(epsilon)
    admitted = jnp.logical_and(jnp.logical_not(state.halted), state.spent + epsilon_max < epsilon)
    return SelfReportingFilterState(spent=state.spent, num_run=state.num_run + admitted.astype(jnp.int32),
                                    halted=jnp.logical_not(admitted)), admitted


def self_reporting_filter_charge(state: SelfReportingFilterState, epsilon_post) -> SelfReportingFilterState:
    """Adds the realised ex-post loss :math:`\\varepsilon^{\\mathrm{post}}_t(o_t)` of a released output."""
    return state._replace(spent=state.spent + epsilon_post)


def self_reporting_filter_step(state: SelfReportingFilterState, epsilon_max, epsilon_post, *,
                               epsilon) -> tuple[SelfReportingFilterState, Array]:
    """One FSRC step for a mechanism whose output (and so its ex-post loss) is known at once.

    Admits :math:`M_t` (see :func:`self_reporting_filter_admit`) and, if
    admitted, charges ``epsilon_post`` (the ex-post loss of the output
    :math:`M_t` produced) and reports ``released = True``; otherwise the output
    must be discarded. Computing an output that is then discarded releases
    nothing, so a vectorised caller may run :math:`M_t` unconditionally.

    .. math:: \\text{released}_t = \\neg\\text{halted} \\wedge
              \\Big(\\sum_{i<t} \\varepsilon^{\\mathrm{post}}_i + \\varepsilon^{\\max}_t < \\varepsilon\\Big)

    Args:
      state: the current :class:`SelfReportingFilterState`.
      epsilon_max: :math:`\\varepsilon^{\\max}_t`, a :math:`(\\cdot, \\delta_t)`-pDP bound of
        :math:`M_t` at :func:`self_reporting_filter_deltas` ``[t-1]``; fixed before :math:`M_t` runs.
      epsilon_post: :math:`\\varepsilon^{\\mathrm{post}}_t(o_t)`.
      epsilon: the budget :math:`\\varepsilon`.

    Returns:
      ``(new_state, released)``.

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> state = mechanisms.self_reporting_filter_init()
      >>> state, released = mechanisms.self_reporting_filter_step(state, 0.5, 0.25, epsilon=1.0)
      >>> bool(released), float(state.spent)
      (True, 0.25)
      >>> state, released = mechanisms.self_reporting_filter_step(state, 0.75, 0.25, epsilon=1.0)
      >>> bool(released), bool(state.halted), float(state.spent)
      (False, True, 0.25)

    References:
      Lebensold, Precup & Balle (arXiv 2402.06137v2), Algorithm 4, Theorem 19
      (its delta claim corrected; see docs/errata.md).
    """
    state, admitted = self_reporting_filter_admit(state, epsilon_max, epsilon=epsilon)
    return self_reporting_filter_charge(state, jnp.where(admitted, epsilon_post, 0.0)), admitted


class WhitehouseFilterState(NamedTuple):
    """The state of a Whitehouse et al. filter (a pytree).

    Attributes:
      sum_epsilon_squared: float64, :math:`\\sum \\varepsilon_m^2` over admitted mechanisms.
      sum_delta: float64, :math:`\\sum \\delta_m` over admitted mechanisms.
      num_run: int32, number of mechanisms admitted.
      halted: bool.
    """

    sum_epsilon_squared: Array
    sum_delta: Array
    num_run: Array
    halted: Array


def whitehouse_filter_init() -> WhitehouseFilterState:
    """A fresh Whitehouse filter state."""
    zero = jnp.zeros((), jnp.float64)
    return WhitehouseFilterState(sum_epsilon_squared=zero, sum_delta=zero, num_run=jnp.zeros((), jnp.int32),
                                 halted=jnp.zeros((), jnp.bool_))


def _advanced_spend(sum_epsilon_squared, delta_prime):
    log_inverse = -jnp.log(jnp.asarray(delta_prime, jnp.float64))
    return jnp.sqrt(2.0 * log_inverse * sum_epsilon_squared) + 0.5 * sum_epsilon_squared


def _check_delta_double_prime(value):
    value = check_finite_real("delta_double_prime", value)
    if not is_tracer(value) and not 0.0 <= value < 1.0:
        raise ValueError(f"delta_double_prime must lie in [0, 1), got {value!r}.")
    return value


def whitehouse_filter_spend(state: WhitehouseFilterState, *, delta_prime: float) -> Array:
    """The filter's spend :math:`\\sqrt{2\\log(1/\\delta')\\sum\\varepsilon_m^2} + \\frac12\\sum\\varepsilon_m^2`."""
    return _advanced_spend(state.sum_epsilon_squared, check_delta(delta_prime, "delta_prime"))


def whitehouse_filter_step(state: WhitehouseFilterState, epsilon_t, delta_t, *, epsilon, delta_prime,
                           delta_double_prime) -> tuple[WhitehouseFilterState, Array]:
    """Admits :math:`M_t` iff the budget still holds with it included (eq. (40)/(41), corrected).

    .. math:: \\text{admit}_t = \\neg\\text{halted} \\wedge
              \\sqrt{2 \\log(1/\\delta') S_t} + \\tfrac12 S_t \\le \\varepsilon \\wedge
              \\textstyle\\sum_{m \\le t} \\delta_m \\le \\delta'', \\qquad
              S_t = \\textstyle\\sum_{m \\le t} \\varepsilon_m^2 .

    So exactly :math:`M_1, \\dots, M_N` are released, :math:`N` the stopping
    time of eq. (40) (whose sums run to :math:`n + 1`: the first mechanism that
    would break the budget is never run). Jittable.

    Args:
      state: the current :class:`WhitehouseFilterState`.
      epsilon_t, delta_t: :math:`M_t` is :math:`(\\varepsilon_t, \\delta_t)`-DP given the past.
      epsilon: the budget :math:`\\varepsilon > 0`.
      delta_prime: :math:`\\delta' \\in (0, 1)` of the concentration term.
      delta_double_prime: :math:`\\delta'' \\ge 0`, the budget for :math:`\\sum_m \\delta_m`.

    Returns:
      ``(new_state, admitted)``; the state is unchanged except ``halted`` when not admitted.

    Examples:
      >>> from gpuprivacy import mechanisms
      >>> state = mechanisms.whitehouse_filter_init()
      >>> for _ in range(3):
      ...     state, admitted = mechanisms.whitehouse_filter_step(
      ...         state, 0.1, 1e-7, epsilon=1.0, delta_prime=1e-5, delta_double_prime=1e-6)
      >>> int(state.num_run), bool(state.halted)
      (3, False)

    References:
      Whitehouse, Ramdas, Rogers & Wu, `Fully-Adaptive Composition in Differential
      Privacy <https://arxiv.org/abs/2203.05481>`_, ICML 2023; as restated by
      Lebensold, Precup & Balle (arXiv 2402.06137v2), App. C, Theorem 20, eq. (40)-(41), Algorithm 5.
    """
    epsilon = check_epsilon(epsilon)
    delta_prime = check_delta(delta_prime, "delta_prime")
    delta_double_prime = _check_delta_double_prime(delta_double_prime)
    sum_sq = state.sum_epsilon_squared + jnp.square(epsilon_t)
    sum_delta = state.sum_delta + delta_t
    admitted = (jnp.logical_not(state.halted) & (_advanced_spend(sum_sq, delta_prime) <= epsilon)
                & (sum_delta <= delta_double_prime))
    new = WhitehouseFilterState(
        sum_epsilon_squared=jnp.where(admitted, sum_sq, state.sum_epsilon_squared),
        sum_delta=jnp.where(admitted, sum_delta, state.sum_delta),
        num_run=state.num_run + admitted.astype(jnp.int32), halted=jnp.logical_not(admitted))
    return new, admitted


def whitehouse_filter_guarantee(*, epsilon: float, delta_prime: float, delta_double_prime: float) -> ApproxDP:
    """:math:`(\\varepsilon, \\delta' + \\delta'')`-DP (Whitehouse et al. 2023; Lebensold et al. Theorem 20)."""
    epsilon = check_epsilon(epsilon)
    delta_prime = check_delta(delta_prime, "delta_prime")
    delta_double_prime = _check_delta_double_prime(delta_double_prime)
    total = sum_up((delta_prime, delta_double_prime))  # the exact sum, rounded up
    if total >= 1.0:
        raise ValueError(f"delta_prime + delta_double_prime must be < 1, got {total!r}.")
    return ApproxDP(epsilon, total)
