"""How the package reads to a newcomer: module counts, imports between them, cycles, long files.

    python experiments/layout_metrics.py            # this checkout
    python experiments/layout_metrics.py --json     # one JSON object on stdout
    python experiments/layout_metrics.py --root DIR # another checkout (e.g. a `git worktree` of an older commit)

Imports are read with ``ast`` (nothing is imported), function-local imports
included. "Units" of ``gpuprivacy/mechanisms`` are what a newcomer sees when
opening the folder: its top-level modules and subpackages (a subpackage
counts once); "imports between units" counts distinct (importing file,
imported unit) pairs whose units differ, and "unit-to-unit arrows" the
distinct (unit, unit) pairs (the arrows of the folder's picture).
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
import sys


def module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: pathlib.Path, name: str, is_package: bool, modules) -> set[str]:
    """The gpuprivacy modules that ``path`` imports (``from X import Y`` means X.Y when that is a module)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                out.add(full if full in modules else mod)
    return {m for m in out if m.startswith("gpuprivacy")}


def collect(root: pathlib.Path):
    modules = {}
    for path in sorted((root / "gpuprivacy").rglob("*.py")):
        modules[module_name(root, path)] = path
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imp in imports_of(path, name, path.name == "__init__.py", modules):
            while imp and imp not in modules:
                imp = imp.rpartition(".")[0]
            if imp and imp != name:
                targets.add(imp)
        graph[name] = targets
    return modules, graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), ignoring package faces.

    A package ``__init__`` that only re-exports its own private modules is a
    face, not a participant: edges into a package from its own submodules are
    the usual ``from gpuprivacy.x import y`` of a sibling and are kept.
    """
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def unit_of(name: str, package: str) -> str | None:
    if not name.startswith(package + "."):
        return None
    return name[len(package) + 1:].split(".")[0]


def metrics(root: pathlib.Path) -> dict:
    modules, graph = collect(root)
    package = "gpuprivacy.mechanisms"
    units = {unit_of(m, package) for m in modules if unit_of(m, package)}
    pairs, unit_pairs = set(), set()
    for src, targets in graph.items():
        su = unit_of(src, package) or ("__init__" if src == package else None)
        if su is None:
            continue
        for t in targets:
            tu = unit_of(t, package)
            if tu and tu != su:
                pairs.add((src, tu))
                unit_pairs.add((su, tu))
    files = {m: len(p.read_text().splitlines()) for m, p in modules.items()}
    mech_files = [m for m in modules if m == package or m.startswith(package + ".")]
    return {
        "mechanisms_units": len(units),
        "mechanisms_files": len(mech_files) - 1,  # minus the package face
        "mechanisms_imports_between_units": len(pairs),
        "mechanisms_unit_to_unit_arrows": len(unit_pairs),
        "import_cycles": cycles(graph),
        "files_over_500_lines": {m: n for m, n in sorted(files.items()) if n > 500},
        "library_modules": len(modules),
        "library_lines": sum(files.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = metrics(pathlib.Path(args.root))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        print(f"{key:36s} {value}")


if __name__ == "__main__":
    main()
