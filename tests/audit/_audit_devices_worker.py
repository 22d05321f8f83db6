"""Measures how an audit's sampling is split over this process's devices (run as a script).

Writes JSON: the device count; audits of a discrete mechanism (declared range), a real-valued one and
an undeclared-range control; for one stream, the samples each device counted (read from its own
counter state, which stays on it), the compiled per-device step's loop trip count (from the HLO each
device runs) and the number of steps; and the process CPU time of audits whose sampler dominates.
Run under XLA_FLAGS=--xla_force_host_platform_device_count=D.
"""

import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.audit._controls

NUM_CANDIDATES = 16


def _result(r):
    return [r.epsilon_lower, r.event, r.direction, r.p_lower, r.q_upper]


def main():
    import jax
    import jax.numpy as jnp
    from gpuprivacy import PureDP, audit
    from gpuprivacy.audit import _streams as engine
    from tests.audit._controls import svt_control

    @jax.jit
    def gumbel_argmax(key, x):  # no loops inside: the step's scan is the only while loop of its program
        return jnp.argmax(x[None, :] + jax.random.gumbel(key, (engine.SAMPLES_PER_CALL, x.shape[0])), axis=1)

    def sample(key, x, num_samples):
        return gumbel_argmax(key, jnp.asarray(x, jnp.float64))[:num_samples].astype(jnp.int32)

    x = np.zeros(NUM_CANDIDATES)
    x[0] = 1.0
    x_prime = np.zeros(NUM_CANDIDATES)
    mechanism = audit.AuditableMechanism(name="gumbel-argmax", sample=sample, claim=PureDP(2.0),
                                         output_kind="discrete", output_range_size=NUM_CANDIDATES)
    results = {}
    num_samples = 10 * engine.SAMPLES_PER_CALL + 123  # 11 blocks per side, the last partial: 3, 3, 3, 2 on 4 devices
    for chunk_size in (None, 1, 7 * engine.SAMPLES_PER_CALL):
        results[f"declared-{chunk_size}"] = _result(audit.audit(mechanism, x, x_prime, num_samples=num_samples,
                                                                key=jax.random.key(3), chunk_size=chunk_size))
    laplace = audit.get("laplace")
    y, y_prime = laplace.worst_case_pairs[0]
    for chunk_size in (None, 1):
        results[f"real-{chunk_size}"] = _result(audit.audit(laplace, y, y_prime, num_samples=5 * 10**5,
                                                            key=jax.random.key(4), chunk_size=chunk_size))
    control = svt_control(5)
    results["undeclared"] = _result(audit.audit(control, np.r_[np.ones(5), np.zeros(5)], np.r_[np.zeros(5), np.ones(5)],
                                                num_samples=3 * 10**5, key=jax.random.key(5)))

    # One stream, white-box: the samples each device counted, the step's compiled loop and the host's steps.
    mesh = engine.default_mesh()
    key = jax.random.key(6)
    block = engine._block_size(num_samples)
    spec = engine._output_spec(mechanism, key, x, block)
    streams = engine._Streams(mechanism, spec, x, mesh, None, None)
    counter = engine._output_counter(spec, NUM_CANDIDATES + 1)
    state = streams.count(counter, key, num_samples, block)
    per_device_counted = np.asarray(state[1]).sum(axis=1).tolist()
    host = engine._count_outputs(engine._draw(mechanism, key, x, num_samples, None))
    device, _, _ = counter.finish(jax.device_get(state))
    plan = engine._plan_stream(block, streams.bytes_per_sample, mesh, None)
    step = engine._stream_step(mechanism.sample, counter, plan, mesh, (streams.x.shape, str(streams.x.dtype)),
                               (key.shape, str(key.dtype)), ((), "int32"))
    text = step.lower(engine._initial_state(counter, mesh)(), *[jnp.asarray(0, jnp.int64)] * 5, key, streams.x,
                      jnp.zeros((), jnp.int32)).compile().as_text()
    trips = [int(n) for n in re.findall(r'known_trip_count":\{"n":"(\d+)"', text)]
    blocks = -(-num_samples // block)
    run = -(-blocks // plan.num_devices)

    # CPU time of audits dominated by sampling (steady state: the first call compiles).
    audit.audit(mechanism, x, x_prime, num_samples=num_samples, key=jax.random.key(7))
    cpu = []
    for repeat in range(3):
        start = time.process_time()
        audit.audit(mechanism, x, x_prime, num_samples=num_samples, key=jax.random.key(8 + repeat))
        cpu.append(time.process_time() - start)

    json.dump({"device_count": jax.device_count(), "results": results, "per_device_counted": per_device_counted,
               "num_samples": num_samples, "block": block, "run_blocks": run, "per_device": plan.per_device,
               "micro_batch": plan.micro_batch, "num_steps": -(-run // plan.per_device), "trip_counts": trips,
               "device_counts_equal_host_counts": {str(k): v for k, v in device.items()} ==
               {str(k): v for k, v in host.items()}, "cpu_seconds": min(cpu)}, open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()
