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
        assert not reach & {"simulation.tick.model", "simulation.run.runner", "simulation.record.store",
                            "simulation.run.simulation", "simulation.tick.town_mind"}, module


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_layers_point_one_way():
    """docs/architecture.md's layers, as packages: what sits below the tick never imports the tick
    or a run; the file formats import nothing of the engine but its errors; and the two input
    packages (the scenario, which samples populations, and the population sampler, which writes
    persona files) do not import each other both ways, since the persona format is ``formats``'s."""
    graph = import_graph("simulation")
    below = ("simulation.cognition", "simulation.world", "simulation.memory", "simulation.llm", "simulation.record",
             "simulation.formats")
    upward = sorted((m, d) for m, d in graph.edges
                    if any(_in(m, p) for p in below) and (_in(d, "simulation.tick") or _in(d, "simulation.run")))
    assert not upward, "imports of the tick or a run from below it:\n" + "\n".join(f"{m} -> {d}" for m, d in upward)

    outside = sorted((m, d) for m, d in graph.edges if _in(m, "simulation.formats")
                     and not _in(d, "simulation.formats") and d != "simulation.errors")
    assert not outside, "simulation.formats imports the engine:\n" + "\n".join(f"{m} -> {d}" for m, d in outside)

    def package_imports(a: str, b: str) -> list[tuple[str, str]]:
        return sorted((m, d) for m, d in graph.edges if _in(m, a) and _in(d, b))

    scenario_to_population = package_imports("simulation.scenario", "simulation.population")
    population_to_scenario = package_imports("simulation.population", "simulation.scenario")
    assert not (scenario_to_population and population_to_scenario), (scenario_to_population, population_to_scenario)


def test_the_package_graph_has_no_cycle():
    """The same one-way rule a level up: no package of the engine imports, through any of its
    modules, a package that imports it back (``simulation`` itself, whose face loads a run
    lazily, aside)."""
    graph = import_graph("simulation")
    packages = nx.DiGraph()
    for m, d in graph.edges:
        a, b = (".".join(x.split(".")[:2]) for x in (m, d))
        if a != b and "simulation" not in (a, b):
            packages.add_edge(a, b)
    cycles = sorted(nx.simple_cycles(packages), key=len)
    assert not cycles, "package cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles[:20])
