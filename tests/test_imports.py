"""The engine's import graph has no cycles: dependencies point one way (docs/design.md shows the
layers). Every import counts, including those inside functions; only ``if TYPE_CHECKING:``
imports (annotations) do not, since they never run."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def import_graph(package: str) -> nx.DiGraph:
    modules = {module_name(p): p for p in (ROOT / package).rglob("*.py")}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        package_of = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package_of.split(".")[: len(package_of.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                found = owner(target)
                if found and found != name:
                    graph.add_edge(name, found)
    return graph


def test_no_import_cycle_in_the_engine():
    cycles = sorted((c for c in nx.simple_cycles(import_graph("simulation"))), key=len)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles[:20])


def test_the_leaf_types_import_nothing_of_the_engine():
    graph = import_graph("simulation")
    core = [m for m in graph if m.startswith("simulation.core")]
    outside = {(m, d) for m in core for d in graph.successors(m) if not d.startswith("simulation.core")}
    assert not outside


def test_cognition_never_reaches_the_model():
    """Phases work through ``Mind``: nothing in cognition imports the model, runner or store."""
    graph = import_graph("simulation")
    for module in (m for m in graph if m.startswith("simulation.cognition")):
        reach = nx.descendants(graph, module)
        assert not reach & {"simulation.model", "simulation.runner", "simulation.store", "simulation.simulation",
                            "simulation.town_mind"}, module
