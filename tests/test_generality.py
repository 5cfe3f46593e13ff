"""Nothing in the engine is tuned to the flagship (issue 33, point 5): no word of it (Isabella, Hobbs
Cafe, party, Valentine) appears in any prompt template or in any string the engine's code can put
in a prompt or act on. Docstrings and comments may use the flagship as an example; code may not."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGSHIP = re.compile(r"isabella|hobbs|valentine|\bparty\b|\bparties\b", re.IGNORECASE)
ENGINE = ("cognition", "tick", "world", "memory", "agents", "core", "provenance", "llm")
"""The packages a run's behaviour comes from (evaluation and reports may name what they measure)."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of every bare string statement (a module's, class's or function's docstring, or an
    attribute's, the string right after it): documentation, never a value the engine uses."""
    found = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            for stmt in stmts if isinstance(stmts, list) else []:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str):
                    found.add(id(stmt.value))
    return found


def test_no_prompt_template_names_the_flagship():
    templates = [p for p in (ROOT / "simulation").rglob("*.j2")
                 if "evaluation" not in p.parts and "population" not in p.parts]
    assert len(templates) >= 15
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in templates
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if FLAGSHIP.search(line)]
    assert not hits, "\n".join(hits)


def test_no_engine_string_names_the_flagship():
    hits = []
    for package in ENGINE:
        for path in sorted((ROOT / "simulation" / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                        and FLAGSHIP.search(node.value):
                    hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:80]!r}")
    assert not hits, "\n".join(hits)


def test_the_scan_finds_a_string_in_code_and_passes_a_docstring_by():
    tree = ast.parse('"""A party."""\ndef f():\n    """Hobbs."""\n    return "the party at Hobbs Cafe"\n')
    skip = _docstrings(tree)
    found = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and id(n) not in skip and FLAGSHIP.search(n.value)]
    assert found == ["the party at Hobbs Cafe"]
