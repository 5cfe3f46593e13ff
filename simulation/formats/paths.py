"""Paths the user writes: in scenario files, population specs and command-line options.

A separate module because both the scenario loader and the LLM backends (model files, the
replay cache) resolve such paths, and the LLM layer must not depend on the scenario package.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["resolve_path"]


def resolve_path(value: str, base: Path) -> Path:
    """A user-given path: ``~`` expanded where possible, relative paths taken from ``base``."""
    path = Path(value)
    try:
        path = path.expanduser()
    except RuntimeError:  # '~someone' with no such user: left as is, reported as not found
        pass
    return path if path.is_absolute() else base / path
