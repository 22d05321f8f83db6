"""``gpuprivacy bound gaussian-rnm|gaussian-at``: evaluate the pure-DP bounds of Lebensold et al. 2024 (Thm 8, Thm 10, corrected)."""

from __future__ import annotations

import json
import sys


def add_bound_parser(subparsers) -> None:
    parser = subparsers.add_parser("bound", help="evaluate a privacy bound (Gaussian selection, pure DP)")
    kinds = parser.add_subparsers(dest="bound", required=True, metavar="BOUND")

    rnm = kinds.add_parser("gaussian-rnm", help="pure epsilon of Gaussian report noisy max (Lebensold et al. Thm 8)")
    rnm.add_argument("--sigma", type=float, required=True, help="noise standard deviation")
    rnm.add_argument("--d", type=int, required=True, help="number of candidates (>= 2)")
    _common(rnm)

    at = kinds.add_parser("gaussian-at", help="ex-post epsilon of Gaussian above threshold halting at step t "
                          "(Lebensold et al. Thm 10, corrected)")
    at.add_argument("--t", type=int, required=True, help="stopping time (>= 1)")
    at.add_argument("--sigma-threshold", type=float, required=True, help="threshold noise standard deviation")
    at.add_argument("--sigma-query", type=float, required=True, help="query noise standard deviation")
    at.add_argument("--threshold", type=float, required=True, help="public threshold rho")
    at.add_argument("--no-top", action="store_true", help="bound the output bottom^t (no top) instead")
    _common(at)
    parser.set_defaults(handler=run_bound)


def _common(parser) -> None:
    parser.add_argument("--sensitivity", type=float, required=True, help="per-query sensitivity Delta")
    parser.add_argument("--lower", type=float, required=True, help="lower end of the queries' public range")
    parser.add_argument("--upper", type=float, required=True, help="upper end of the queries' public range")
    parser.add_argument("--method", choices=("quadrature", "mpmath"), default="quadrature",
                        help="float64 device quadrature with an error estimate (default) or mpmath at increasing "
                             "precision")
    parser.add_argument("--certified", action="store_true",
                        help="proven upper bound in arb ball arithmetic (needs python-flint), rounded up")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_bound(args) -> None:
    try:
        _run_bound(args)
    except ImportError as err:  # certified=True without python-flint: a user error, exit code 2
        raise ValueError(str(err)) from None


def _run_bound(args) -> None:
    from gpuprivacy import accounting

    common = dict(sensitivity=args.sensitivity, lower=args.lower, upper=args.upper)
    options = dict(method=args.method, certified=args.certified)
    if args.bound == "gaussian-rnm":
        inputs = dict(sigma=args.sigma, d=args.d, **common)
        epsilon = accounting.gaussian_rnm_epsilon(**inputs, **options)
        kind = "pure ex-ante epsilon-DP"
    else:
        inputs = dict(t=args.t, sigma_threshold=args.sigma_threshold, sigma_query=args.sigma_query,
                      threshold=args.threshold, **common)
        fn = accounting.gaussian_at_epsilon_no_top if args.no_top else accounting.gaussian_at_epsilon
        epsilon = fn(**inputs, **options)
        kind = ("ex-post epsilon of the output bottom^t" if args.no_top
                else "ex-post epsilon of the output bottom^(t-1) top")
    method = "arb" if args.certified else args.method
    payload = {"bound": args.bound, "epsilon": epsilon, "kind": kind, "method": method,
               "certified": bool(args.certified), "inputs": inputs}
    if args.bound == "gaussian-at":
        payload["no_top"] = bool(args.no_top)
    if args.json:
        json.dump(payload, sys.stdout)
        sys.stdout.write("\n")
        return
    shown = ", ".join(f"{k}={v}" for k, v in inputs.items())
    print(f"{args.bound} ({shown}): epsilon = {epsilon!r} ({kind}; {method}"
          f"{', certified' if args.certified else ''}; rounded up)")
