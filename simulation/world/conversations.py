"""Conversations: the town's open conversations, and what starting, speaking in and ending one
does to the people in it, their memories and run.db.

A ``Conversation`` is one between two people at one place: turns alternate, one utterance per
tick, each with its move (what the line was for). Either side can end it (or the turn cap, or
bedtime); afterwards each side writes a recap: a summary memory and its new view of the other
(``simulation.cognition.converse.recap``).

Cognition decides *that* someone speaks and *what* they say (``cognition.converse``); this
component owns the conversations themselves (one per pair of people at a time, turns
alternating), what a line's move does (news told is not told again, news heard can be passed
on, an invitation is a row of run.db's ``invitations`` and its answer), and is what a
conversation phase reaches through ``Mind``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from simulation.agents import AgentState
from simulation.core import Aim, EventKind, Happening, MemoryKind, Moment, Move, Provenance, Source, Status
from simulation.memory import TownMemory
from simulation.record.recorder import Recorder
from simulation.record.store import TickBuffer, dumps, sim_iso


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

    def state(self) -> list[Conversation]:
        """The open conversations, by id: what the checkpoint stores (ended ones are in run.db)."""
        return sorted(self.open.values(), key=lambda c: c.id)

    def restore(self, open_conversations: list[Conversation]) -> None:
        self.open = {c.id: c for c in open_conversations}

    def take_ended(self) -> list[Conversation]:
        ended, self.ended = self.ended, []
        return ended

    def start(self, a: AgentState, b: AgentState, call_id: int | None) -> Conversation | None:
        """``a`` opens a conversation with ``b`` if both are still free at the same place (else None);
        ``a`` speaks first (``call_id``: the question that decided to talk, kept in the start event)."""
        if not (a.free and b.free and a.place == b.place):
            return None
        now = self.moment.now
        conv = Conversation(
            id=self.next_id(), place=a.place, participants=(a.id, b.id),
            started_tick=self.moment.tick, started_at=now, next_speaker=a.id,
        )
        self.open[conv.id] = conv
        for person in (a, b):
            person.resume_status = Status.ACTING if person.status == Status.ACTING else Status.IDLE
            person.status = Status.TALKING
            person.conversation_id = conv.id
            person.last_talk[conv.partner(person.id)] = now
        self.recorder.event(a, EventKind.CONVERSATION_START, f"{a.persona.name} starts talking with {b.persona.name}",
                            {"conversation_id": conv.id, "with": b.id, "llm_call_id": call_id})
        self.save(conv)
        return conv

    def say(self, conv: Conversation, speaker: AgentState, text: str, call_id: int | None, move: Move) -> int | None:
        """``speaker`` says ``text`` (making ``move``): the line's row, both sides' memories of it,
        and what the move does (news told, an invitation made or answered). Returns the utterance id."""
        listener = self.people[conv.partner(speaker.id)]
        conv.lines.append((speaker.id, text))
        utterance_id = self.buffer.add("utterances", {
            "conversation_id": conv.id, "tick": self.moment.tick, "sim_time": sim_iso(self.moment.now),
            "turn": conv.turns - 1, "speaker_id": speaker.id, "listener_id": listener.id, "text": text,
            "llm_call_id": call_id, "aim": str(move.aim), "topic": move.topic or None,
        })
        self.recorder.event(speaker, EventKind.UTTERANCE, f'{speaker.persona.name} to {listener.persona.name}: "{text}"',
                            {"conversation_id": conv.id})
        for person, source in ((speaker, Source.SAID), (listener, Source.HEARD)):
            node = self.memory.add(person.id, MemoryKind.UTTERANCE,
                                   f'{speaker.persona.name} said to {listener.persona.name}: "{text}"',
                                   Provenance(source, from_agent=speaker.id if source == Source.HEARD else None,
                                              utterance_id=utterance_id, conversation_id=conv.id, quote=text))
            conv.memory_ids.setdefault(person.id, []).append(node.id)
            if person is listener and (move.aim in (Aim.SHARE, Aim.INVITE) or move.memory_id is not None):
                listener.news.append(node.id)
        if move.memory_id is not None:
            speaker.told.setdefault(listener.id, []).append(move.memory_id)
        if move.aim == Aim.INVITE and move.happening is not None:
            move = replace(move, invitation_id=self._invite(conv, speaker, listener, move.happening, utterance_id))
        elif move.aim in (Aim.ACCEPT, Aim.DECLINE) and move.invitation_id is not None:
            self._answer(move, utterance_id)
            if move.aim == Aim.ACCEPT and move.happening is not None and move.happening not in speaker.going:
                speaker.going.append(move.happening)
        conv.moves.append(move)
        self.save(conv)
        return utterance_id

    def _invite(self, conv: Conversation, inviter: AgentState, guest: AgentState, h: Happening,
                utterance_id: int | None) -> int | None:
        inviter.invited.setdefault(guest.id, []).append(h.fact)
        self.recorder.event(inviter, EventKind.INVITATION, f"{inviter.persona.name} invites {guest.persona.name} to the "
                            f"{h.title}", {"conversation_id": conv.id, "guest": guest.id,
                                                             "fact": h.fact})
        return self.buffer.add("invitations", {
            "tick": self.moment.tick, "sim_time": sim_iso(self.moment.now), "conversation_id": conv.id,
            "utterance_id": utterance_id, "inviter_id": inviter.id, "guest_id": guest.id, "fact_id": h.fact,
            "place": h.place, "starts_at": sim_iso(h.start), "ends_at": sim_iso(h.end), "answer": None,
            "answer_utterance_id": None,
        })

    def _answer(self, move: Move, utterance_id: int | None) -> None:
        answer = "accepted" if move.aim == Aim.ACCEPT else "declined"
        self.buffer.update("invitations", move.invitation_id, {"answer": answer, "answer_utterance_id": utterance_id})

    def end(self, conv: Conversation, reason: str, leaving: str | None = None) -> None:
        """Close it now; both sides' recaps (summary memory, relationship) follow in this tick's recap
        phase. ``leaving``: a participant who leaves the town now, so the ``conversation_end`` event is
        the other's (the one who left has no row from this tick on); otherwise the first participant's."""
        conv.ended_reason = reason
        conv.ended_tick, conv.ended_at = self.moment.tick, self.moment.now
        names = {a: self.people[a].persona.name for a in conv.participants}
        self.ended.append(conv)
        for person_id in conv.participants:
            person = self.people[person_id]
            person.conversation_id = None
            if person.status == Status.TALKING:
                person.status = person.resume_status
        first = self.people[conv.participants[0] if leaving is None else conv.partner(leaving)]
        self.recorder.event(first, EventKind.CONVERSATION_END, f"{' and '.join(names.values())} stop talking ({reason})",
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
