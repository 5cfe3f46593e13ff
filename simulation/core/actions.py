"""What an agent does and plans: an action under way, an hour's block of the plan, a plan item."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict


@dataclass
class Action:
    """One thing an agent does at a place for some minutes (walking there first if elsewhere)."""

    text: str
    place: str
    minutes: int
    ends: datetime | None = None
    bedtime: bool = False
    importance: float | None = None
    """Of the memory "X is <text> at <place>" formed when it starts (None: rated later)."""
    call_id: int | None = None
    """The ``llm_calls`` row whose answer queued it (None: no LLM answer did)."""


@dataclass
class HourBlock:
    """What a plan step amounts to in one hour of the day (the middle level of a plan)."""

    hour: int
    activity: str
    place: str


class PlanItem(BaseModel):
    """One line of a daily plan: from ``hour`` on, ``activity`` at ``place``. It is also the item
    of the plan's answer schema (``cognition.schemas.plan_model`` narrows its fields), so extra
    keys a model adds are ignored rather than rejected."""

    model_config = ConfigDict(extra="ignore")

    hour: int
    activity: str
    place: str
