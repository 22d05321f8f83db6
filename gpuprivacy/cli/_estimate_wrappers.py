"""`gpuprivacy estimate --mechanism ...` entries for the privacy wrappers of Linder et al. 2025 (registered at import).

``--mechanism sens-o-matic`` releases any library statistic of a CSV column
with Sens-o-Matic (Linder et al., Algorithm 1): no sensitivity to declare;
the public output grid is ``--grid-points`` evenly spaced values on
``[--lower, --upper]``. Up to 26 rows it evaluates the whole power set (pure
epsilon-DP); with ``--max-depth D`` it evaluates at most ``Q(n, D)``
subsets and reports the exact (epsilon, delta) of the cap (see docs/errata.md).
"""

from __future__ import annotations

import math

import numpy as np

from gpuprivacy.oracle import is_trusted

from gpuprivacy.cli._estimate_common import Estimator, guarantee_json


def add_arguments(group) -> None:
    group.add_argument("--grid-points", type=int, default=101, help="sens-o-matic: number of grid points (default 101)")
    group.add_argument("--capacity", type=int, default=None,
                       help="sens-o-matic: the public block size an --oracle sees (an upper bound on the rows)")
    group.add_argument("--max-depth", type=int, default=None,
                       help="sens-o-matic: public depth cap (turns the guarantee into (epsilon, delta))")


def run(key, data, oracle_fn, args):
    from gpuprivacy.mechanisms import wrappers

    lower, upper = getattr(args, "lower", None), getattr(args, "upper", None)
    if lower is None or upper is None:
        raise ValueError("--mechanism sens-o-matic needs the public output range: pass --lower L --upper U "
                         "(the release is a point of an evenly spaced grid on [L, U]).")
    beta = getattr(args, "beta", None)
    beta = 0.05 if beta is None else beta
    grid_points = getattr(args, "grid_points", None)
    grid_points = 101 if grid_points is None else grid_points
    if grid_points < 2:
        raise ValueError(f"--grid-points must be at least 2 (the release is a point of an evenly spaced grid on "
                         f"[--lower, --upper]), got --grid-points {grid_points}; the default is 101.")
    grid = np.linspace(lower, upper, int(grid_points))
    max_depth = getattr(args, "max_depth", None)
    n = np.asarray(data).shape[0]
    capacity = getattr(args, "capacity", None)
    if capacity is None:
        if not is_trusted(oracle_fn):
            raise ValueError("an analyst's --oracle must not learn the number of rows: pass --capacity C, a public "
                             f"upper bound on the rows of any dataset you would run (here at least {n}).")
        # A library (trusted) oracle: the block capacity may follow n.
        capacity = max(32, 1 << math.ceil(math.log2(max(n, 1))))
    release = wrappers.sens_o_matic(key, data, oracle_fn=oracle_fn, grid=grid, epsilon=args.epsilon, beta=beta,
                                    max_depth=max_depth, capacity=capacity)
    value = float(release.value)
    return {"value": None if math.isnan(value) else value, "nonresponse": bool(release.info.nonresponse),
            "level": int(release.info.level), "grid": [lower, upper, int(grid.size)],
            "guarantee": guarantee_json(release)}


ESTIMATORS = (
    Estimator("sens-o-matic", run, "any statistic by Sens-o-Matic (Linder et al.), no sensitivity needed: "
        "--lower/--upper grid, --grid-points, --beta, --max-depth", add_arguments,
              options=("beta", "capacity", "grid_points", "lower", "max_depth", "upper"),
              releases=("wrappers.sens_o_matic",)),
)
