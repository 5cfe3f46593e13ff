"""Field types shared by scenario, persona and population-spec files: ids, one-line and long text, shares, clock times.

Each type carries its own rule (pattern, length, no control characters), so every file that
uses it checks the same thing and says so in the same words.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from simulation.formats.strict import StrictModel

__all__ = ["ID_PATTERN", "Identifier", "LongText", "ShortText", "StrictModel", "Unit", "clock_time"]

ID_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
Identifier = Annotated[
    str,
    Field(
        pattern=ID_PATTERN,
        description="lower_snake_case id: a letter, then letters, digits or underscores",
    ),
]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _one_line(value: str) -> str:
    # Names, kinds and objects go into prompts and tables as one line each: a line break in a
    # name would let it pose as a line of the prompt's own text.
    if "\n" in value or "\t" in value or _CONTROL.search(value):
        raise ValueError("must be one line of text (no line breaks, tabs or control characters)")
    return value


def _printable(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must be plain text (no control characters)")
    return value


ShortText = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_one_line)]
LongText = Annotated[str, Field(max_length=4000), AfterValidator(_printable)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]


def clock_time(value: Any) -> Any:
    """A ``mode="before"`` validator for ``time`` fields: YAML 1.1 reads an unquoted 6:30 as the base-60 integer 390."""
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError("write times as quoted 'HH:MM' strings, e.g. '06:30'")
    return value
