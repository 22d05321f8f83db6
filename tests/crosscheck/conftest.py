"""The comparison collector: every cross-check records its rows here, and the session writes them as JSON.

The JSON goes to the path in ``GPUPRIVACY_COMPARISON_JSON`` if it is set (``make_comparison.py``
sets it and renders ``docs/comparison.md`` from it), else to pytest's temporary directory, so a plain
test run never writes into the repository.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import platform
import sys
from pathlib import Path

import pytest

from tests.crosscheck._pairings import PEERS

ENV_VARIABLE = "GPUPRIVACY_COMPARISON_JSON"


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _clean(value):
    """JSON-safe: floats stay floats (inf/nan as strings), numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


class Collector:
    def __init__(self):
        self.rows: list[dict] = []

    def record(self, **row):
        row["test"] = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        if row.get("library") in _LIBRARY_DISTRIBUTIONS:
            row.setdefault("version", _version(_LIBRARY_DISTRIBUTIONS[row["library"]]))
        self.rows.append(_clean(row))

    def document(self) -> dict:
        return {
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "versions": {name: _version(name) for name in ("gpuprivacy", "jax", "numpy", "scipy", "mpmath") + PEERS},
            "rows": self.rows,
        }


_LIBRARY_DISTRIBUTIONS = {"OpenDP": "opendp", "dp-accounting": "dp-accounting", "autodp": "autodp",
                          "diffprivlib": "diffprivlib"}


@pytest.fixture(scope="session")
def comparison(tmp_path_factory):
    collector = Collector()
    yield collector
    target = os.environ.get(ENV_VARIABLE)
    path = Path(target) if target else tmp_path_factory.getbasetemp() / "comparison.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(collector.document(), indent=1, sort_keys=False) + "\n")
