"""Errors that reach the user: located problems with their input, and run failures.

``InputError`` means bad input (exit code 2); ``RunError`` means the run could not go on
for another reason (exit code 1). Both print as plain messages, never tracebacks.
"""

from __future__ import annotations

from dataclasses import dataclass

FieldPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, located as precisely as we can."""

    file: str
    message: str
    line: int | None = None
    column: int | None = None
    field: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.field + ': ' if self.field else ''}{self.message}"


class InputError(Exception):
    """Bad user input (exit code 2). Carries one or more located problems."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


def format_field(path: FieldPath) -> str:
    """("town", "paths", 3, "between") -> "town.paths[3].between"."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class RunError(Exception):
    """A failure that is not the user's input: unreachable server, model gone, disk full."""
