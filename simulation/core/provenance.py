"""Where a memory came from: its source and, when someone else is behind it, who and through what.

Every memory records this (``memories.source``, ``from_agent``, ``utterance_id``, ``event_id``,
``conversation_id``), so a fact's path through the town can be read back: Daniel's memory of
the party says Isabella told him, in which line, of which conversation. See docs/provenance.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulation.core.vocabulary import Source


@dataclass(frozen=True)
class Provenance:
    source: Source
    from_agent: str | None = None
    """The person behind it: the speaker heard, the partner recapped, the person seen."""
    utterance_id: int | None = None
    event_id: int | None = None
    """The ``events`` row: the whisper or place event seen."""
    conversation_id: int | None = None
    fact: str | None = None
    """A fact the scenario says this memory brings (a whisper or place event with ``fact:``, a seed)."""
    quote: str | None = None
    """For a line said or heard: the words alone, which is what is checked for facts (not stored;
    ``utterances.text`` holds them)."""

    def columns(self) -> dict[str, object]:
        """The ``memories`` columns this fills."""
        return {"source": str(self.source), "from_agent": self.from_agent, "utterance_id": self.utterance_id,
                "event_id": self.event_id, "conversation_id": self.conversation_id}
