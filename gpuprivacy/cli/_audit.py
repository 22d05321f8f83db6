"""``gpuprivacy audit MECHANISM``: check a registered mechanism's claim by experiment."""

from __future__ import annotations

import json
import sys

from gpuprivacy.cli._types import seed_argument


def add_audit_parser(subparsers) -> None:
    parser = subparsers.add_parser("audit", help="audit a mechanism's privacy claim empirically")
    parser.add_argument("mechanism", nargs="?", help="registered name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the registered mechanisms")
    parser.add_argument("--pair", choices=("worst-case", "search"), default="worst-case",
                        help="the documented worst-case neighbours, or a seeded random search")
    parser.add_argument("--samples", type=int, default=10**5, help="samples per dataset (default 1e5)")
    parser.add_argument("--epsilon", type=float, action="append", help="audit at this epsilon (repeatable)")
    parser.add_argument("--confidence", type=float, default=1 - 1e-6)
    parser.add_argument("--candidates", type=int, default=20, help="pairs tried by --pair search")
    parser.add_argument("--seed", type=seed_argument, default=0, help="PRNG seed, 0 <= seed < 2**63")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run_audit)


def run_audit(args) -> None:
    import jax

    from gpuprivacy import audit

    if args.list:
        names = audit.registered()
        if args.json:
            json.dump({"mechanisms": names}, sys.stdout)
            sys.stdout.write("\n")
        else:
            for name in names:
                print(f"{name:30s} {audit.get(name).description}")
        return
    if not args.mechanism:
        raise ValueError("name a mechanism to audit, e.g. `gpuprivacy audit laplace-mechanism`; `gpuprivacy audit --list` "
                         "lists them.")
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}.")
    epsilons = args.epsilon or [None]
    key = jax.random.key(args.seed)
    rows = []
    for i, epsilon in enumerate(epsilons):
        params = {} if epsilon is None else {"epsilon": epsilon}
        mechanism = audit.get(args.mechanism, **params)
        run_key = jax.random.fold_in(key, i)
        if args.pair == "search":
            found = audit.search_neighbours(mechanism, jax.random.fold_in(run_key, 1),
                                            num_candidates=args.candidates)
            pairs = [(found.dataset, found.neighbour)]
        else:
            pairs = list(mechanism.worst_case_pairs)
            if not pairs:
                raise ValueError(f"{args.mechanism} has no worst-case pairs; use --pair search.")
        best = None
        for j, (x, x_prime) in enumerate(pairs):
            result = audit.audit(mechanism, x, x_prime, num_samples=args.samples, confidence=args.confidence,
                                 key=jax.random.fold_in(run_key, 2 + j), progress=not args.no_progress)
            if best is None or result.epsilon_lower > best.epsilon_lower:
                best = result
        rows.append(best)
    if args.json:
        json.dump({"mechanism": args.mechanism, "pair": args.pair, "results": [r.to_json() for r in rows],
                   "violated": any(r.violated for r in rows)}, sys.stdout)
        sys.stdout.write("\n")
        return
    for r in rows:
        verdict = "VIOLATED" if r.violated else "consistent with the claim"
        print(f"{r.mechanism}: claim {type(r.claim).__name__} -> epsilon {r.claimed_epsilon:.6g} at delta "
              f"{r.delta:g}; empirical lower bound {r.epsilon_lower:.4f} (confidence {r.confidence}, "
              f"{r.num_samples} samples per side, event: {r.event}, {r.direction}) -> {verdict}")
