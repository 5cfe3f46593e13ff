"""What an agent does and plans: an action under way, an hour's block of the plan, a plan item."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict

AS_IS_FIRST_WORDS = frozenset({"at", "in", "on", "out", "off", "home", "back", "late", "asleep", "busy", "with", "about"})
"""First words after which an activity already reads as "X is <activity>" ("late for his shift",
"home with the cat")."""


def as_doing(activity: str) -> str:
    """The activity as what someone "is" doing. Routines name activities as verbs ("dispensing
    prescriptions") or as nouns ("black coffee at Hobbs Cafe", "the yearly stock count"); a noun
    after "is" ("Daniel is black coffee") reads as nonsense to a person and to a small model, which
    copies it, so a noun phrase becomes "busy with ...". Nothing is invented: the words stay."""
    text = activity.strip()
    first = text.split(maxsplit=1)[0].lower() if text else ""
    if not first or first.endswith("ing") or first in AS_IS_FIRST_WORDS:
        return text
    return f"busy with {text}"


def doing_at(doing: str, place_name: str) -> str:
    """"<doing> at <place>", unless the words already name the place ("coffee at Hobbs Cafe")."""
    return doing if place_name.lower() in doing.lower() else f"{doing} at {place_name}"


@dataclass
class Action:
    """One thing an agent does at a place for some minutes (walking there first if elsewhere)."""

    text: str
    place: str
    minutes: int
    ends: datetime | None = None
    bedtime: bool = False
    importance: float | None = None
    """Of the memory "X is <doing> [at <place>]" formed when it starts (None: rated later)."""
    call_id: int | None = None
    """The ``llm_calls`` row whose answer queued it (None: no LLM answer did)."""

    @property
    def doing(self) -> str:
        """The text as what someone "is" doing (``as_doing``)."""
        return as_doing(self.text)


@dataclass
class HourBlock:
    """What a plan step amounts to in one hour of the day (the middle level of a plan)."""

    hour: int
    activity: str
    place: str
    call_id: int | None = None
    """The answer that put this hour into the day when it was not the day's plan (a yes to the
    director's gathering offer); None: the day's plan (``AgentState.plan_call``)."""


class PlanItem(BaseModel):
    """One line of a daily plan: from ``hour`` on, ``activity`` at ``place``. It is also the item
    of the plan's answer schema (``cognition.schemas.plan_model`` narrows its fields), so extra
    keys a model adds are ignored rather than rejected."""

    model_config = ConfigDict(extra="ignore")

    hour: int
    activity: str
    place: str
