"""A conversation between two agents at one place: turns alternate, one utterance per tick, each
with its move (what the line was for).

Either side can end it (or the turn cap, or bedtime); afterwards each side writes a recap:
a summary memory and its new view of the other (``simulation.cognition.converse.recap``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from simulation.core import Move


@dataclass
class Conversation:
    id: int
    place: str
    participants: tuple[str, str]
    started_tick: int
    started_at: datetime
    lines: list[tuple[str, str]] = field(default_factory=list)
    """(speaker id, text) in order."""
    moves: list[Move] = field(default_factory=list)
    """What each line was for, beside ``lines`` (``core.move``)."""
    next_speaker: str = ""
    ended_reason: str | None = None
    ended_tick: int | None = None
    ended_at: datetime | None = None
    memory_ids: dict[str, list[int]] = field(default_factory=dict)
    """Each participant's utterance memories of this conversation (rated together at the recap)."""

    def partner(self, agent_id: str) -> str:
        a, b = self.participants
        return b if agent_id == a else a

    def last_move(self) -> Move | None:
        return self.moves[-1] if self.moves else None

    def said_by(self, agent_id: str) -> list[Move]:
        """The moves ``agent_id`` made in this conversation, in order."""
        return [m for (speaker, _), m in zip(self.lines, self.moves, strict=False) if speaker == agent_id]

    @property
    def turns(self) -> int:
        return len(self.lines)

    @property
    def open(self) -> bool:
        return self.ended_reason is None
