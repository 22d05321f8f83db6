"""`gpuprivacy estimate --mechanism laplace|gaussian`: a library statistic plus calibrated noise."""

from __future__ import annotations

from gpuprivacy.cli._estimate_common import Estimator, guarantee_json, statistic_on_full_data


def _require_sensitivity(args, mechanism):
    if args.sensitivity is None:
        raise ValueError(f"--mechanism {mechanism} adds noise calibrated to a sensitivity you declare: pass "
                         "--sensitivity X (the most one row can change the statistic). gpuprivacy does not check "
                         "this claim for the classic mechanisms; the black-box wrappers (Linder et al. 2025) do.")
    return args.sensitivity


def _laplace(key, data, oracle_fn, args):
    from gpuprivacy import mechanisms

    sensitivity = _require_sensitivity(args, "laplace")
    exact = statistic_on_full_data(data, oracle_fn)
    release = mechanisms.laplace_mechanism(key, exact, epsilon=args.epsilon, sensitivity=sensitivity,
                                           secure=args.secure)
    return {"value": float(release.value), "scale": float(release.info.scale), "guarantee": guarantee_json(release)}


def _gaussian(key, data, oracle_fn, args):
    from gpuprivacy import mechanisms

    sensitivity = _require_sensitivity(args, "gaussian")
    if args.delta is None:
        raise ValueError("--mechanism gaussian needs --delta D in (0, 1), e.g. --delta 1e-6.")
    exact = statistic_on_full_data(data, oracle_fn)
    release = mechanisms.gaussian_mechanism(key, exact, epsilon=args.epsilon, delta=args.delta,
                                            sensitivity=sensitivity, secure=args.secure)
    return {"value": float(release.value), "sigma": float(release.info.sigma), "guarantee": guarantee_json(release)}


ESTIMATORS = (
    Estimator("laplace", _laplace, "statistic + Laplace noise with your declared --sensitivity",
              options=("sensitivity", "secure")),
    Estimator("gaussian", _gaussian, "statistic + analytic Gaussian noise (--delta) with your --sensitivity",
              options=("delta", "sensitivity", "secure")),
)
