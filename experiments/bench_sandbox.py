"""What the oracle sandbox costs: per new (oracle, block shape), per cached release, and at run time.

    python experiments/bench_sandbox.py           # CPU
    python experiments/bench_sandbox.py --gpu     # the same on an accelerator
    python experiments/bench_sandbox.py --json    # one JSON object on stdout

An analyst's oracle (``oracle.untrusted``) is traced in the sandbox worker
and rebuilt from allowed primitives once per (oracle, shape); the baseline is
the same oracle marked ``oracle.trusted`` (in-process, no sandbox), measured
in the same run:

* first use: worker start (once per process: kernel confinement, then the JAX
  import) + one request (a fork of the template, the trace, validation, rebuild
  and the compile check), and that split on a fresh worker, with the time the
  worker reports for confining itself;
* a new shape on a warm worker: fork + trace + validation + rebuild;
* a cached (oracle, shape): the gate's lookup;
* a cached release: ``evaluate`` of removals(n, 2) and one Sens-o-Matic release
  through the sandboxed oracle vs the trusted one (compiled programs are the
  same, so the ratio should be ~1).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import jax
import numpy as np

import gpuprivacy as gp
from gpuprivacy.mechanisms import wrappers
from gpuprivacy.oracle import _sandbox  # noqa: E402  (the benchmark times the worker's start on its own)
from gpuprivacy.oracle._trust import resolve_oracle  # the one gate: its cached lookup is timed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import best_of  # noqa: E402

SOURCE = """
import jax.numpy as jnp

def trimmed(rows, valid):
    count = valid.sum(dtype=jnp.int64)
    lo, hi = count // 10, count - count // 10
    index = jnp.arange(rows.shape[0])
    keep = valid & (index >= lo) & (index < hi)
    return jnp.where(keep, rows, 0.0).sum() / jnp.maximum(hi - lo, 1)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="larger sizes for an accelerator")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    n = 2000 if args.gpu else 400
    rng = np.random.default_rng(0)
    data = rng.standard_normal(n)
    family = gp.subsets.removals(n, 2)
    namespace: dict = {}
    exec(compile(SOURCE, "<trusted copy>", "exec"), namespace)  # noqa: S102  (the baseline: the same code, trusted)
    trusted = gp.oracle.trusted(namespace["trimmed"])
    analyst = gp.oracle.untrusted(source=SOURCE, name="trimmed")

    gp.oracle.shutdown_worker()
    t0 = time.perf_counter()
    gp.oracle.evaluate(analyst, data[:10], gp.subsets.removals(10, 0))
    first_use = time.perf_counter() - t0
    # The first use split: the worker's start (confinement + importing JAX), then one request (fork, trace,
    # validation, rebuild, the compile check), measured again on a fresh worker.
    worker = _sandbox._WORKER
    worker.stop()
    t0 = time.perf_counter()
    worker._start(_sandbox.DEFAULT_TIMEOUT_S)
    worker_start = time.perf_counter() - t0
    confine_s = worker.confine_s
    other = gp.oracle.untrusted(source=SOURCE + "\n# another oracle\n", name="trimmed")
    t0 = time.perf_counter()
    gp.oracle.evaluate(other, data[:10], gp.subsets.removals(10, 0))
    first_request = time.perf_counter() - t0
    t0 = time.perf_counter()
    gp.oracle.evaluate(analyst, data[:11], gp.subsets.removals(11, 0))
    new_shape = time.perf_counter() - t0
    t0 = time.perf_counter()
    gp.oracle.evaluate(analyst, data[:11], gp.subsets.removals(11, 0))
    cached_small = time.perf_counter() - t0
    lookups = 1000
    t0 = time.perf_counter()
    for _ in range(lookups):
        resolve_oracle(analyst, rows_shape=(11,), rows_dtype=np.float64, capacity=11)
    lookup = (time.perf_counter() - t0) / lookups

    sandboxed_values = np.asarray(gp.oracle.evaluate(analyst, data, family))
    trusted_values = np.asarray(gp.oracle.evaluate(trusted, data, family))
    bitwise = bool(np.array_equal(sandboxed_values, trusted_values))
    ours_eval = best_of(lambda: np.asarray(gp.oracle.evaluate(analyst, data, family)), 5)
    base_eval = best_of(lambda: np.asarray(gp.oracle.evaluate(trusted, data, family)), 5)

    small = data[:16]
    som = dict(grid=np.linspace(-1.0, 1.0, 41), epsilon=2.0, beta=0.1, capacity=16)
    key = jax.random.key(0)
    ours_som = best_of(lambda: float(wrappers.sens_o_matic(key, small, oracle_fn=analyst, **som).value), 15)
    base_som = best_of(lambda: float(wrappers.sens_o_matic(key, small, oracle_fn=trusted, **som).value), 15)

    result = {
        "benchmark": "sandbox", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "devices": [str(d) for d in jax.devices()], "jax": jax.__version__, "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "first_use_s": first_use, "worker_start_s": worker_start, "confine_s": confine_s,
        "confined": worker.confined, "new_oracle_s": first_request, "new_shape_s": new_shape,
        "cached_lookup_s": lookup, "cached_small_evaluate_s": cached_small,
        "evaluate": {"subsets": family.num_subsets, "sandboxed_s": ours_eval, "trusted_s": base_eval,
                     "ratio": ours_eval / base_eval, "bitwise_equal": bitwise},
        "sens_o_matic_n16": {"sandboxed_s": ours_som, "trusted_s": base_som, "ratio": ours_som / base_som},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"# bench_sandbox  {result['date']}  devices={result['devices']}  jax {jax.__version__}  "
          f"load {result['load']:.2f}")
    print(f"first use (worker start + trace + validate + rebuild): {first_use * 1e3:8.1f} ms")
    print(f"  of which the worker's start (confinement + JAX import): {worker_start * 1e3:8.1f} ms "
          f"(confinement itself {confine_s * 1e3 if confine_s is not None else float('nan'):.1f} ms, "
          f"confined: {worker.confined})")
    print(f"a new oracle on a warm worker (fork + trace + rebuild): {first_request * 1e3:8.1f} ms")
    print(f"new block shape on a warm worker:                      {new_shape * 1e3:8.1f} ms")
    print(f"cached (oracle, shape): the gate's lookup               {lookup * 1e6:8.1f} us")
    print(f"cached, evaluate of 1 subset (compiled):               {cached_small * 1e3:8.1f} ms")
    print(f"evaluate removals({n}, 2) = {family.num_subsets} subsets: sandboxed {ours_eval:.3f} s, "
          f"trusted {base_eval:.3f} s, ratio {ours_eval / base_eval:.3f}, bitwise equal: {bitwise}")
    print(f"Sens-o-Matic release, n = 16 (65,536 queries): sandboxed {ours_som:.3f} s, trusted {base_som:.3f} s, "
          f"ratio {ours_som / base_som:.3f}")


if __name__ == "__main__":
    main()
