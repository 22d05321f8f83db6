"""`gpuprivacy estimate --mechanism blackbox-estimate`: black-box estimation over covering designs (Steinke & Steinke
2025).

Example::

    gpuprivacy estimate --data bikes.csv --column cnt --statistic median --mechanism blackbox-estimate \\
        --epsilon 1 --lower 0 --upper 9000 --resolution 100 --budget 300 --json

The design is chosen before the data is read: ``--design auto`` asks
:func:`gpuprivacy.designs.plan_design` for the block design that maximises
the rows per evaluation within ``--budget`` oracle calls; ``--m M`` instead
asks for the design whose removed sets are closest to (and at least) M rows.
"""

from __future__ import annotations

import math

from gpuprivacy.cli._estimate_common import Estimator, guarantee_json

DESIGNS = ("auto", "sample-and-aggregate", "blocks", "all-subsets")
VARIANTS = ("pure", "zcdp", "binary")


def add_arguments(group) -> None:
    group.add_argument("--resolution", type=float, help="blackbox: grid spacing of Y (default (upper - lower)/100)")
    group.add_argument("--budget", type=int, help="blackbox: most oracle calls k (default 1000)")
    group.add_argument("--m", type=int, help="blackbox: rows removed per evaluation (overrides the planner's choice)")
    group.add_argument("--design", choices=DESIGNS, default="auto", help="blackbox: covering design (default auto)")
    group.add_argument("--variant", choices=VARIANTS, default="pure",
                       help="blackbox: pure (exponential mechanism), zcdp (noisy binary search; --rho) or binary "
                       "(0/1 statistic)")
    group.add_argument("--rho", type=float,
                       help="blackbox --variant zcdp: rho (default: from --epsilon/--delta by (4.9))")
    group.add_argument("--max-work", type=int, help="blackbox: public limit on exact aggregation work (default 1e9)")


def _choose_design(n, args, mechanism, epsilon, rho, num_outputs, beta):
    from gpuprivacy import designs

    budget = 1000 if args.budget is None else args.budget
    design_name = getattr(args, "design", "auto") or "auto"
    t, _ = designs.required_t(mechanism, epsilon=epsilon, rho=rho, num_outputs=num_outputs, beta=beta)
    if args.m is not None:
        if not t <= args.m < n:
            raise ValueError(f"--m must satisfy t = {t} <= m < n = {n} (the mechanism needs t = {t}), got {args.m}.")
        # Blocks with c kept blocks remove n - c floor(n/(t+c)) rows: the fewest oracle calls with removed <= m.
        candidates = [c for c in range(1, n - t + 1) if n - c * (n // (t + c)) <= args.m]
        if not candidates:
            raise ValueError(f"no block design for t = {t} removes at most --m {args.m} of n = {n} rows; raise --m.")
        c = min(candidates)
        if math.comb(t + c, c) > budget and args.budget is not None:
            raise ValueError(f"--m {args.m} needs a block design with k = {math.comb(t + c, c)} > --budget {budget}.")
        return designs.block_design(n, t, c, max_subsets=max(math.comb(t + c, c), 1)), t
    if design_name == "sample-and-aggregate":
        return designs.sample_and_aggregate(n, t), t
    if design_name == "all-subsets":
        return designs.all_subsets_design(n, t, max_subsets=budget), t
    plan = designs.plan_design(n, budget=budget, mechanism=mechanism, epsilon=epsilon, rho=rho,
                               num_outputs=num_outputs, beta=beta)
    if design_name == "blocks":
        blocks = [cand for cand in plan.candidates if cand.design == "block"]
        return designs.block_design(n, t, blocks[0].c, max_subsets=blocks[0].num_subsets), t
    return plan.build(), t


def run(key, data, oracle_fn, args) -> dict:
    from gpuprivacy.mechanisms import blackbox

    variant = getattr(args, "variant", "pure") or "pure"
    beta = 0.05 if args.beta is None else args.beta
    max_work = 10**9 if getattr(args, "max_work", None) is None else args.max_work
    n = data.shape[0]
    if variant == "binary":
        lower, upper, resolution = 0.0, 1.0, 1.0
    else:
        if args.lower is None or args.upper is None:
            raise ValueError("--mechanism blackbox-estimate needs the public output range: pass --lower L --upper U (and "
                             "optionally --resolution R); the range must not be read from the data.")
        lower, upper = args.lower, args.upper
        resolution = args.resolution
        if resolution is None:
            resolution = (upper - lower) / 100 if upper > lower else 1.0
    num_outputs = blackbox.output_grid(lower=lower, upper=upper, resolution=resolution).size
    rho = getattr(args, "rho", None)
    if rho is not None and variant != "zcdp":
        raise ValueError(f"--rho {rho!r} sets the zCDP budget of --variant zcdp; --variant {variant} is pure "
                         f"epsilon-DP and would ignore it. Pass --variant zcdp --rho {rho!r}, or drop --rho.")
    if variant == "zcdp" and rho is None:
        if args.delta is None:
            raise ValueError("--variant zcdp needs --rho R > 0, or --delta D to use rho = eps^2/(4 log(1/D) + 4 eps) "
                             "(paper (4.9)), which implies (--epsilon, --delta)-DP.")
        rho = blackbox.zcdp_rho_for(epsilon=args.epsilon, delta=args.delta)
    design, t = _choose_design(n, args, variant, args.epsilon, rho, num_outputs, beta)
    common = dict(design=design, beta=beta, max_work=max_work)
    if variant == "pure":
        release = blackbox.blackbox_estimate(key, data, oracle_fn, epsilon=args.epsilon, lower=lower, upper=upper,
                                             resolution=resolution, **common)
    elif variant == "zcdp":
        release = blackbox.blackbox_estimate_zcdp(key, data, oracle_fn, rho=rho, lower=lower, upper=upper,
                                                  resolution=resolution, **common)
    else:
        release = blackbox.blackbox_binary(key, data, oracle_fn, epsilon=args.epsilon, **common)
    kept = int(design.capacity)
    return {"value": float(release.value), "guarantee": guarantee_json(release), "variant": variant,
            "design": design.name, "k": int(design.num_subsets), "t": int(t), "rows_per_evaluation": kept,
            "m": int(n - kept), "num_outputs": int(num_outputs), "aggregation": release.info.aggregation,
            "note": "epsilon is for adding/removing one row (slot); replacing a row costs twice."}


ESTIMATORS = (
    Estimator("blackbox-estimate", run, "black-box statistic over a covering design (Steinke & Steinke): --lower/--upper, "
        "--budget or --m, --design", add_arguments,
              options=("beta", "budget", "delta", "design", "lower", "m", "max_work", "resolution", "rho", "upper", "variant"),
              releases=("blackbox.blackbox_estimate", "blackbox.blackbox_estimate_zcdp", "blackbox.blackbox_binary")),
)
