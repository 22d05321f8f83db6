"""Evaluates a few families on however many host devices XLA_FLAGS gives (run as a script)."""

import json
import sys

import numpy as np


def main():
    import jax
    import gpuprivacy  # noqa: F401
    from gpuprivacy import oracle, subsets

    data = np.random.default_rng(7).standard_normal(23)
    out = {"device_count": jax.device_count(), "values": {}}
    for name, family in [("removals", subsets.removals(23, 2)),
                         ("random", subsets.random_subsets(jax.random.key(5), 23, 17, 301)),
                         ("partition", subsets.partition(23, 5))]:
        for chunk in (1, 7, None):
            values = oracle.evaluate(oracle.median, data, family, chunk_size=chunk)
            out["values"][f"{name}-{chunk}"] = np.asarray(values).tolist()
    power = np.asarray(oracle.evaluate_powerset(oracle.median, data[:11]))
    out["values"]["powerset"] = [None if np.isnan(v) else float(v) for v in power]  # JSON has no NaN equality
    json.dump(out, open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()
