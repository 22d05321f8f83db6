"""Command line interface: ``gpuprivacy info|estimate|sweep|reproduce``.

The CLI parses arguments and calls public functions, nothing more (STYLE
rule 25). Errors in the input go to stderr with a non-zero exit code (2);
``--json`` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

from gpuprivacy.cli._estimate_common import ANY_ORACLE
from gpuprivacy.cli._types import finite_float, positive_int, seed_argument
from gpuprivacy.cli._interrupt import exit_on_interrupt

EXIT_BAD_INPUT = 2


class CliError(Exception):
    """A user error reported on stderr without a traceback."""


def _delta(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--delta must be a number, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"--delta must lie in (0, 1), got {text!r}; e.g. --delta 1e-6")
    return value


# Mechanisms that take any oracle (the others release a named statistic from closed-form local bounds).


def _oracle_spec(text):
    """``FILE.py:NAME`` -> (path, name); the file is read as text and traced only in the sandbox."""
    path, sep, name = text.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"--oracle must be FILE.py:NAME (the file and the function's name), got "
                                         f"{text!r}.")
    return path, name


def _param(text):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param takes NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    try:
        parsed = int(value)
    except ValueError:
        try:
            parsed = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--param {name} must be a number, got {value!r}") from None
    return name.strip(), parsed


def build_parser() -> argparse.ArgumentParser:
    from gpuprivacy.cli._estimators import ESTIMATORS
    from gpuprivacy.oracle import ORACLES

    parser = argparse.ArgumentParser(prog="gpuprivacy", description="Differential privacy over black-box "
                                     "functions, batched on accelerators.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser("info", help="devices, versions and float64 status")
    info.add_argument("--json", action="store_true", help="print one JSON object")

    est = sub.add_parser("estimate", help="release one statistic of a CSV column")
    est.add_argument("--data", required=True, type=Path, help="CSV file with a header row")
    est.add_argument("--column", required=True,
                     help="column name (CSV, Parquet), array key (.npz) or column index (.npy; - for a 1-d array)")
    what = est.add_mutually_exclusive_group(required=True)
    what.add_argument("--statistic", choices=sorted(ORACLES), help="library oracle")
    what.add_argument("--oracle", type=_oracle_spec, metavar="FILE.py:NAME",
                      help="an analyst's (untrusted) oracle f(rows, valid) in FILE.py; it is traced only in the "
                           "sandbox process, never imported here (sens-o-matic, blackbox-estimate; laplace-mechanism "
                           "and gaussian-mechanism with --clamp LO HI)")
    est.add_argument("--param", action="append", type=_param, default=[], metavar="NAME=VALUE",
                     help="statistic parameter, e.g. --param q=0.9 (repeatable)")
    from gpuprivacy.cli._estimators import canonical_estimator

    est.add_argument("--mechanism", required=True, choices=sorted(ESTIMATORS), type=canonical_estimator,
                     help="; ".join(f"{e.name}: {e.help}" for e in ESTIMATORS.values()))
    est.add_argument("--epsilon", required=True, type=finite_float("--epsilon", positive=True))
    est.add_argument("--delta", type=_delta)
    est.add_argument("--sensitivity", type=finite_float("--sensitivity", positive=True))
    est.add_argument("--secure", action="store_true",
                     help="floating-point-safe noise on a 2^-k grid (" + ", ".join(sorted(
                         name for name, e in ESTIMATORS.items() if "secure" in e.options)) + "; see docs/secure.md)")
    est.add_argument("--seed", type=seed_argument,
                     help="PRNG seed, 0 <= seed < 2**63 (default: fresh OS entropy, printed in --json)")
    est.add_argument("--json", action="store_true", help="print one JSON object")
    # Options several estimators share, defined once (each estimator says what they mean for it).
    shared = est.add_argument_group("public range and accuracy (mechanisms that need them)")
    shared.add_argument("--lower", type=finite_float("--lower"),
                        help="public lower end: of the output grid (sens-o-matic, blackbox-estimate) "
                        "or of the data domain (piecewise-laplace, inverse-sensitivity)")
    shared.add_argument("--upper", type=finite_float("--upper"), help="public upper end (see --lower)")
    shared.add_argument("--beta", type=float, help="accuracy failure probability (sens-o-matic, blackbox-estimate; "
                        "default 0.05)")
    users: dict = {}  # an estimator family may share one add_arguments (e.g. piecewise-laplace, inverse-sensitivity)
    for estimator in ESTIMATORS.values():
        if estimator.add_arguments is not None:
            users.setdefault(estimator.add_arguments, []).append(estimator.name)
    for add_arguments, names in users.items():
        add_arguments(est.add_argument_group("--mechanism " + " / ".join(names)))
    # Every option's default, so that an option a mechanism does not use is refused rather than echoed.
    est.set_defaults(option_defaults={a.dest: a.default for a in est._actions if a.option_strings})

    sweep = sub.add_parser("sweep", help="run a declarative TOML grid (mechanisms x data x parameters x trials), "
                                          "resumably")
    sweep.add_argument("config", type=Path, nargs="?", help="the TOML config (see docs/studies.md)")
    sweep.add_argument("--results", type=Path, help="JSON-lines results file (default results/<config>.jsonl)")
    sweep.add_argument("--list", action="store_true",
                       help="list every sweepable mechanism, dataset and metric with its parameters, and exit")
    sweep.add_argument("--max-trials", type=int, metavar="N", help="cap the trials of every cell (a smoke run)")
    sweep.add_argument("--chunk", type=positive_int("--chunk"), metavar="T",
                       help="trials per batched call, >= 1 (default: by a byte budget)")
    sweep.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import a module or a .py file first (it may register mechanisms, datasets, metrics); "
                            "repeatable")
    sweep.add_argument("--plan", action="store_true",
                       help="a dry run: list the cells still to run, the programs to compile and an estimate, "
                            "and exit (nothing is computed or written)")
    sweep.add_argument("--no-progress", action="store_true")
    sweep.add_argument("--json", action="store_true", help="print a JSON summary")

    study = sub.add_parser("study", help="look at sweep results: plots and a Markdown table")
    study_sub = study.add_subparsers(dest="study_command", required=True)
    report = study_sub.add_parser("report", help="plots (a metric vs a swept axis, per mechanism, with 95%% "
                                                 "error bars) and a Markdown table, from a results file alone")
    report.add_argument("results", type=Path, help="the sweep's JSON-lines results file")
    report.add_argument("--x", help="the swept axis on the horizontal axis (default: the dataset's n if it varies)")
    report.add_argument("--metric", default=None, help="the metric to plot (default: mae, or selection_accuracy)")
    report.add_argument("--out", type=Path, help="output folder (default: <results stem>_report next to it)")
    report.add_argument("--facet", metavar="AXES",
                        help="comma-separated axes that get a panel per combination, e.g. dataset,epsilon "
                             "(default: dataset if it varies; '' for one panel); the other varying axes are "
                             "told apart by line style")
    report.add_argument("--reference", metavar="MECHANISM",
                        help="the mechanism the paired differences compare every other with (default: "
                             "nonprivate if the sweep has it, else the most accurate of each group)")
    report.add_argument("--json", action="store_true", help="print a JSON summary")
    study.set_defaults(handler=cmd_study)

    rep = sub.add_parser("reproduce", help="run a bundled study and write a report folder")
    rep.add_argument("name", nargs="*", default=["all"], help="study names (or aliases), or 'all' (the default; "
                     "see --list)")
    rep.add_argument("--quick", action="store_true", help="small version for smoke tests (< 1 min each)")
    rep.add_argument("--out", type=Path, default=Path("results/reproduce"), help="output folder")
    rep.add_argument("--list", action="store_true", help="list the studies and exit")
    rep.add_argument("--no-progress", action="store_true")
    rep.add_argument("--jobs", type=positive_int("--jobs"), default=None, metavar="N",
                     help="studies run at once, each in a process of its own (default: one per CPU core on a "
                          "CPU-only host, 1 with an accelerator; 1: one after the other)")
    rep.add_argument("--json", action="store_true", help="print a JSON summary")
    for extension in _EXTENSIONS:
        extension(sub)
    return parser


# Later issues add subcommands (bound, audit, ...) here: fn(subparsers) registering a parser whose
# ``handler`` default is set with parser.set_defaults(handler=...).
_EXTENSIONS: list = []


def register_subcommand(add_parser) -> None:
    _EXTENSIONS.append(add_parser)


def _register_builtin_subcommands() -> None:
    from gpuprivacy.cli._audit import add_audit_parser

    register_subcommand(add_audit_parser)
    from gpuprivacy.cli._bound import add_bound_parser
    register_subcommand(add_bound_parser)
    from gpuprivacy.cli._doctor import add_doctor_parser
    register_subcommand(add_doctor_parser)


_register_builtin_subcommands()


def _emit(args, payload: dict, text: str) -> None:
    if getattr(args, "json", False):
        json.dump(payload, sys.stdout, default=_json_default)
        sys.stdout.write("\n")
    else:
        print(text)


def _json_default(value):
    if isinstance(value, Path):
        return str(value)
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {value!r}")


def cmd_info(args) -> None:
    import jax
    import jaxlib
    import mpmath
    import numpy
    import optax

    from gpuprivacy._version import __version__

    devices = [{"id": d.id, "platform": d.platform, "kind": getattr(d, "device_kind", "")} for d in jax.devices()]
    payload = {"gpuprivacy": __version__, "python": platform.python_version(), "jax": jax.__version__,
               "jaxlib": jaxlib.__version__, "numpy": numpy.__version__, "mpmath": mpmath.__version__,
               "optax": optax.__version__, "x64_enabled": bool(jax.config.read("jax_enable_x64")),
               "default_backend": jax.default_backend(), "process_count": jax.process_count(),
               "devices": devices}
    lines = [f"gpuprivacy {payload['gpuprivacy']}  (python {payload['python']})",
             f"jax {payload['jax']}  jaxlib {payload['jaxlib']}  numpy {payload['numpy']}  "
             f"mpmath {payload['mpmath']}  optax {payload['optax']}",
             f"float64 (jax_enable_x64): {'on' if payload['x64_enabled'] else 'OFF'}",
             f"backend: {payload['default_backend']}  processes: {payload['process_count']}",
             "devices: " + ", ".join(f"{d['platform']}:{d['id']} {d['kind']}".strip() for d in devices)]
    _emit(args, payload, "\n".join(lines))


def read_csv_column(path: Path, column: str):
    """The ``--data``/``--column`` values: one loader for the CLI and the API (CSV, .npy/.npz, Parquet).

    The command line gives every column as text: for a ``.npy`` file it is a column index (``-`` for a 1-d
    array); elsewhere a column name or an ``.npz`` key.
    """
    from gpuprivacy.datasets import load_column

    if Path(path).suffix.lower() == ".npy":
        if column.strip() == "-":
            column = None
        else:
            try:
                column = int(column)
            except ValueError:
                raise ValueError(f"--column for a .npy file is a column index (or - for a 1-d array), got "
                                 f"--column {column!r}.") from None
    return load_column(path, column)


# Options every estimator reads (the data, the statistic, the budget, the output).
_COMMON_OPTIONS = frozenset({"data", "column", "statistic", "oracle", "param", "mechanism", "epsilon", "seed", "json",
                             "help"})


def _refuse_unused_options(args, estimator) -> None:
    """An option the chosen mechanism does not read is an error, never silently echoed or ignored."""
    unused = []
    for dest, default in args.option_defaults.items():
        if dest in _COMMON_OPTIONS or dest in estimator.options:
            continue
        if getattr(args, dest, default) != default:
            unused.append("--" + dest.replace("_", "-"))
    if not unused:
        return
    from gpuprivacy.cli._estimators import ESTIMATORS

    takes = ", ".join("--" + o.replace("_", "-") for o in sorted(estimator.options)) or "no options of its own"
    message = (f"--mechanism {estimator.name} does not use {', '.join(unused)}; it takes {takes}. Remove the "
               "option (gpuprivacy never ignores one silently).")
    if "--secure" in unused:
        secure = sorted(name for name, e in ESTIMATORS.items() if "secure" in e.options)
        message += (f" A secure (floating-point-safe) release path exists for: {', '.join(secure)}; docs/secure.md "
                    "says what it protects against and why the other mechanisms have none.")
    raise ValueError(message)


def cmd_estimate(args) -> None:
    from gpuprivacy.cli._estimators import ESTIMATORS, make_key
    from gpuprivacy.oracle import oracle_by_name

    _refuse_unused_options(args, ESTIMATORS[args.mechanism])
    lower, upper = getattr(args, "lower", None), getattr(args, "upper", None)
    if lower is not None and upper is not None and not lower < upper:
        raise ValueError(f"--lower must be below --upper (the public range [lower, upper]), got --lower {lower} "
                         f"--upper {upper}.")
    data = read_csv_column(args.data, args.column)
    if args.oracle is not None:
        if args.mechanism not in ANY_ORACLE:
            raise ValueError(f"--mechanism {args.mechanism} releases a named statistic from its closed-form local "
                             f"bounds; pass --statistic. An analyst's --oracle works with "
                             f"{', '.join(sorted(ANY_ORACLE))} (laplace-mechanism and gaussian-mechanism with --clamp LO HI).")
        if args.param:
            raise ValueError("--param sets a library statistic's parameters; an --oracle file takes none.")
        from gpuprivacy.oracle import untrusted

        oracle_fn = untrusted(*args.oracle)
    else:
        oracle_fn = oracle_by_name(args.statistic, **dict(args.param))
    key, seed = make_key(args.seed)
    result = ESTIMATORS[args.mechanism].run(key, data, oracle_fn, args)
    statistic = args.statistic if args.oracle is None else f"{args.oracle[0]}:{args.oracle[1]}"
    payload = {"mechanism": args.mechanism, "statistic": statistic, "params": dict(args.param),
               "column": args.column, "epsilon": args.epsilon, "delta": args.delta,
               "seed": seed, **result}
    text = (f"{statistic}({args.column}) released by {args.mechanism}: {result['value']!r}\n"
            f"guarantee: {result['guarantee']}  seed: {seed}")
    if "clamp" in result:
        lower, upper = result["clamp"]
        text += f"\nthe oracle's value was clamped to [{lower!r}, {upper!r}] before noise (sensitivity " \
                f"{result['sensitivity']!r})"
    _emit(args, payload, text)


def _import_extensions(imports) -> None:
    import importlib
    import importlib.util

    for name in imports:
        if name.endswith(".py"):
            path = Path(name)
            if not path.is_file():
                raise CliError(f"--import {name}: no such file. Pass a .py file or an importable module name.")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as err:  # noqa: BLE001  (the user's plugin: any error is theirs to fix)
                raise CliError(f"--import {name}: the file failed while it was imported: {_plugin_error(err)} "
                               "Fix the plugin (run `python " + name + "` to see the full traceback).") from None
        else:
            try:
                importlib.import_module(name)
            except ImportError as err:
                raise CliError(f"--import {name}: cannot import it ({err}). Pass an importable module name or "
                               "the path of a .py file.") from None
            except Exception as err:  # noqa: BLE001
                raise CliError(f"--import {name}: the module failed while it was imported: {_plugin_error(err)} "
                               f"Fix it (run `python -c 'import {name}'` to see the full traceback).") from None


def _plugin_error(err: Exception) -> str:
    if isinstance(err, SyntaxError):
        return f"SyntaxError: {err.msg} ({err.filename}, line {err.lineno})."
    return f"{type(err).__name__}: {err}."


def cmd_sweep(args) -> None:
    import warnings

    from gpuprivacy.sweeps import SweepMemoryWarning, describe_sweepables, run_sweep

    _import_extensions(args.imports)
    if args.list:
        listing = describe_sweepables()
        lines = []
        for section in ("mechanisms", "datasets", "metrics"):
            lines.append(f"{section}:")
            for name, item in listing[section].items():
                params = ", ".join(f"{p}={d}" for p, d in item.get("parameters", {}).items())
                lines.append(f"  {name}({params})  {item['description']}" if params
                             else f"  {name}  {item['description']}")
        if listing["not_sweepable"]:
            lines.append("not sweepable yet:")
            lines.extend(f"  {name}: {why}" for name, why in listing["not_sweepable"].items())
        _emit(args, listing, "\n".join(lines))
        return
    if args.config is None:
        raise CliError("give a config file (gpuprivacy sweep CONFIG.toml), or --list to see what can be swept.")
    if args.max_trials is not None and args.max_trials < 1:
        raise CliError(f"--max-trials must be >= 1, got {args.max_trials}.")
    if args.plan:
        _print_plan(args)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SweepMemoryWarning)
        summary = run_sweep(args.config, results_path=args.results, progress=not args.no_progress,
                            max_trials=args.max_trials, chunk=args.chunk)
    for warning in caught:  # cells that ran out of memory: one paragraph (no source line), the rest as they were
        if issubclass(warning.category, SweepMemoryWarning):
            print(f"gpuprivacy sweep: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    payload = summary._asdict() if hasattr(summary, "_asdict") else dict(summary.__dict__)
    # The summary only: the rows stay in the results file (a study's rows are megabytes of JSON).
    payload = {"num_rows": len(payload.pop("rows")), **payload}
    _emit(args, payload, "\n".join(f"{k}: {v}" for k, v in payload.items()))
    for row in summary.rows:
        if row.get("status") == "infeasible":  # reported, not hidden: the sweep went on without these cells
            print(f"infeasible cell {row['cell_id']} ({row['mechanism']}, {row['dataset']} "
                  f"{row['dataset_params']}): {row['error']}", file=sys.stderr)


def _print_plan(args) -> None:
    from gpuprivacy.sweeps import dry_run

    plan = dry_run(args.config, results_path=args.results, max_trials=args.max_trials, chunk=args.chunk)
    payload = {**plan._asdict(), "results_path": str(plan.results_path)}
    lines = [f"sweep {plan.name}: {plan.num_cells} cells, {plan.num_done} already in {plan.results_path}, "
             f"{plan.num_to_run} to run ({plan.num_trials:,} trials)",
             f"programs to compile: {plan.num_programs} (roughly {plan.estimated_compile_s:.0f} s on a cold "
             "compilation cache; none on a rerun, which reads them back)"]
    for block in plan.blocks:
        params = ", ".join(f"{k}={v}" for k, v in block["dataset_params"].items())
        lines.append(f"  {block['dataset']}({params}), {block['trials']} trials: {len(block['cells'])} cells, "
                     f"{block['programs']} new programs" + (f"  INFEASIBLE: {block['infeasible']}"
                                                            if "infeasible" in block else ""))
        lines.extend(f"    {cell}" for cell in block["cells"])
    _emit(args, payload, "\n".join(lines))


def cmd_study(args) -> None:
    from gpuprivacy.sweeps import study_report

    facet = None if args.facet is None else tuple(k.strip() for k in args.facet.split(",") if k.strip())
    written = study_report(args.results, x=args.x, metric=args.metric, out_dir=args.out, facet=facet,
                           reference=args.reference)
    _emit(args, {k: [str(p) for p in v] if isinstance(v, list) else str(v) for k, v in written.items()},
          "\n".join(f"wrote {p}" for p in written["files"]))


def cmd_reproduce(args) -> None:
    from gpuprivacy.reproduce import list_studies, reproduce

    if args.list:
        studies = list_studies()
        _emit(args, {"studies": studies}, "\n".join(f"{s}" for s in studies))
        return
    names = "all" if args.name in (["all"], []) else args.name
    if "all" in args.name and names != "all":
        raise CliError(f"pass 'all' alone or study names, got {' '.join(args.name)!r}. For example: "
                       "gpuprivacy reproduce all --quick")
    folders = reproduce(names, quick=args.quick, out_dir=args.out, progress=not args.no_progress, jobs=args.jobs)
    _emit(args, {"name": names if isinstance(names, str) else list(names), "quick": args.quick,
                 "folders": [str(f) for f in folders]},
          "\n".join(f"wrote {f}" for f in folders))


HANDLERS = {"info": cmd_info, "estimate": cmd_estimate, "sweep": cmd_sweep, "reproduce": cmd_reproduce}


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None) or HANDLERS[args.command]
    from gpuprivacy.cli._compilation_cache import enable_compilation_cache

    enable_compilation_cache()  # a rerun reads its programs back (gpuprivacy/cli/_compilation_cache.py)
    try:
        with exit_on_interrupt(args.command):  # before any computation starts JAX's threads
            handler(args)
    except (CliError, ValueError, TypeError, OSError, KeyError) as err:
        if isinstance(err, OSError) and not isinstance(err, FileNotFoundError) and err.filename is None:
            raise  # not a path the user gave (a failing device or worker): keep the traceback for the report
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        if isinstance(err, OSError) and err.filename is not None and err.strerror:
            # A path the command cannot use that no check above named (a folder that is read-only, say).
            message = f"cannot use {str(err.filename)!r}: {err.strerror}. Check the path and its permissions."
        print(f"gpuprivacy {args.command}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
