"""Agora's version (recorded in every run's ``runs.agora_version``) and the engine's fingerprint.

A version number says which release made a run; it does not say whether two runs were made by
the same code. The behaviour benchmark must never republish a run of another engine as if the
current one had made it, so every run also records ``engine_fingerprint()``: a digest of the
engine's own source (its Python modules, prompt templates and data files), which changes with
any edit to them and with nothing else.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

__version__ = "0.1.0"

_SOURCE_SUFFIXES = (".py", ".j2", ".json", ".yaml")


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """16 hex digits of the sha256 over the package's source files (relative path and bytes, in
    path order): equal for the same engine code, different after any change to it."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _SOURCE_SUFFIXES and p.is_file()
                       and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def text_sha256(text: str) -> str:
    """The sha256 of a text (a scenario as run), for telling two scenario contents apart."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


__all__ = ["__version__", "engine_fingerprint", "text_sha256"]
