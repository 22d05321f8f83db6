"""One process of the two-process sweep test (run as a script): its share of the cells, then the merge."""

import json
import sys

import jax

jax.config.update("jax_platforms", "cpu")


def main():
    address, num_processes, process_id, results, out_path = sys.argv[1:6]
    from gpuprivacy import oracle
    from gpuprivacy.sweeps import run_sweep

    oracle.initialize_distributed(address, int(num_processes), int(process_id))
    config = json.loads(sys.argv[6])
    summary = run_sweep(config, results_path=results, progress=False)
    with open(out_path, "w") as f:
        json.dump({"process_index": jax.process_index(), "num_computed": summary.num_computed,
                   "rows": summary.rows}, f)


if __name__ == "__main__":
    main()
