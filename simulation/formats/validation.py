"""From a parsed YAML file to a validated model, with every problem located at its line and field.

Shared by scenario, persona and population-spec files: pydantic's errors are reworded for
people (its union tags and model names dropped from locations, its messages shortened), and
each is placed at the line of the YAML node it is about.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from simulation.errors import FieldPath, InputError, Problem
from simulation.formats.fields import ID_PATTERN
from simulation.formats.yamlfile import YamlDocument, shown

__all__ = ["Explain", "pydantic_problems", "validate_document"]

M = TypeVar("M", bound=BaseModel)

Explain = Callable[[FieldPath, dict[str, Any]], "str | None"]
"""A model's own wording for one of pydantic's errors (its raw location and the error), or None."""

_UNION_TAG = re.compile(r"^(list|literal|dict|tuple|set|constrained-str|function-[a-z-]+)(\[.*\])?$")


def _without_tags(data: Any, loc: FieldPath) -> FieldPath:
    """``loc`` without the tags of discriminated unions (``("llm", "openai", "threads")`` -> ``("llm", "threads")``).

    A tag is a name where the document has no such key, before the end of the location (a
    missing field is the last part of its location, so it is never mistaken for one)."""
    out: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part not in node and i < len(loc) - 1 and part != "[key]":
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _or(quoted: str) -> str:
    """"'a', 'b', 'c'" -> "'a', 'b' or 'c'" (pydantic lists expected tags with commas only)."""
    head, sep, last = quoted.rpartition(", ")
    return f"{head} or {last}" if sep else quoted


def pydantic_problems(doc: YamlDocument, exc: ValidationError, prefix: FieldPath = (),
                      explain: Explain | None = None) -> list[Problem]:
    """``exc``'s errors as problems located in ``doc``; ``explain`` may word some of them itself."""
    problems = []
    seen: set[FieldPath] = set()
    for err in exc.errors(include_url=False):
        # Union branches add tags such as "list[constrained-str]" or "literal['all']" to the
        # location; they are pydantic's words, not the user's field names.
        raw = prefix + tuple(err["loc"])
        loc = tuple(p for p in raw if not (isinstance(p, str) and _UNION_TAG.match(p)))
        if any(isinstance(p, str) and p.startswith("literal[") for p in raw) and len(raw) != len(loc):
            union_field = loc
            if any(other[: len(union_field)] == union_field for other in seen) or union_field in seen:
                continue  # the other branch of the union already explains this field
        loc = _without_tags(doc.data, loc)
        ctx = err.get("ctx", {})
        tag_error = err["type"] == "union_tag_invalid" and "discriminator" in ctx
        if tag_error:  # the error is about the field that picks the branch
            loc += (str(ctx["discriminator"]).strip("'"),)
        if loc in seen:
            continue
        seen.add(loc)
        msg = err["msg"].removeprefix("Value error, ")
        key = bool(loc) and loc[-1] == "[key]"  # a mapping key failed (relationships are keyed by persona id)
        if key:
            loc = loc[:-1]
            msg = f"key: {msg}"
        own = explain(raw, err) if explain is not None else None
        if own is not None:
            msg = own
        elif err["type"] == "string_pattern_mismatch" and ctx.get("pattern") == ID_PATTERN:
            msg = (f"{'key ' if key else ''}{shown(str(err['input']))} is not a lower_snake_case id (a letter, "
                   f"then letters, digits or underscores): it should match pattern '{ID_PATTERN}'")
        elif err["type"] == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif tag_error:
            msg = f"unknown {loc[-1]} {shown(str(ctx.get('tag')))}; expected {_or(str(ctx.get('expected_tags')))}"
        problems.append(doc.problem(loc, msg))
    return problems


def validate_document(doc: YamlDocument, model: type[M], what: str, explain: Explain | None = None) -> M:
    """``doc`` as ``model``; InputError with every problem, each at its line, when it is not one.

    ``what`` names the kind of file in the message for a file that is not a mapping."""
    if not isinstance(doc.data, dict):
        kind = type(doc.data).__name__
        kind = {"list": "a list", "str": "a string", "int": "a number", "float": "a number",
                "NoneType": "nothing (null)", "bool": "a boolean", "datetime": "a date"}.get(kind, kind)
        raise InputError(Problem(str(doc.path), f"a {what} file must be a mapping of fields, found {kind}", 1, 1))
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        raise InputError(pydantic_problems(doc, exc, explain=explain)) from None
