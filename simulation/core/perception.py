"""What reaches an agent at its place: a place event under way, what it noticed this tick, and
what it reacts to."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class PlaceEvent:
    """A scheduled event happening at a place until ``until`` (``events`` row ``id``)."""

    id: int
    place: str
    text: str
    until: datetime
    fact: str | None = None
    """The scenario's fact this event brings (``events[].fact``), if any."""


@dataclass
class Perception:
    """What an agent noticed this tick: people first met (or met again after a while), new place events."""

    people: list[str] = field(default_factory=list)
    events: list[PlaceEvent] = field(default_factory=list)


@dataclass
class Focus:
    """What an agent reacts to this tick: a new event at its place and/or someone free to talk (their id)."""

    event: PlaceEvent | None
    other: str | None
