"""A conversation between two agents at one place: turns alternate, one utterance per tick."""

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

    def partner(self, agent_id: str) -> str:
        a, b = self.participants
        return b if agent_id == a else a

    @property
    def turns(self) -> int:
        return len(self.lines)

    @property
    def open(self) -> bool:
        return self.ended_reason is None
