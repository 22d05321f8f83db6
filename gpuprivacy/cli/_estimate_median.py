"""`gpuprivacy estimate --mechanism private-median` (Tzamos et al. 2020; registered at import).

Releases the median of a CSV column with the optimal private median of Tzamos et al. (2020), eq. (3.6):
pure epsilon-DP under replacement of one record for any data. The model parameters are
public and required: ``--min-density`` (L), ``--radius`` (r), ``--median-bound`` (R); ``--constant``
(C, default 6). Records outside [-R, R] are legal (unbounded support is part of the model).
"""

from __future__ import annotations

import math

from gpuprivacy.cli._estimate_common import Estimator, guarantee_json


def add_arguments(group) -> None:
    group.add_argument("--min-density", type=float, default=None,
                       help="private-median: L, a lower bound on the data density within --radius of the median")
    group.add_argument("--radius", type=float, default=None, help="private-median: r (L * r <= 1/2)")
    group.add_argument("--median-bound", type=float, default=None, help="private-median: R, the median lies in [-R, R]")
    group.add_argument("--constant", type=float, default=6.0,
                       help="private-median: C > 0 (default 6; theory needs > 104.3)")


def run(key, data, oracle_fn, args):
    from gpuprivacy.mechanisms import median

    if args.statistic != "median":
        raise ValueError(f"--mechanism private-median releases the median only; got --statistic {args.statistic}.")
    params = dict(min_density=getattr(args, "min_density", None), radius=getattr(args, "radius", None),
                  median_bound=getattr(args, "median_bound", None))
    missing = [f"--{name.replace('_', '-')}" for name, value in params.items() if value is None]
    if missing:
        raise ValueError(f"--mechanism private-median needs the public model parameters {', '.join(missing)} "
                         "(L, r, R of Tzamos et al. Assumption 1.2).")
    del oracle_fn
    # The optional public domain (--lower/--upper, default unbounded) follows the rule shared by every
    # median: records outside it are an error unless --clip.
    lower, upper = getattr(args, "lower", None), getattr(args, "upper", None)
    params.update(epsilon=args.epsilon, constant=getattr(args, "constant", 6.0),
                  lower=-math.inf if lower is None else lower, upper=math.inf if upper is None else upper,
                  clip=bool(getattr(args, "clip", False)))
    release = median.private_median(key, data.reshape(-1), **params)
    return {"value": float(release.value), "support": float(release.info.support),
            "laplace_scale": float(release.info.scale),
            "note": "epsilon-DP under replacement (n public); the general density (3.6), never the Case-A shortcut",
            "guarantee": guarantee_json(release)}


ESTIMATORS = (
    Estimator("private-median", run, "median by the optimal private median (Tzamos et al. 2020) with "
        "--min-density/--radius/--median-bound", add_arguments,
              options=("clip", "constant", "lower", "median_bound", "min_density", "radius", "upper"),
              releases=("median.private_median",)),
)
