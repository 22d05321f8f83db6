"""``gpuprivacy reproduce all --quick`` on an empty compilation cache: the studies side by side (``--jobs``,
default one per core) against one after the other (``--jobs 1``), in the same run.

Each side runs the command line in a fresh process with a new, empty persistent compilation cache and a new
output folder, so both compile every program (what the README's main command does on a fresh machine).
Prints both wall times and CPU times, the ratio, each study's seconds and the load; checks that both sides
wrote the same numbers (every JSON, JSON-lines and CSV file, timings and provenance left out).

    python experiments/bench_reproduce.py            # all studies, quick mode (about 4 minutes on 2 cores)
    python experiments/bench_reproduce.py --jobs 2 --studies rnm-bikes steinke2025-blackbox-estimation
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import load_average  # noqa: E402

# Keys (and CSV columns) that hold timings or provenance, not results.
_NOT_RESULTS = re.compile(r"wall|_s$|seconds|timestamp|_utc$|^digest$|git_dirty|compiled|loaded|programs|per_s$")


def _results(value):
    if isinstance(value, dict):
        return {k: _results(v) for k, v in value.items() if not _NOT_RESULTS.search(k)}
    if isinstance(value, list):
        return [_results(v) for v in value]
    return value


def _numbers(folder: pathlib.Path) -> dict:
    """Every result file of a reproduce folder, timings and provenance left out."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.suffix == ".json":
            out[rel] = _results(json.loads(path.read_text()))
        elif path.suffix == ".jsonl":
            out[rel] = [_results(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
        elif path.suffix == ".csv":
            with path.open(newline="") as f:
                out[rel] = [_results(row) for row in csv.DictReader(f)]
    return out


def _run(studies: list[str], jobs: int | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out, cache = pathlib.Path(tmp) / "out", pathlib.Path(tmp) / "xla"
        command = ["gpuprivacy", "reproduce", *studies, "--quick", "--out", str(out), "--no-progress"]
        command += [] if jobs is None else ["--jobs", str(jobs)]
        env = {**os.environ, "GPUPRIVACY_COMPILATION_CACHE": str(cache)}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        per_study = {p.parent.name: round(json.loads(p.read_text())["wall_s"], 1)
                     for p in sorted(out.glob("*/metadata.json"))}
        return {"wall_s": round(wall, 1), "cpu_s": round(after.ru_utime + after.ru_stime
                                                          - before.ru_utime - before.ru_stime, 1),
                "studies_s": per_study, "numbers": _numbers(out)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", nargs="+", default=["all"])
    parser.add_argument("--jobs", type=int, default=None, help="the side-by-side side (default: one per core)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_before = load_average()
    ours = _run(args.studies, args.jobs)
    load_middle = load_average()
    baseline = _run(args.studies, 1)
    same = ours.pop("numbers") == baseline.pop("numbers")
    result = {"benchmark": "reproduce", "studies": args.studies, "jobs": args.jobs or "default (one per core)",
              "ours": ours, "one_after_the_other": baseline,
              "ratio": round(baseline["wall_s"] / ours["wall_s"], 2), "same_numbers": same,
              "machine": f"{platform.machine()} {os.cpu_count()} cores", "load_before": load_before,
              "load_between": load_middle, "load_after": load_average(),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"reproduce {' '.join(args.studies)} --quick, empty compilation cache, {result['machine']}:")
        print(f"  side by side (--jobs {args.jobs or 'default'})  {ours['wall_s']:7.1f} s wall, {ours['cpu_s']} s CPU")
        print(f"  one after the other (--jobs 1)  {baseline['wall_s']:7.1f} s wall, {baseline['cpu_s']} s CPU")
        print(f"  ratio {result['ratio']}x   same numbers: {same}   load {load_before} -> {load_middle} -> "
              f"{result['load_after']}")
        print(f"  per study, side by side: {ours['studies_s']}")
        print(f"  per study, one after the other: {baseline['studies_s']}")
    if not same:
        sys.exit("the two runs wrote different numbers")
    return result


if __name__ == "__main__":
    main()
