"""A conversation between two agents at one place: turns alternate, one utterance per tick.

Either side can end it (or the turn cap, or bedtime); afterwards each side writes a recap:
a summary memory and its new view of the other (``simulation.cognition.converse.recap``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Conversation:
    id: int
    place: str
    participants: tuple[str, str]
    started_tick: int
    started_at: datetime
    lines: list[tuple[str, str]] = field(default_factory=list)
    """(speaker id, text) in order."""
    next_speaker: str = ""
    ended_reason: str | None = None
    ended_tick: int | None = None
    ended_at: datetime | None = None
    memory_ids: dict[str, list[int]] = field(default_factory=dict)
    """Each participant's utterance memories of this conversation (rated together at the recap)."""

    def partner(self, agent_id: str) -> str:
        a, b = self.participants
        return b if agent_id == a else a

    @property
    def turns(self) -> int:
        return len(self.lines)

    @property
    def open(self) -> bool:
        return self.ended_reason is None
