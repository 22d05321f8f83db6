"""`gpuprivacy estimate --mechanism laplace-mechanism|gaussian-mechanism`: a statistic plus calibrated noise.

A library statistic (``--statistic``) gets noise calibrated to the sensitivity
the user declares (``--sensitivity``; not checked, as before). An analyst's
``--oracle`` is untrusted, and nothing bounds its sensitivity: an oracle can
return 0 on x and 100 on a neighbour x'. So for an oracle the CLI takes no
declared sensitivity; it takes a public interval ``--clamp LO HI`` instead,
releases

.. math:: M(x) = \\mathrm{clip}(f(x), \\mathrm{LO}, \\mathrm{HI}) + Z,
   \\qquad \\Delta = \\mathrm{HI} - \\mathrm{LO}\\ \\text{(rounded up to a float64)},

with :math:`Z` the Laplace or Gaussian noise calibrated to :math:`\\Delta`,
and :math:`|\\mathrm{clip}(f(x)) - \\mathrm{clip}(f(x'))| \\le \\Delta` for
every f and every pair of datasets, so the stated guarantee holds under any
neighbour relation. The clamp is a fixed map of the oracle's value (total, no
data-dependent error): NaN goes to LO (as the grid wrappers send NaN to the
lowest grid point), -inf to LO, +inf to HI.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from gpuprivacy.cli._estimate_common import ANY_ORACLE, Estimator, guarantee_json, statistic_on_full_data
from gpuprivacy.oracle import is_trusted


def add_arguments(group) -> None:
    from gpuprivacy.cli._types import finite_float

    group.add_argument("--clamp", nargs=2, type=finite_float("--clamp"), default=None, metavar=("LO", "HI"),
                       help="laplace, gaussian with an analyst's --oracle (required there): the oracle's value is "
                            "clamped into the public interval [LO, HI] before noise, and the noise is calibrated "
                            "to HI - LO (no --sensitivity)")


def _sensitivity_free_mechanisms() -> str:
    return ", ".join(f"--mechanism {name}" for name in sorted(set(ANY_ORACLE) - {"laplace-mechanism", "gaussian-mechanism"}))


def _oracle_clamp(args, mechanism, oracle_fn) -> tuple[float, float, float] | None:
    """``(lower, upper, sensitivity)`` for an analyst's oracle, ``None`` for a library statistic; checks the options.

    Runs before the oracle is evaluated: every error here depends on the options alone, never on the data.
    """
    clamp = getattr(args, "clamp", None)
    if is_trusted(oracle_fn):
        if clamp is not None:
            raise ValueError(f"--clamp LO HI applies to an analyst's --oracle only; --mechanism {mechanism} "
                             f"releases the library statistic --statistic {args.statistic} with the --sensitivity "
                             "you declare. Remove --clamp.")
        return None
    if clamp is None:
        given = " (instead of --sensitivity, which is not accepted here)" if args.sensitivity is not None else ""
        raise ValueError(
            f"--mechanism {mechanism} with an analyst's --oracle needs a public clamp interval: pass --clamp LO HI"
            f"{given}, finite with LO < HI. Nothing checks an oracle's sensitivity (an oracle can return 0 on a "
            "dataset and 100 on a neighbour), so a declared --sensitivity would make the printed guarantee false; "
            "with --clamp the oracle's value is clamped into [LO, HI] before noise and the noise is calibrated to "
            "HI - LO, which holds for every oracle. Mechanisms that need no declared sensitivity: "
            f"{_sensitivity_free_mechanisms()}.")
    lower, upper = clamp
    if not lower < upper:
        raise ValueError(f"--clamp LO HI needs LO < HI (a public interval of positive width), got --clamp "
                         f"{lower!r} {upper!r}.")
    if args.sensitivity is not None:
        raise ValueError(f"--sensitivity cannot be combined with --clamp for an analyst's --oracle: the "
                         f"sensitivity is the interval's width HI - LO, which holds for every oracle. Remove "
                         f"--sensitivity {args.sensitivity!r}.")
    from gpuprivacy._rounding import float_up

    # Any two values of [LO, HI] differ by at most the exact HI - LO; its float64 is rounded up, never down.
    sensitivity = float_up(Fraction(upper) - Fraction(lower), what=f"--clamp width {upper!r} - ({lower!r})",
                           hint="pass a narrower --clamp interval.")
    return lower, upper, sensitivity


def clamp_statistic(value: float, lower: float, upper: float) -> float:
    """The oracle's value in [lower, upper], float64: NaN -> lower, then clipped (so -inf -> lower, +inf -> upper)."""
    value = np.float64(value)
    return float(np.clip(np.where(np.isnan(value), np.float64(lower), value), lower, upper))


def _statistic(data, oracle_fn, clamp) -> float:
    exact = statistic_on_full_data(data, oracle_fn)
    return exact if clamp is None else clamp_statistic(exact, clamp[0], clamp[1])


def _clamp_json(clamp) -> dict:
    if clamp is None:
        return {}
    lower, upper, sensitivity = clamp
    return {"clamp": [lower, upper], "sensitivity": sensitivity}


def _require_sensitivity(args, mechanism, clamp):
    if clamp is not None:
        return clamp[2]
    if args.sensitivity is None:
        raise ValueError(f"--mechanism {mechanism} adds noise calibrated to a sensitivity you declare: pass "
                         "--sensitivity X (the most one row can change the statistic). gpuprivacy does not check "
                         "this claim for the classic mechanisms; the black-box wrappers (Linder et al. 2025) do.")
    return args.sensitivity


def _laplace(key, data, oracle_fn, args):
    from gpuprivacy import mechanisms

    clamp = _oracle_clamp(args, "laplace-mechanism", oracle_fn)
    sensitivity = _require_sensitivity(args, "laplace-mechanism", clamp)
    value = _statistic(data, oracle_fn, clamp)
    release = mechanisms.laplace_mechanism(key, value, epsilon=args.epsilon, sensitivity=sensitivity,
                                           secure=args.secure)
    return {"value": float(release.value), "scale": float(release.info.scale), "guarantee": guarantee_json(release),
            **_clamp_json(clamp)}


def _gaussian(key, data, oracle_fn, args):
    from gpuprivacy import mechanisms

    clamp = _oracle_clamp(args, "gaussian-mechanism", oracle_fn)
    sensitivity = _require_sensitivity(args, "gaussian-mechanism", clamp)
    if args.delta is None:
        raise ValueError("--mechanism gaussian-mechanism needs --delta D in (0, 1), e.g. --delta 1e-6.")
    value = _statistic(data, oracle_fn, clamp)
    release = mechanisms.gaussian_mechanism(key, value, epsilon=args.epsilon, delta=args.delta,
                                            sensitivity=sensitivity, secure=args.secure)
    return {"value": float(release.value), "sigma": float(release.info.sigma), "guarantee": guarantee_json(release),
            **_clamp_json(clamp)}


ESTIMATORS = (
    Estimator("laplace-mechanism", _laplace, "statistic + Laplace noise with your declared --sensitivity (an analyst's "
              "--oracle: clamped to --clamp LO HI, sensitivity HI - LO)", add_arguments,
              options=("clamp", "sensitivity", "secure"), releases=("laplace_mechanism",)),
    Estimator("gaussian-mechanism", _gaussian, "statistic + analytic Gaussian noise (--delta) with your --sensitivity (an "
              "analyst's --oracle: --clamp LO HI)", add_arguments,
              options=("clamp", "delta", "sensitivity", "secure"), releases=("gaussian_mechanism",)),
)
