"""`agora eval` and `agora personas`: persona fidelity and population sampling (issue 6)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the evaluation and persona commands to ``app``."""
