"""The package's layering, checked statically (``ast``, nothing imported).

Every ``import`` / ``from ... import`` under ``gpuprivacy/`` counts, function-local ones
included (a local import that hides a cycle is still a cycle):

1. layers (``LAYERS``): a module imports only from its own top-level subpackage or from a lower
   layer (the layer-0 helper modules may import each other; the cycle check still applies);
2. no import cycles between modules;
3. no module imports a private module (``_name``) of another top-level subpackage: cross-package
   use goes through the owning package's public face. The shared top-level helpers
   (``gpuprivacy._checks`` etc., layer 0) are allowed everywhere;
4. no module is longer than ``MAX_MODULE_LINES``: a longer one holds more than one concept, and is split
   by concept (one file per algorithm), not by line count.
"""

from __future__ import annotations

import ast
import functools
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gpuprivacy"

LAYERS: tuple[tuple[str, ...], ...] = (
    # 0: shared private helpers
    ("_config", "_typing", "_checks", "_compat", "_rounding", "_progress", "_version", "_search", "_sort", "_numpy_ffi",
     "_memory",
     "_plots", "_lru", "_names", "_chunked_vmap", "_threefry"),
    ("accounting", "noise", "subsets", "datasets"),  # 1: primitives
    ("oracle", "designs"),  # 2: oracle access and query designs (on subsets)
    ("mechanisms",),  # 3
    ("audit", "sweeps"),  # 4
    ("reproduce",),  # 5
    ("cli",),  # 6
    ("__main__",),  # 7: ``python -m gpuprivacy``
)
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}
SHARED = set(LAYERS[0])
TOP = len(LAYERS)  # gpuprivacy/__init__.py: the package's face, above everything


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = ("gpuprivacy",) + path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        out[name] = (path, is_package)
    return out


MODULES = _modules()


def _targets(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The gpuprivacy modules ``node`` imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
                 for alias in node.names]
    out = []
    for name in names:
        if name.split(".")[0] != "gpuprivacy":
            continue
        while name not in MODULES and "." in name:  # `import gpuprivacy.x.attr` -> the module part
            name = name.rsplit(".", 1)[0]
        out.append(name)
    return out


@functools.cache  # parsed when a test first asks, not while pytest collects (1.2 s in every worker)
def _edges() -> list[tuple[str, str, str]]:
    """(importer, imported, "path:line") for every gpuprivacy import, local ones included."""
    edges = []
    for module, (path, is_package) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, is_package, node):
                    if target != module:
                        edges.append((module, target, f"{path.relative_to(ROOT.parent)}:{node.lineno}"))
    return edges



def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _level(module: str) -> int:
    top = _top(module)
    return TOP if top is None else LEVEL[top]


MAX_MODULE_LINES = 500


def test_no_module_is_longer_than_500_lines():
    long = {name: n for name, (path, _) in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, (f"modules over {MAX_MODULE_LINES} lines (split each by concept, one file per algorithm): "
                      f"{long}")


def test_every_top_level_module_has_a_layer():
    tops = {_top(m) for m in MODULES} - {None}
    assert tops <= set(LEVEL), f"add these to LAYERS in tests/test_layering.py: {sorted(tops - set(LEVEL))}"


def test_no_upward_imports():
    bad = [f"{where}: {src} (layer {_level(src)}) imports {dst} (layer {_level(dst)})"
           for src, dst, where in _edges()
           if _top(src) != _top(dst) and _level(dst) >= _level(src)
           and not (_top(src) in SHARED and _top(dst) in SHARED)]  # layer-0 helpers may share (no cycles)
    assert not bad, "imports must point to the same package or a lower layer:\n" + "\n".join(bad)


def _is_private_module(module: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in module.split(".")[2:])


def test_no_cross_package_private_imports():
    bad = [f"{where}: {src} imports private {dst}" for src, dst, where in _edges()
           if _top(src) is not None and _top(dst) not in SHARED and _top(dst) != _top(src)
           and _is_private_module(dst)]
    assert not bad, ("import another package's public face (its __init__), not its private modules:\n"
                     + "\n".join(bad))


def test_no_import_cycles():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for src, dst, _ in _edges():
        # a package's __init__ re-exporting its own submodules is not a cycle with them
        if not dst.startswith(src + "."):
            graph[src].add(dst)
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(graph, white)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = grey
        stack.append(node)
        for nxt in sorted(graph[node]):
            if colour[nxt] == grey:
                return stack[stack.index(nxt):] + [nxt]
            if colour[nxt] == white and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        colour[node] = black
        return None

    for start in sorted(graph):
        if colour[start] == white and (cycle := visit(start)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def test_the_checker_sees_local_and_relative_imports():
    """Self-test of the parser on a known edge."""
    assert any(src == "gpuprivacy.__main__" and dst.startswith("gpuprivacy.cli") for src, dst, _ in _edges())
