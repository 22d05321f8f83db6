"""Seed 004 (Lebensold, Precup & Balle 2024): the study's figures, one part or all of them.

A thin client of :mod:`gpuprivacy.reproduce`: without ``--part`` it runs the
registered study ``seed004`` (report, raw numbers, every PNG, metadata) into
``OUT/lebensold2024-gaussian-selection/``, exactly as ``gpuprivacy reproduce lebensold2024-gaussian-selection`` does; with
``--part`` it runs only the named parts into ``OUT/seed004-parts/``, writing
each part's PNGs and ``<part>.json``.

    python experiments/gaussian_selection_figures.py --quick                 # the whole study, < 1 min on 2 cores
    python experiments/gaussian_selection_figures.py                         # full sizes (minutes on a CPU)
    python experiments/gaussian_selection_figures.py --part figure1 --part figures7_8 --quick
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from gpuprivacy.reproduce import reproduce, run_gaussian_selection_part, gaussian_selection_config

PARTS = tuple(gaussian_selection_config(quick=True)["parts"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", action="append", choices=PARTS, help="run only this part (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small grids, trials and runs (smoke test)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/reproduce"), help="output folder")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if not args.part:
        (folder,) = reproduce("lebensold2024-gaussian-selection", quick=args.quick, out_dir=args.out, progress=not args.no_progress)
        print(f"wrote {folder} (report: {folder / 'report.md'})")
        return 0
    folder = args.out / "seed004-parts"
    config = gaussian_selection_config(quick=args.quick)
    for part in args.part:
        result = run_gaussian_selection_part(part, folder, config=config, progress=not args.no_progress)
        (folder / f"{part}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        ok = sum(row["status"] == "ok" for row in result["comparisons"])
        print(f"{part}: {result['wall_s']:.1f} s, {ok}/{len(result['comparisons'])} reference values agree with "
              f"spec 004, figures: {', '.join(result['figures'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
