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
