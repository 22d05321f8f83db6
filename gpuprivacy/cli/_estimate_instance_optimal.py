"""`gpuprivacy estimate --mechanism ...` entries for Durfee 2025, piecewise Laplace (registered at import).

``--mechanism piecewise-laplace`` / ``inverse-sensitivity`` release the
median, a quantile (``--param q=...``) or the clipped mean
(``--param lower=... --param upper=...``) of a CSV column with exact local
bounds (Durfee 2025; swap neighbours, n public). The data domain
``--lower/--upper`` is public and required; values outside it are an error
unless ``--clip``. ``--statistic quantile`` is released as the rank-based
lower empirical quantile (rank ``max(1, ceil(q n))``), not the library
oracle's interpolated quantile: the closed-form local bounds are for order
statistics.
"""

from __future__ import annotations


from gpuprivacy.cli._estimate_common import Estimator, guarantee_json

_STATISTICS = ("median", "quantile", "clipped_mean")


def add_arguments(group) -> None:
    group.add_argument("--clip", action="store_true", help="clip data into [--lower, --upper] instead of failing")


def _run(mechanism):
    def run(key, data, oracle_fn, args):
        from gpuprivacy.mechanisms import instance_optimal as io

        statistic = getattr(oracle_fn, "__name__", "")
        lower, upper = getattr(args, "lower", None), getattr(args, "upper", None)
        if lower is None or upper is None:
            raise ValueError(f"--mechanism {mechanism} needs the public data domain: pass --lower L --upper U "
                             "(values outside it are an error unless --clip).")
        params = dict(getattr(args, "param", []) or [])
        clip = bool(getattr(args, "clip", False))
        prefix = mechanism.replace("-", "_")
        common = dict(epsilon=args.epsilon, lower=lower, upper=upper, clip=clip)
        if args.statistic == "median":
            release = getattr(io, f"{prefix}_median")(key, data, **common)
        elif args.statistic == "quantile":
            release = getattr(io, f"{prefix}_quantile")(key, data, quantile=float(params["q"]), **common)
        elif args.statistic == "clipped_mean":
            clip_lower, clip_upper = float(params["lower"]), float(params["upper"])
            if (clip_lower, clip_upper) != (lower, upper):
                raise ValueError(f"--mechanism {mechanism} with --statistic clipped_mean uses the data domain as the "
                                 f"clipping range; pass --param lower={lower} --param upper={upper} (got "
                                 f"{clip_lower}, {clip_upper}).")
            release = getattr(io, f"{prefix}_clipped_mean")(key, data, epsilon=args.epsilon, lower=lower, upper=upper,
                                                            clip=True)
        else:
            raise ValueError(f"--mechanism {mechanism} computes exact local bounds in closed form only for "
                             f"{', '.join(_STATISTICS)}; got --statistic {args.statistic}. A generic black-box "
                             "statistic has no computable exact local bounds over a continuous domain.")
        del statistic
        return {"value": float(release.value), "domain": [lower, upper],
                "note": "epsilon-DP under swap neighbours (n public); worst case = Laplace at epsilon/2",
                "guarantee": guarantee_json(release)}

    return run


ESTIMATORS = (
    Estimator("piecewise-laplace", _run("piecewise-laplace"),
        "median/quantile/clipped_mean by the piecewise Laplace mechanism (Durfee 2025) on --lower/--upper",
        add_arguments,
              options=("clip", "lower", "upper"), releases=tuple(f"instance_optimal.piecewise_laplace{s}" for s in ("", "_median", "_quantile", "_clipped_mean"))),
    Estimator("inverse-sensitivity", _run("inverse-sensitivity"),
        "median/quantile/clipped_mean by the inverse sensitivity mechanism on --lower/--upper",
        add_arguments,
              options=("clip", "lower", "upper"), releases=tuple(f"instance_optimal.inverse_sensitivity{s}" for s in ("", "_median", "_quantile", "_clipped_mean"))),
)
