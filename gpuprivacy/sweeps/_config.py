"""Sweep configs: TOML (or an equivalent dict) -> a list of grid cells.

A config declares a grid::

    name = "rnm-bikes"          # optional; default: the file's stem
    seed = 20240213             # required, 0 <= seed < 2**63
    trials = 1000               # required, int >= 1 or a list of them

    [mechanism]                 # or several [[mechanism]] tables
    name = "report-noisy-max"   # a registered sweep mechanism (or a list)
    noise = ["laplace", "gumbel", "exponential"]
    epsilon = [0.01, 0.1, 1.0]

    [dataset]                   # or several [[dataset]] tables
    name = "bikes-daily"
    d = [90, 365]

A list always means a grid axis; the cells are the Cartesian product of all
lists within a table, and the union over tables of ``mechanism`` x
``dataset`` x ``trials``. Every value is checked before any cell runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pathlib
import tomllib
from typing import Any, Mapping, NamedTuple

from gpuprivacy._checks import check_int
from gpuprivacy._names import did_you_mean
from gpuprivacy.sweeps import _registry

_TOP_LEVEL = ("name", "description", "seed", "trials", "mechanism", "dataset", "metrics", "coverage_radius", "exact")
_MAX_SEED = 2**63 - 1


class SweepConfigError(ValueError):
    """A sweep config is invalid; the message names the key and the fix."""


class SweepCell(NamedTuple):
    """One grid cell, with canonical (checked, defaults filled) parameters."""

    cell_id: str
    seed: int
    mechanism: str
    mechanism_params: dict
    dataset: str
    dataset_params: dict
    num_trials: int
    options: dict = {}  # config-wide options that change the metrics (user metrics, coverage radius)

    def canonical(self) -> dict:
        """The parameters that define the cell; ``cell_id`` hashes exactly these."""
        out = {"seed": self.seed, "mechanism": self.mechanism, "mechanism_params": self.mechanism_params,
               "dataset": self.dataset, "dataset_params": self.dataset_params, "num_trials": self.num_trials}
        if self.options:  # only when set, so configs without options keep their cell ids
            out["options"] = self.options
        return out


class SweepPlan(NamedTuple):
    name: str
    source: str  # for messages: the config path or "<dict config>"
    seed: int
    cells: list


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, floats by repr (shortest round trip): stable across runs."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def config_digest(plan: "SweepPlan") -> str:
    """SHA-256 (hex, 16 characters) of what a config asks for: its name, seed and every cell's id (each id digests
    the cell's mechanism, data and parameters, its trials and the seed). Every row a sweep writes carries it, so
    a results file holds one config's cells only (an edited config into the same file is refused)."""
    payload = {"name": plan.name, "seed": plan.seed, "cells": sorted(cell.cell_id for cell in plan.cells)}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()[:16]


def cell_id_of(canonical: Mapping) -> str:
    """First 64 bits (16 hex digits) of SHA-256 of the canonical JSON of a cell."""
    return hashlib.sha256(canonical_json(canonical).encode("utf-8")).hexdigest()[:16]


def _ordinal(i: int) -> str:
    suffix = "th" if 10 <= i % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"


def load_config(config: str | os.PathLike | Mapping) -> tuple[dict, str, str]:
    """Returns (raw dict, source label for messages, default name)."""
    if isinstance(config, Mapping):
        raw = dict(config)
        return raw, "<dict config>", str(raw.get("name", "sweep"))
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"config must be a path to a TOML file or a dict, got {type(config).__name__}.")
    path = pathlib.Path(config)
    if path.is_dir():
        raise SweepConfigError(f"sweep config {str(path)!r} is a directory. Pass the path of a TOML file in it, "
                               "e.g. experiments/configs/rnm_bikes.toml.")
    if not path.is_file():
        raise FileNotFoundError(f"sweep config {str(path)!r} does not exist. Pass the path of a TOML file, "
                                "e.g. experiments/configs/rnm_bikes.toml.")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SweepConfigError(f"cannot read the sweep config {str(path)!r}: {err.strerror or err}. Check its "
                               "permissions.") from None
    try:
        text = data.decode("utf-8")  # TOML is UTF-8 (https://toml.io/en/v1.0.0#spec)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SweepConfigError(f"{path} is not UTF-8 text: byte {data[err.start:err.start + 1]!r} at offset "
                               f"{err.start} (line {line}) cannot be decoded ({err.reason}). TOML files are UTF-8: "
                               "re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8).") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SweepConfigError(f"{path}: not valid TOML: {err}. See https://toml.io for the syntax.") from None
    return raw, str(path), path.stem


def _as_list(source: str, where: str, key: str, value: Any) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SweepConfigError(f"{source}: key {key!r} of {where} is an empty list, so the grid has no cells. "
                               f"Give at least one value.")
    for item in values:
        if isinstance(item, (dict, list)):
            raise SweepConfigError(f"{source}: key {key!r} of {where} holds {item!r}; values must be scalars "
                                   "or a flat list of scalars (a list is a grid axis).")
    return values


def _tables(source: str, raw: dict, section: str) -> list[tuple[str, dict]]:
    if section not in raw:
        raise SweepConfigError(f"{source}: no [{section}] table. Add one, e.g.\n[{section}]\nname = \"...\"")
    value = raw[section]
    if isinstance(value, dict):
        return [(f"[{section}]", value)]
    if isinstance(value, list) and value and all(isinstance(t, dict) for t in value):
        if len(value) == 1:
            return [(f"[[{section}]]", value[0])]
        return [(f"the {_ordinal(i + 1)} [[{section}]] table", t) for i, t in enumerate(value)]
    if isinstance(value, list) and not value:
        raise SweepConfigError(f"{source}: {section} is an empty list, so the grid has no cells. Add a "
                               f"[{section}] table.")
    raise SweepConfigError(f"{source}: {section} must be a [{section}] table or [[{section}]] tables, got "
                           f"{value!r}.")


def _describe_parameters(parameters: Mapping[str, _registry.SweepParameter]) -> str:
    parts = []
    for pname, spec in parameters.items():
        parts.append(f"{pname} (required)" if spec.default is _registry.REQUIRED
                     else f"{pname} (default {spec.default!r})")
    return ", ".join(parts) if parts else "none"


def _expand_table(source: str, where: str, table: dict, kind: str) -> list[tuple[str, dict]]:
    """[(registered name, canonical params)] for one [mechanism] / [dataset] table."""
    get = _registry.get_mechanism if kind == "mechanism" else _registry.get_dataset
    def known():  # only for messages: listing builds every built-in entry
        return _registry.list_sweep_mechanisms() if kind == "mechanism" else _registry.list_sweep_datasets()
    register = f"gpuprivacy.sweeps.register_sweep_{kind}"
    if "name" not in table:
        raise SweepConfigError(f"{source}: {where} has no 'name' key. Add name = \"<{kind}>\"; known {kind}s: "
                               f"{', '.join(known()) or 'none'}.")
    names = _as_list(source, where, "name", table["name"])
    out = []
    for name in names:
        entry = get(name) if isinstance(name, str) else None
        if entry is None and isinstance(name, str) and get(name.replace("_", "-")) is not None:
            name = name.replace("_", "-")  # the Python name of a mechanism (private_median) is its config name
            entry = get(name)
        if entry is None:
            hint = did_you_mean(name, known())
            raise SweepConfigError(f"{source}: unknown {kind} {name!r} in key 'name' of {where}.{hint} Known "
                                   f"{kind}s: {', '.join(known()) or 'none'} (register new ones with {register}).")
        axes: dict[str, list] = {}
        given = {k: v for k, v in table.items() if k != "name"}
        if entry.parameters is None:
            for key, value in given.items():
                axes[key] = _as_list(source, where, key, value)
        else:
            for key in given:
                if key not in entry.parameters and entry.kind == "release" and not entry.payload.private:
                    raise SweepConfigError(
                        f"{source}: key {key!r} of {where} is not a parameter of {kind} {name!r}: {name} is NOT "
                        "private (it releases the exact statistic, with no noise and no guarantee) and takes no "
                        f"privacy parameter. Give it a [[mechanism]] table of its own without {key!r} (e.g. "
                        f"name = \"{name}\", statistic = \"median\"); it is paired with the private cells of its "
                        f"statistic at every {key}. Its parameters are: {_describe_parameters(entry.parameters)}.")
                if key not in entry.parameters:
                    hint = did_you_mean(key, list(entry.parameters))
                    raise SweepConfigError(
                        f"{source}: key {key!r} of {where} is not a parameter of {kind} {name!r}.{hint} Its "
                        f"parameters are: {_describe_parameters(entry.parameters)}. Remove or rename the key.")
            # Grid axes in the config's key order, then the defaulted parameters.
            order = list(given) + [p for p in entry.parameters if p not in given]
            for pname in order:
                spec = entry.parameters[pname]
                if pname in given:
                    values = _as_list(source, where, pname, given[pname])
                elif spec.default is _registry.UNSET:
                    continue  # the function's own default applies
                elif spec.default is _registry.REQUIRED:
                    example = f" Add e.g. {spec.example}." if spec.example else ""
                    raise SweepConfigError(f"{source}: {where} does not set {pname!r}, which {kind} {name!r} "
                                           f"requires.{example}")
                else:
                    values = [spec.default]
                checked = []
                for i, value in enumerate(values):
                    try:
                        checked.append(spec.check(value))
                    except (ValueError, TypeError) as err:
                        item = f" (item {i + 1} of the list)" if isinstance(given.get(pname), list) else ""
                        example = f" For example: {spec.example}." if spec.example else ""
                        raise SweepConfigError(f"{source}: key {pname!r} of {where} has the invalid value "
                                               f"{value!r}{item}: {err}{example}") from None
                axes[pname] = checked
        for combo in itertools.product(*axes.values()):
            out.append((name, dict(zip(axes.keys(), combo, strict=True))))
    return out


def _check_seed(source: str, raw: dict) -> int:
    if "seed" not in raw:
        raise SweepConfigError(f"{source}: no 'seed' key. Add e.g. seed = 20240213 at the top level, so the "
                               "sweep is reproducible.")
    try:
        return check_int("seed", raw["seed"], minimum=0, maximum=_MAX_SEED)
    except (ValueError, TypeError) as err:
        raise SweepConfigError(f"{source}: key 'seed' has the invalid value {raw['seed']!r}: {err} Use one "
                               "integer in [0, 2**63 - 1], e.g. seed = 20240213.") from None


def _check_trials(source: str, raw: dict) -> list[int]:
    if "trials" not in raw:
        raise SweepConfigError(f"{source}: no 'trials' key. Add e.g. trials = 1000 at the top level.")
    values = _as_list(source, "the top level", "trials", raw["trials"])
    out = []
    for value in values:
        try:
            out.append(check_int("trials", value, minimum=1))
        except (ValueError, TypeError) as err:
            raise SweepConfigError(f"{source}: key 'trials' has the invalid value {value!r}: {err} Set the "
                                   "number of independent runs per cell, e.g. trials = 1000.") from None
    return out


def _check_options(source: str, raw: dict) -> dict:
    from gpuprivacy.sweeps._metrics import list_metrics, user_metric

    options = {}
    if "metrics" in raw:
        names = raw["metrics"] if isinstance(raw["metrics"], list) else [raw["metrics"]]
        for name in names:
            if not isinstance(name, str) or user_metric(name) is None:
                hint = did_you_mean(name, list_metrics())
                raise SweepConfigError(f"{source}: key 'metrics' names {name!r}, which is not a registered metric.{hint} "
                                       f"Registered user metrics: {sorted(set(list_metrics()) - set(_builtin()))} "
                                       "(built-in metrics are always computed; add yours with "
                                       "gpuprivacy.sweeps.register_metric).")
        options["metrics"] = list(names)
    if "coverage_radius" in raw:
        value = raw["coverage_radius"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
            raise SweepConfigError(f"{source}: key 'coverage_radius' has the invalid value {value!r}: it must be a "
                                   "finite number > 0 (coverage = fraction of trials with |error| <= it).")
        options["coverage_radius"] = float(value)
    if "exact" in raw:
        value = raw["exact"]
        if not isinstance(value, bool):
            raise SweepConfigError(f"{source}: key 'exact' has the invalid value {value!r}: it must be true or false "
                                   "(true: also evaluate the mechanisms' exact error quantities, for the "
                                   "expected_abs_error metrics).")
        if value:
            options["exact"] = True
    return options


def _builtin():
    from gpuprivacy.sweeps._metrics import BUILTIN_METRICS
    return BUILTIN_METRICS


def _check_pairing(source: str, mech: str, data: str) -> None:
    mentry, dentry = _registry.get_mechanism(mech), _registry.get_dataset(data)
    if mentry.kind == "cell" and dentry.kind != "fixed":
        raise SweepConfigError(f"{source}: mechanism {mech!r} summarises a fixed query vector per cell and cannot "
                               f"run on dataset {data!r}, which is drawn per trial. Use a fixed dataset (e.g. "
                               "bikes-daily) or a mechanism run per trial (gpuprivacy sweep --list).")


def expand_config(config: str | os.PathLike | Mapping, *, max_trials: int | None = None) -> SweepPlan:
    """Parses and checks a config and expands its grid (nothing is computed).

    ``max_trials`` caps every cell's trials (a smoke run); capped cells are distinct cells.
    """
    raw, source, default_name = load_config(config)
    unknown = [k for k in raw if k not in _TOP_LEVEL]
    if unknown:
        raise SweepConfigError(f"{source}: unknown top-level key(s) {unknown}. Allowed: {list(_TOP_LEVEL)}. "
                               "Mechanism and dataset parameters go inside the [mechanism] / [dataset] tables.")
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise SweepConfigError(f"{source}: key 'name' must be a non-empty string, got {name!r}.")
    seed = _check_seed(source, raw)
    trials = _check_trials(source, raw)
    if max_trials is not None:
        max_trials = check_int("max_trials", max_trials, minimum=1)
        trials = list(dict.fromkeys(min(t, max_trials) for t in trials))
    options = _check_options(source, raw)
    mechanisms = [cell for where, t in _tables(source, raw, "mechanism")
                  for cell in _expand_table(source, where, t, "mechanism")]
    datasets = [cell for where, t in _tables(source, raw, "dataset")
                for cell in _expand_table(source, where, t, "dataset")]
    cells, seen = [], {}
    for (mech, mparams), (data, dparams), num_trials in itertools.product(mechanisms, datasets, trials):
        _check_pairing(source, mech, data)
        canonical = SweepCell("", seed, mech, mparams, data, dparams, num_trials, options).canonical()
        try:
            cell_id = cell_id_of(canonical)
        except (TypeError, ValueError) as err:  # a value JSON cannot hold (e.g. NaN)
            raise SweepConfigError(f"{source}: the cell {canonical!r} cannot be written as JSON ({err}). "
                                   "Use finite numbers, strings and booleans.") from None
        if cell_id in seen:
            raise SweepConfigError(f"{source}: the grid lists the same cell twice: {canonical_json(canonical)}. "
                                   "Remove the repeated value (e.g. 1 and 1.0, or overlapping [[...]] tables).")
        seen[cell_id] = True
        cells.append(SweepCell(cell_id, seed, mech, mparams, data, dparams, num_trials, options))
    return SweepPlan(name=name, source=source, seed=seed, cells=cells)


def expand_sweep(config: str | os.PathLike | Mapping, *, max_trials: int | None = None) -> list[SweepCell]:
    """The cells of a config's grid, checked and in order, without computing anything.

    Raises the same :class:`SweepConfigError` as :func:`gpuprivacy.sweeps.run_sweep`.
    """
    return expand_config(config, max_trials=max_trials).cells
