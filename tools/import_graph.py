"""The package's import graph as Python reads it: every ``import`` of ``agentbench_async`` in every module, those at
module level, those inside functions and those under ``TYPE_CHECKING``, and the circles among modules.

    python tools/import_graph.py            # counts and circles
    python tools/import_graph.py --inner    # and every function-level import of the package, by module and line

``lint-imports`` (the contracts in pyproject.toml, run by .ci/run) is what CI checks; this script prints the numbers
docs/development.md speaks of: how many imports hide inside functions (each one a place a circle could hide) and
whether any circle exists once they are counted. It reads the source only (``ast``); nothing is imported.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = "agentbench_async"
SRC = Path(__file__).resolve().parent.parent / "src"


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]) -> list[str]:
    """The package's modules an import statement imports (``from . import x`` names module ``x`` when there is one)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix for alias in node.names]
    out = []
    for name in names:
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        out.append(name)
    return out


def import_graph(src: Path = SRC) -> tuple[set[str], dict[str, dict[str, set[str]]], list[tuple[str, int]]]:
    """(modules, kind -> importer -> imported, the function-level import sites) with kind ``module``, ``function`` or
    ``type_checking``. An import of ``a.b.c`` also imports the packages ``a.b`` and ``a`` (Python runs their
    ``__init__`` first), as the circles count it."""
    paths = {_module_name(p, src): p for p in (src / PACKAGE).rglob("*.py") if "template" not in p.parts}
    modules = set(paths)
    graph: dict[str, dict[str, set[str]]] = {k: defaultdict(set) for k in ("module", "function", "type_checking")}
    sites: list[tuple[str, int]] = []

    def walk(node: ast.AST, module: str, is_package: bool, in_function: bool, in_type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            function = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            type_checking = in_type_checking or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                targets = _targets(child, module, is_package, modules)
                kind = "function" if in_function else "type_checking" if in_type_checking else "module"
                if targets and in_function:
                    sites.append((module, child.lineno))
                for target in targets:
                    parts = target.split(".")
                    for i in range(2, len(parts) + 1):
                        parent = ".".join(parts[:i])
                        if parent != module and not module.startswith(parent + "."):
                            graph[kind][module].add(parent)
            walk(child, module, is_package, function, type_checking)

    for module, path in paths.items():
        walk(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py", False, False)
    return modules, graph, sites


def circles(modules: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inner", action="store_true", help="list every function-level import of the package")
    parser.add_argument("--src", type=Path, default=SRC, help="the folder holding the package (default: this checkout's src)")
    args = parser.parse_args()
    modules, graph, sites = import_graph(args.src)
    every: dict[str, set[str]] = defaultdict(set)
    for kind in graph.values():
        for importer, imported in kind.items():
            every[importer] |= imported
    at_module_level = circles(modules, graph["module"])
    counted = circles(modules, every)
    by_module: dict[str, int] = defaultdict(int)
    for module, _ in sites:
        by_module[module] += 1
    print(f"modules: {len(modules)}")
    print(f"function-level imports of the package: {len(sites)} "
          f"({', '.join(f'{m.removeprefix(PACKAGE + chr(46))} {n}' for m, n in sorted(by_module.items(), key=lambda x: -x[1]))})")
    print(f"circles among module-level imports: {len(at_module_level)}")
    print(f"circles counting function-level and TYPE_CHECKING imports too: {len(counted)}")
    for component in counted:
        print("  " + " <-> ".join(component))
    if args.inner:
        for module, line in sites:
            print(f"  {module}:{line}")
    return 1 if counted else 0


if __name__ == "__main__":
    sys.exit(main())
