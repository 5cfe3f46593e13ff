"""Something a person knows will happen at a place and time: a fact they are aware of whose
details name a place, a day and a time (the party at Hobbs Cafe on February 14, 17:00-19:00).
What the planner can offer as a choice for the day it happens on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Happening:
    fact: str
    """The fact's id (``party``): also the happening's short name in a plan."""
    place: str
    start: datetime
    end: datetime
    name: str | None = None
    """What the town calls it (the fact's ``name``: "Valentine's Day party"); None: the id's words.
    An invitation says it, so a guest asked "Do you know of a Valentine's Day party?" holds a line
    that names what they were invited to, not only "the party at Hobbs Cafe on Tuesday 14 February"."""

    @property
    def title(self) -> str:
        """"Valentine's Day party" (or "party", from the id, for a fact without a name)."""
        return self.name or self.fact.replace("_", " ")
