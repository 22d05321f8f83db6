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
    from gpuprivacy.oracle import _evaluate as engine

    # Count the subsets this process prepares on its host: each process must prepare only its own share.
    prepared = []
    original = engine._ChunkRunner._positions

    def counting(self, rows):
        prepared.append(len(rows))
        return original(self, rows)

    engine._ChunkRunner._positions = counting
    data = np.random.default_rng(7).standard_normal(23)
    values = {}
    for name, family in [("removals", subsets.removals(23, 2)),
                         ("random", subsets.random_subsets(jax.random.key(5), 23, 17, 301))]:
        values[name] = np.asarray(oracle.evaluate(oracle.median, data, family, chunk_size=37)).tolist()
    from _work_split_worker import compiled_trip_counts
    random_family = subsets.random_subsets(jax.random.key(5), 23, 17, 301)
    random_plan = engine.plan_evaluation(oracle.median, data, random_family, capacity=random_family.capacity,
                                         chunk_size=37, mesh=oracle.default_mesh())
    big = np.random.default_rng(8).standard_normal(300)
    trips, plan = compiled_trip_counts(oracle.mean, big, subsets.removals(300, 2))
    with open(out_path, "w") as handle:
        json.dump({"process_index": jax.process_index(), "device_count": jax.device_count(),
                   "local_device_count": jax.local_device_count(), "values": values,
                   "prepared_random_subsets": sum(prepared),
                   "random_share": random_plan.num_chunks * random_plan.per_device, "trip_counts": trips, "per_device": plan.per_device,
                   "micro_batch": plan.micro_batch, "num_chunks": plan.num_chunks}, handle)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
