"""`agora ui`: the Streamlit viewer (issue 5)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the viewer's commands to ``app``."""
