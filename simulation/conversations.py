"""Conversations: the town's open conversations, and what starting, speaking in and ending one
does to the people in it, their memories and run.db.

Cognition decides *that* someone speaks and *what* they say (``cognition.converse``); this
component owns the conversations themselves (one per pair of people at a time, turns
alternating) and is what a conversation phase reaches through ``Mind``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from simulation.agents import AgentState
from simulation.conversation import Conversation
from simulation.core import MemoryKind, Moment, Provenance, Source, Status
from simulation.memory import TownMemory
from simulation.recorder import Recorder
from simulation.store import TickBuffer, dumps, sim_iso


class Conversations:
    def __init__(self, people: Mapping[str, AgentState], memory: TownMemory, recorder: Recorder,
                 buffer: TickBuffer, moment: Moment, next_id: Callable[[], int]):
        self.people = people
        self.memory = memory
        self.recorder = recorder
        self.buffer = buffer
        self.moment = moment
        self.next_id = next_id
        self.open: dict[int, Conversation] = {}
        self.ended: list[Conversation] = []
        """Ended this tick, waiting for both sides' recaps."""

    def get(self, conversation_id: int) -> Conversation:
        return self.open[conversation_id]

    def of(self, person: AgentState) -> Conversation | None:
        return self.open.get(person.conversation_id) if person.conversation_id is not None else None

    def take_ended(self) -> list[Conversation]:
        ended, self.ended = self.ended, []
        return ended

    def start(self, a: AgentState, b: AgentState, greeting: str, call_id: int | None) -> Conversation | None:
        """``a`` opens with ``greeting`` if both are still free at the same place (else None)."""
        if not (a.free and b.free and a.place == b.place):
            return None
        now = self.moment.now
        conv = Conversation(
            id=self.next_id(), place=a.place, participants=(a.id, b.id),
            started_tick=self.moment.tick, started_at=now, next_speaker=b.id,
        )
        self.open[conv.id] = conv
        for person in (a, b):
            person.resume_status = Status.ACTING if person.status == Status.ACTING else Status.IDLE
            person.status = Status.TALKING
            person.conversation_id = conv.id
            person.last_talk[conv.partner(person.id)] = now
        self.recorder.event(a, "conversation_start", f"{a.persona.name} starts talking with {b.persona.name}",
                            {"conversation_id": conv.id, "with": b.id})
        self.say(conv, a, greeting, call_id)
        return conv

    def say(self, conv: Conversation, speaker: AgentState, text: str, call_id: int | None) -> None:
        listener = self.people[conv.partner(speaker.id)]
        conv.lines.append((speaker.id, text))
        utterance_id = self.buffer.add("utterances", {
            "conversation_id": conv.id, "tick": self.moment.tick, "sim_time": sim_iso(self.moment.now),
            "turn": conv.turns - 1, "speaker_id": speaker.id, "listener_id": listener.id, "text": text,
            "llm_call_id": call_id,
        })
        self.recorder.event(speaker, "utterance", f'{speaker.persona.name} to {listener.persona.name}: "{text}"',
                            {"conversation_id": conv.id})
        for person, source in ((speaker, Source.SAID), (listener, Source.HEARD)):
            node = self.memory.add(person.id, MemoryKind.UTTERANCE,
                                   f'{speaker.persona.name} said to {listener.persona.name}: "{text}"',
                                   Provenance(source, from_agent=speaker.id if source == Source.HEARD else None,
                                              utterance_id=utterance_id, conversation_id=conv.id, quote=text))
            conv.memory_ids.setdefault(person.id, []).append(node.id)
        self.save(conv)

    def end(self, conv: Conversation, reason: str) -> None:
        """Close it now; both sides' recaps (summary memory, relationship) follow in this tick's recap phase."""
        conv.ended_reason = reason
        conv.ended_tick, conv.ended_at = self.moment.tick, self.moment.now
        names = {a: self.people[a].persona.name for a in conv.participants}
        self.ended.append(conv)
        for person_id in conv.participants:
            person = self.people[person_id]
            person.conversation_id = None
            if person.status == Status.TALKING:
                person.status = person.resume_status
        first = self.people[conv.participants[0]]
        self.recorder.event(first, "conversation_end", f"{' and '.join(names.values())} stop talking ({reason})",
                            {"conversation_id": conv.id, "turns": conv.turns})
        self.save(conv)
        del self.open[conv.id]

    def save(self, conv: Conversation) -> None:
        """Queue the conversation's row (the buffer keeps only the last version per tick)."""
        self.buffer.upsert("conversations", {
            "id": conv.id, "place": conv.place, "participants": dumps(list(conv.participants)),
            "started_tick": conv.started_tick, "started_at": sim_iso(conv.started_at),
            "ended_tick": conv.ended_tick, "ended_at": sim_iso(conv.ended_at) if conv.ended_at else None,
            "turns": conv.turns, "end_reason": conv.ended_reason,
        })
