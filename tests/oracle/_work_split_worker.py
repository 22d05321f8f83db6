"""Measures how an evaluation's work is split over this process's devices (run as a script).

Writes JSON: the device count, the compiled per-device program's loop trip counts (from the HLO that
each device runs), the subsets each device evaluates per step, the process CPU time of the evaluation,
and the values. Run under XLA_FLAGS=--xla_force_host_platform_device_count=D.
"""

import json
import re
import sys
import time

import numpy as np


def compiled_trip_counts(oracle_fn, data, family):
    """Known trip counts of the while loops in the compiled chunk step (the program each device runs)."""
    import jax.numpy as jnp
    from gpuprivacy import oracle
    from gpuprivacy.oracle import _evaluate as engine

    mesh = oracle.default_mesh()
    plan = engine.plan_evaluation(oracle_fn, data, family, capacity=family.capacity, chunk_size=None, mesh=mesh)
    order = engine.canonical_order(data)
    rank = np.empty(data.shape[0] + 1, np.int32)
    rank[order] = np.arange(data.shape[0])
    rank[-1] = data.shape[0]
    runner = engine._ChunkRunner(oracle_fn, family, data[order], rank, plan, mesh)
    text = runner.kernel.lower(runner.empty_outputs(), jnp.asarray(0, jnp.int64), runner.sorted_data,
                               *runner.tables).compile().as_text()
    return [int(n) for n in re.findall(r'known_trip_count":\{"n":"(\d+)"', text)], plan


def powerset_work(data):
    """Subsets each device evaluates for the power set of ``data``, read from its compiled program."""
    import jax
    import jax.numpy as jnp
    from gpuprivacy import oracle
    from gpuprivacy.oracle import _levels

    n = data.shape[0]
    total, devices, micro = 1 << n, jax.device_count(), _levels.powerset_micro_batch()
    step = min(_levels.powerset_chunk_size(n), -(-total // devices))
    run = -(-total // (devices * step)) * step
    kernel = _levels._powerset_split_kernel(oracle.padded_oracle(oracle.mean, 32), n, 32, step, micro, run,
                                            oracle.default_mesh())
    values = jax.ShapeDtypeStruct((run * devices,), jnp.float64)
    text = kernel.lower(values, jnp.asarray(np.sort(data)), jnp.asarray(0, jnp.int64)).compile().as_text()
    (trips,) = [int(t) for t in re.findall(r'known_trip_count":\{"n":"(\d+)"', text)]
    return {"subsets": total, "per_device_work": (run // step) * trips * micro, "chunk": step}


def main():
    import jax
    import gpuprivacy  # noqa: F401
    from gpuprivacy import oracle, subsets

    data = np.random.default_rng(11).standard_normal(600)
    family = subsets.removals(600, 2)
    trips, plan = compiled_trip_counts(oracle.mean, data, family)
    jax.block_until_ready(oracle.evaluate(oracle.mean, data, family))  # compile
    cpu = []
    for _ in range(3):
        start = time.process_time()
        values = jax.block_until_ready(oracle.evaluate(oracle.mean, data, family))
        cpu.append(time.process_time() - start)
    power = powerset_work(data[:18]) if jax.device_count() > 1 else None
    json.dump({"device_count": jax.device_count(), "trip_counts": trips, "per_device": plan.per_device,
               "micro_batch": plan.micro_batch, "num_chunks": plan.num_chunks, "num_subsets": family.num_subsets,
               "cpu_seconds": min(cpu), "powerset": power,
               "values": np.asarray(values).tolist()}, open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()
