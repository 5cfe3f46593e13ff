"""Safe YAML loading that remembers where every value came from.

Pydantic reports errors by field path (``("town", "paths", 3, "between")``); users need
``file:line:column``.  We compose the YAML node tree once, construct plain Python data
with PyYAML's *safe* constructor (no Python object tags), and keep a map from field
path to source position so any later error can be located. Every failure, down to a
character YAML forbids or a scalar its constructor cannot convert, is an InputError.
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


def shown(value: str, limit: int = 40) -> str:
    """A scalar as a message shows it: quoted, and cut short when it is long."""
    return repr(value) if len(value) <= limit else f"{value[:limit // 2]!r}... ({len(value):,} characters)"


class _ScalarError(yaml.constructor.ConstructorError):
    """A scalar that is valid YAML but not a valid value of its type; knows its node, to name the field."""

    def __init__(self, problem: str, node: yaml.Node):
        super().__init__(None, None, problem, node.start_mark)
        self.node = node


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a scalar its constructors cannot convert is a located error.

    SafeConstructor lets plain Python exceptions escape for some valid-looking input: an
    unquoted ``2023-02-30`` (ValueError), an integer of more than 4300 digits (ValueError),
    ``!!bool maybe`` (KeyError), ``!!timestamp nope`` (AttributeError). They become
    ConstructorErrors with the node's position, which load_yaml reports like any YAML error.
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError) as exc:
            kind = node.tag.rsplit(":", 1)[-1] if node.tag.startswith("tag:yaml.org,2002:") else node.tag
            kind = {"timestamp": "date", "int": "number", "float": "number", "bool": "boolean"}.get(kind, kind)
            if not isinstance(node, yaml.ScalarNode):
                problem = f"a {'mapping' if isinstance(node, yaml.MappingNode) else 'list'} is not a valid {kind}"
            elif kind == "number" and "digits" in str(exc):
                problem = f"number too large ({len(node.value):,} digits)"
            elif kind == "date" and str(exc) and not isinstance(exc, AttributeError):
                problem = f"{shown(node.value)} is not a valid date ({exc})"
            else:
                problem = f"{shown(node.value)} is not a valid {kind}"
            raise _ScalarError(problem, node) from None


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


def _index(doc: YamlDocument, node: yaml.Node, path: FieldPath, depth: int, visited: dict[int, FieldPath]) -> None:
    if depth > MAX_DEPTH:
        raise InputError(
            Problem(str(doc.path), f"nesting deeper than {MAX_DEPTH} levels", *_mark(node))
        )
    doc.positions.setdefault(path, _mark(node))
    if id(node) in visited:  # an alias of a node already indexed: its positions are known
        return
    visited[id(node)] = path
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


def missing_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file ("not found", "is a directory", an OS error), or None.

    ``Path.is_file`` raises for some names (a component over 255 bytes: ENAMETOOLONG); here
    every answer is a message for the user.
    """
    try:
        if Path(path).is_file():
            return None
        return "is a directory" if Path(path).is_dir() else "not found"
    except (OSError, ValueError) as exc:
        return f"cannot be opened: {getattr(exc, 'strerror', None) or exc}"


def _is_utf16(raw: bytes) -> bool:
    """Text saved as UTF-16 with a byte-order mark (Windows editors do): its NULs are not binary."""
    if raw[:2] not in (b"\xff\xfe", b"\xfe\xff"):
        return False
    try:
        raw.decode("utf-16")
    except UnicodeDecodeError:
        return False
    return True


def read_text(path: Path, what: str = "file") -> str:
    """Read a user file as UTF-8 text, turning every OS/encoding failure into InputError."""
    p = Path(path)
    why = missing_file(p)
    if why == "is a directory":
        raise InputError(Problem(str(p), f"expected a {what}, found a directory"))
    if why is not None:
        raise InputError(Problem(str(p), f"{what} {why}"))
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(
                Problem(str(p), f"{what} is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
            )
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(Problem(str(p), f"cannot read {what}: {exc.strerror or exc}")) from None
    if _is_utf16(raw):
        raise InputError(Problem(str(p), f"{what} is UTF-16 text; save it as UTF-8"))
    if b"\x00" in raw:
        raise InputError(Problem(str(p), "not a text file (it contains NUL bytes)", *_byte_mark(raw, raw.index(0))))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            Problem(str(p), f"not a UTF-8 text file (bad byte at offset {exc.start})", *_byte_mark(raw, exc.start))
        ) from None


def _byte_mark(raw: bytes, offset: int) -> tuple[int, int]:
    """Line and column (1-based, counting bytes) of a byte offset in a file."""
    line_start = raw.rfind(b"\n", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1, offset - line_start + 1


def load_yaml(path: Path | str, what: str = "file") -> YamlDocument:
    """Load one YAML document safely; every failure becomes a located InputError."""
    p = Path(path)
    return parse_yaml(read_text(p, what), p, what)


def parse_yaml(text: str, p: Path, what: str = "file") -> YamlDocument:
    """One YAML document from ``text`` (read from ``p``), with every field's position."""
    if not text.strip():
        raise InputError(Problem(str(p), f"{what} is empty"))
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # raised while the loader scans the text for unprintables
        raise InputError(_reader_problem(p, text, exc)) from None
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                raise InputError(Problem(str(p), f"{what} has no YAML content"))
            doc = YamlDocument(p, None, text)
            if _expanded_size(node, {}) > MAX_NODES:
                raise InputError(Problem(
                    str(p), f"document expands to more than {MAX_NODES:,} values (too many aliases?)", 1, 1))
            fields: dict[int, FieldPath] = {}
            _index(doc, node, (), 0, fields)
            doc.data = loader.construct_document(node)
        except _ScalarError as exc:
            line, column = _mark(exc.node)
            field = format_field(fields.get(id(exc.node), ()))
            raise InputError(Problem(str(p), exc.problem or "invalid value", line, column, field)) from None
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
        except yaml.reader.ReaderError as exc:
            raise InputError(_reader_problem(p, text, exc)) from None
        except yaml.YAMLError as exc:
            raise InputError(Problem(str(p), f"invalid YAML: {exc}")) from None
        except RecursionError:
            raise InputError(Problem(str(p), "YAML nested too deeply")) from None
    finally:
        loader.dispose()
    return doc


def _reader_problem(path: Path, text: str, exc: yaml.reader.ReaderError) -> Problem:
    """A character YAML does not allow (a control character), located by line and column."""
    before = text[: exc.position]
    line = before.count("\n") + 1
    column = exc.position - (before.rfind("\n") + 1) + 1
    return Problem(str(path), f"invalid YAML: character U+{exc.character:04X} is not allowed in YAML text",
                   line, column)
