"""FakeMind: the ``Mind`` protocol over plain in-memory parts, so a cognition phase can be tested
in milliseconds with no model, run.db, embedder, event loop batching or LLM.

Answers come from ``answers``: purpose -> a function (schema, default) -> value (the default when
no function is given; for a rating, (options, default) -> the rating), so a test says exactly
what "the model" answers. Retrieval returns the
person's newest memories (no vectors). Everything a phase records lands in plain lists.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from simulation.agents import AgentState
from simulation.cognition import MindSettings, Phase, TickNotes
from simulation.core import Aim, Happening, MemoryKind, Move, PlaceEvent, Provenance, Source, Status
from simulation.llm.backend import estimate_tokens
from simulation.llm.client import Answer, Rating
from simulation.memory import MemoryNode, MemoryStream, MemoryView
from simulation.world.conversations import Conversation
from simulation.world.relationships import SocialGraph, Tie

SETTINGS = MindSettings(tick_minutes=10, attention_bandwidth=3, conversation_cooldown=timedelta(minutes=60),
                             max_conversation_turns=4, reflection_threshold=30.0, context_tokens=2048)


@dataclass
class Asked:
    person: str
    purpose: str
    messages: list[dict[str, str]]


@dataclass
class FakeMind:
    people_by_id: dict[str, AgentState]
    now: datetime
    tick: int = 0
    places: dict[str, str] = field(default_factory=lambda: {"home_a": "Home A", "cafe": "Cafe"})
    hub: str = "cafe"
    settings: MindSettings = SETTINGS
    kinds: dict[str, str] = field(default_factory=dict)
    """place id -> kind (default: "home" for ids starting with home, else the id itself)."""
    known: list[Happening] = field(default_factory=list)
    """What every person knows will happen (``happenings``)."""
    answers: dict[str, Callable[[type, Any], Any]] = field(default_factory=dict)
    events_at: list[PlaceEvent] = field(default_factory=list)
    notes: TickNotes = field(default_factory=TickNotes)
    asked: list[Asked] = field(default_factory=list)
    recorded: list[tuple[str | None, str, str]] = field(default_factory=list)
    plans: list[tuple[str, list[Any], bool]] = field(default_factory=list)
    schedules: list[tuple[str, str, list[dict[str, Any]]]] = field(default_factory=list)
    streams: dict[str, MemoryStream] = field(default_factory=dict)
    nodes: dict[int, MemoryNode] = field(default_factory=dict)
    conversations: dict[int, Conversation] = field(default_factory=dict)
    ended: list[Conversation] = field(default_factory=list)
    said: list[tuple[str, Move, str]] = field(default_factory=list)
    """(speaker, move, words) of every line said through ``say``."""
    aware_of: dict[str, set[str]] = field(default_factory=dict)
    """fact id -> who is aware of it (``aware``)."""
    facts: dict[str, tuple[str, str]] = field(default_factory=dict)
    """fact id -> (name, text) (``fact_name``, ``fact_text``)."""
    whispered: list[tuple[str, str, str | None, dict[str, Any]]] = field(default_factory=list)
    """(person, text, fact, data) of every ``whisper``."""
    tokens: Callable[[list[dict[str, str]]], int] = estimate_tokens
    """How ``count_tokens`` counts a prompt (the estimate a backend without a tokenizer gets)."""
    counted: int = 0
    """Prompts counted through ``count_tokens``."""

    def __post_init__(self) -> None:
        self.social = SocialGraph(sorted(self.people_by_id))

    # time and places
    @property
    def place_ids(self) -> tuple[str, ...]:
        return tuple(self.places)

    def place_name(self, place: str) -> str:
        return self.places[place]

    def place_kind(self, place: str) -> str:
        return self.kinds.get(place, "home" if place.startswith("home") else place)

    def objects(self, place: str) -> list[str]:
        return []

    # people
    def person(self, person_id: str) -> AgentState:
        return self.people_by_id[person_id]

    def people(self) -> Sequence[AgentState]:
        return [self.people_by_id[k] for k in sorted(self.people_by_id)]

    def here(self, person: AgentState) -> list[AgentState]:
        return [p for p in self.people() if p.place == person.place]

    def doing(self, person: AgentState) -> str:
        return person.doing("someone", self.places.get(person.action.place) if person.action else None)

    def tie(self, person_id: str, other_id: str) -> Tie | None:
        return self.social.tie(person_id, other_id)

    def after_conversation(self, person_id: str, other_id: str, sentiment: float, view: str) -> None:
        self.social.after_conversation(person_id, other_id, sentiment, view)

    def happenings(self, person_id: str) -> list[Happening]:
        return list(self.known)

    # the LLM
    async def ask(self, me, messages, schema, *, default, purpose, max_tokens, check=None, script=None,
                  temperature=None):
        self.asked.append(Asked(me.id, str(purpose), messages))
        answer = self.answers.get(str(purpose))
        value = default if answer is None else answer(schema, default)
        if not isinstance(value, schema):
            value = schema.model_validate(value)
        ok = answer is not None and (check is None or check(value) is None)
        rejected = value if answer is not None and not ok else None
        return Answer(value if ok else default, ok, len(self.asked), rejected)

    async def ask_rating(self, me, messages, options, values, *, default, purpose):
        """``answers[purpose](options, default)`` gives the rating's value (the default without one), or
        the options' probabilities as a list."""
        self.asked.append(Asked(me.id, str(purpose), messages))
        answer = self.answers.get(str(purpose))
        if answer is None:
            return Rating(default, [], False, call_id=len(self.asked))
        given = answer(options, default)
        if isinstance(given, (list, tuple)):  # the options' probabilities
            return Rating(sum(p * v for p, v in zip(given, values, strict=True)), list(given), True,
                          call_id=len(self.asked))
        return Rating(float(given), [], True, call_id=len(self.asked))

    async def baseline(self, me, messages, options):
        """No content-free calibration: the fake's ratings are the choices it is told to make."""
        return None

    def count_tokens(self, me, messages: list[dict[str, str]]) -> int:
        self.counted += 1
        return self.tokens(messages)

    def settings_of(self, me) -> MindSettings:
        """Everyone asks one model here."""
        return self.settings

    def choosing(self, *words: str) -> Callable[[Sequence[str], float], float]:
        """An ``answers["aim"]`` that picks, of the choices the last prompt listed, the first one
        starting with the first of ``words`` offered (then the next word...), else the first choice."""
        def pick(options: Sequence[str], default: float) -> float:
            listed = re.findall(r"^(\d+)\. (.*)$", self.asked[-1].messages[-1]["content"], re.MULTILINE)
            for word in words:
                for number, text in listed:
                    if text.startswith(word):
                        return float(number)
            return 1.0
        return pick

    # memory
    def stream(self, person_id: str) -> MemoryStream:
        """The person's writable stream (the fake's own, for tests that set a counter up)."""
        return self.streams.setdefault(person_id, MemoryStream())

    def memories(self, person_id: str) -> MemoryView:
        return MemoryView(self.stream(person_id))

    def memory(self, memory_id: int) -> MemoryNode:
        return self.nodes[memory_id]

    def remember(self, person_id, kind, text, provenance, importance=None, evidence=(), depth=0) -> MemoryNode:
        node = MemoryNode(id=len(self.nodes) + 1, agent_id=person_id, kind=str(kind), text=text, tick=self.tick,
                          created=self.now, last_accessed=self.now, importance=importance,
                          evidence=tuple(evidence), depth=depth, provenance=provenance)
        self.nodes[node.id] = node
        self.stream(person_id).add(node)
        return node

    def rate(self, node: MemoryNode, importance: float) -> None:
        self.stream(node.agent_id).rate(node, float(importance))

    def reflected(self, person_id: str) -> None:
        self.stream(person_id).reflected()

    async def retrieve(self, person_id: str, query: str, purpose: str, exclude: Iterable[int] = ()) -> list[MemoryNode]:
        skip = set(exclude)
        return [n for n in self.memories(person_id).nodes if n.id not in skip][-5:]

    async def retrieve_many(self, person_id: str, queries: Sequence[str], purpose: str) -> list[list[MemoryNode]]:
        return [await self.retrieve(person_id, q, purpose) for q in queries]

    # what happens around
    def place_events(self, place: str) -> list[PlaceEvent]:
        return [e for e in self.events_at if e.place == place]

    def conversation(self, conversation_id: int) -> Conversation:
        return self.conversations[conversation_id]

    def open_conversations(self) -> list[Conversation]:
        return sorted(self.conversations.values(), key=lambda c: c.id)

    def take_ended_conversations(self) -> list[Conversation]:
        ended, self.ended = self.ended, []
        return ended

    def start_conversation(self, a: AgentState, b: AgentState, call_id) -> Conversation | None:
        if not (a.free and b.free and a.place == b.place):
            return None
        conv = Conversation(id=len(self.conversations) + len(self.ended) + 1, place=a.place,
                            participants=(a.id, b.id), started_tick=self.tick, started_at=self.now, next_speaker=a.id)
        self.conversations[conv.id] = conv
        for p in (a, b):
            p.resume_status = Status.ACTING if p.status == Status.ACTING else Status.IDLE
            p.status, p.conversation_id = Status.TALKING, conv.id
        return conv

    def say(self, conv: Conversation, speaker: AgentState, text: str, call_id, move: Move) -> int:
        """The line and its move, and the bookkeeping ``Conversations.say`` does on the people
        (news told, invitations made and accepted); no memories or rows."""
        listener = self.person(conv.partner(speaker.id))
        conv.lines.append((speaker.id, text))
        self.said.append((speaker.id, move, text))
        if move.memory_id is not None:
            speaker.told.setdefault(listener.id, []).append(move.memory_id)
        if move.aim == Aim.INVITE and move.happening is not None:
            speaker.invited.setdefault(listener.id, []).append(move.happening.fact)
            move = replace(move, invitation_id=len(self.said))
        if move.aim == Aim.ACCEPT and move.happening is not None:
            speaker.going.append(move.happening)
        conv.moves.append(move)
        return len(self.said)

    def end_conversation(self, conv: Conversation, reason: str) -> None:
        conv.ended_reason = reason
        for pid in conv.participants:
            person = self.person(pid)
            person.status, person.conversation_id = person.resume_status, None
        self.ended.append(self.conversations.pop(conv.id))

    # recording
    def record(self, who, kind, text, data=None):
        self.recorded.append((who.id if who else None, kind, text))
        return len(self.recorded)

    def whisper(self, person: AgentState, text: str, fact: str | None, data: dict[str, Any]) -> int:
        self.whispered.append((person.id, text, fact, dict(data)))
        source = Source.WHISPERED if fact else Source.DIRECTED
        node = self.remember(person.id, MemoryKind.THOUGHT, text, Provenance(source, fact=fact))
        if fact:
            person.news.append(node.id)
        return node.id

    def aware(self, fact_id: str) -> set[str]:
        return set(self.aware_of.get(fact_id, set()))

    def fact_name(self, fact_id: str) -> str:
        return self.facts.get(fact_id, (fact_id.replace("_", " "), ""))[0]

    def fact_text(self, fact_id: str) -> str:
        return self.facts.get(fact_id, ("", ""))[1]

    def record_plan(self, who, items, ok) -> None:
        self.plans.append((who.id, list(items), ok))

    def record_schedule(self, who, level, parent, items, ok) -> None:
        self.schedules.append((who.id, level, items))

    # running a phase as the model does
    def run(self, phase: Phase) -> list[str]:
        """Select, run everyone together, finish; returns who ran."""
        chosen = phase.select(self)

        async def together() -> None:
            await asyncio.gather(*(phase.run(me, self) for me in chosen))

        asyncio.run(together())
        phase.finish(self)
        return [me.id for me in chosen]
