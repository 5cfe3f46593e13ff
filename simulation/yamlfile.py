"""Safe YAML loading that remembers where every value came from.

Pydantic reports errors by field path (``("town", "paths", 3, "between")``); users need
``file:line:column``.  We compose the YAML node tree once, construct plain Python data
with PyYAML's *safe* constructor (no Python object tags), and keep a map from field
path to source position so any later error can be located.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import re
from pathlib import Path
from typing import Any

import yaml

from simulation.errors import FieldPath, InputError, Problem, format_field

MAX_FILE_BYTES = 2_000_000
MAX_DEPTH = 64
MAX_NODES = 200_000

@dataclass
class YamlDocument:
    """Parsed YAML data plus the source position of every mapping key and value."""

    path: Path
    data: Any
    text: str = ""
    positions: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: FieldPath) -> tuple[int | None, int | None]:
        """Line/column (1-based) of the deepest known prefix of ``path``."""
        for n in range(len(path), -1, -1):
            pos = self.positions.get(tuple(path[:n]))
            if pos is not None:
                return pos
        return None, None

    def problem(self, path: FieldPath, message: str) -> Problem:
        line, col = self.locate(path)
        return Problem(str(self.path), message, line, col, format_field(path))


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int = 0) -> int:
    """Nodes the document would have with every alias expanded (an alias bomb is tiny on disk)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if depth > MAX_DEPTH:  # _index reports it, with the right line
        return 1
    memo[key] = 1  # guards self-reference while counting
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo, depth + 1) + _expanded_size(v, memo, depth + 1) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(item, memo, depth + 1) for item in node.value)
    else:
        size = 1
    memo[key] = size
    return size


def _index(doc: YamlDocument, node: yaml.Node, path: FieldPath, depth: int, visited: set[int]) -> None:
    if depth > MAX_DEPTH:
        raise InputError(
            Problem(str(doc.path), f"nesting deeper than {MAX_DEPTH} levels", *_mark(node))
        )
    doc.positions.setdefault(path, _mark(node))
    if id(node) in visited:  # an alias of a node already indexed: its positions are known
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None:
                continue
            if key in seen:
                line, col = _mark(key_node)
                raise InputError(
                    Problem(
                        str(doc.path),
                        f"duplicate key {key!r} (first defined on line {seen[key]})",
                        line,
                        col,
                        format_field(path + (key,)),
                    )
                )
            seen[key] = _mark(key_node)[0]
            doc.positions[path + (key,)] = _mark(key_node)
            _index(doc, value_node, path + (key,), depth + 1, visited)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(doc, item, path + (i,), depth + 1, visited)


def read_text(path: Path, what: str = "file") -> str:
    """Read a user file as UTF-8 text, turning every OS/encoding failure into InputError."""
    p = Path(path)
    if not p.exists():
        raise InputError(Problem(str(p), f"{what} not found"))
    if p.is_dir():
        raise InputError(Problem(str(p), f"expected a {what}, found a directory"))
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(
                Problem(str(p), f"{what} is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
            )
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(Problem(str(p), f"cannot read {what}: {exc.strerror or exc}")) from None
    if b"\x00" in raw:
        raise InputError(Problem(str(p), f"not a text file (it contains NUL bytes)"))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            Problem(str(p), f"not a UTF-8 text file (bad byte at offset {exc.start})")
        ) from None


def load_yaml(path: Path | str, what: str = "file") -> YamlDocument:
    """Load one YAML document safely; every failure becomes a located InputError."""
    p = Path(path)
    text = read_text(p, what)
    if not text.strip():
        raise InputError(Problem(str(p), f"{what} is empty"))
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                raise InputError(Problem(str(p), f"{what} has no YAML content"))
            doc = YamlDocument(p, None, text)
            if _expanded_size(node, {}) > MAX_NODES:
                raise InputError(Problem(
                    str(p), f"document expands to more than {MAX_NODES:,} values (too many aliases?)", 1, 1))
            _index(doc, node, (), 0, set())
            doc.data = loader.construct_document(node)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            msg = " ".join(s for s in (exc.context, exc.problem) if s)
            if "could not determine a constructor" in (exc.problem or ""):
                tag = re.search(r"tag '([^']*)'", exc.problem or "")
                msg = f"YAML tag not allowed: '{tag.group(1) if tag else exc.problem}'"
            raise InputError(
                Problem(
                    str(p),
                    f"invalid YAML: {msg}",
                    mark.line + 1 if mark else None,
                    mark.column + 1 if mark else None,
                )
            ) from None
        except yaml.YAMLError as exc:
            raise InputError(Problem(str(p), f"invalid YAML: {exc}")) from None
        except RecursionError:
            raise InputError(Problem(str(p), "YAML nested too deeply")) from None
    finally:
        loader.dispose()
    return doc
