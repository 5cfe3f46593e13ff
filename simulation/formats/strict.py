"""The base of every model that reads a user's file: unknown keys are errors.

It lives outside ``simulation.scenario`` because the LLM settings (``simulation.llm``) are
read the same strict way, and the scenario schema builds on them: a shared base below both
keeps the import graph one-way.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a scenario must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)
