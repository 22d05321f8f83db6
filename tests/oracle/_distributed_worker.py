"""One process of the two-process jax.distributed test (run as a script)."""

import json
import sys

import jax

jax.config.update("jax_platforms", "cpu")


def main():
    address, num_processes, process_id, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    import gpuprivacy  # noqa: F401
    from gpuprivacy import oracle, subsets
    import numpy as np

    oracle.initialize_distributed(address, num_processes, process_id)
    assert jax.process_count() == num_processes and jax.device_count() == num_processes
    data = np.random.default_rng(7).standard_normal(23)
    values = {}
    for name, family in [("removals", subsets.removals(23, 2)),
                         ("random", subsets.random_subsets(jax.random.key(5), 23, 17, 301))]:
        values[name] = np.asarray(oracle.evaluate(oracle.median, data, family, chunk_size=37)).tolist()
    with open(out_path, "w") as handle:
        json.dump({"process_index": jax.process_index(), "device_count": jax.device_count(),
                   "values": values}, handle)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
