"""The package's layers are declared for every module, and no import circle hides anywhere.

``lint-imports`` (run by .ci/run) checks the contracts of pyproject.toml, but only for the modules they name: a new
module left out of them would be checked by nothing. docs/development.md says where a new module goes.
"""

from __future__ import annotations

import runpy
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_GRAPH = runpy.run_path(str(ROOT / "tools" / "import_graph.py"))
import_graph, circles = _GRAPH["import_graph"], _GRAPH["circles"]


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_every_module_of_the_package_is_in_a_layer_of_the_contracts():
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    placed = {name.strip().strip("()") for layer in layers for name in layer.replace(":", "|").split("|")}  # (optional)
    inits = set(next(c for c in _contracts() if c["id"] == "low-inits")["source_modules"])  # __init__ modules alone
    modules, _, _ = import_graph(ROOT / "src")
    left_out = sorted(m for m in modules if m not in inits and not any(m == p or m.startswith(p + ".") for p in placed))
    assert not left_out, (f"not in any layer of pyproject.toml's [tool.importlinter] contracts: {', '.join(left_out)}; "
                          "add each to the layer it belongs in (docs/development.md, 'Layers')")


def test_no_import_circle_counting_imports_inside_functions_and_under_type_checking():
    modules, graph, _ = import_graph(ROOT / "src")
    every: dict[str, set[str]] = {}
    for kind in graph.values():
        for importer, imported in kind.items():
            every.setdefault(importer, set()).update(imported)
    assert circles(modules, every) == []
