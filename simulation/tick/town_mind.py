"""TownMind: the ``Mind`` a run's cognition phases work through, over the model's parts.

It holds the parts themselves (the LLM client, the town's memory, the map, the social graph,
the conversations, the recorder, the shared ``Moment``), not the model, so what cognition can
reach is exactly what this class forwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from simulation.agents import AgentState
from simulation.cognition.mind import MindSettings, TickNotes
from simulation.core import (EventKind, Happening, MemoryKind, Moment, Move, PlaceEvent, PlanItem, Provenance, Purpose,
                             Source)
from simulation.llm.client import Answer, LLMClient, Rating
from simulation.memory import MemoryNode, MemoryView, TownMemory
from simulation.record.recorder import Recorder
from simulation.world.conversations import Conversation, Conversations
from simulation.world.props import Props
from simulation.world.relationships import SocialGraph, Tie
from simulation.world.town_map import TownMap

if TYPE_CHECKING:
    from simulation.agents import PersonaAgent
    from simulation.llm.settings import LLMSettings

T = TypeVar("T", bound=BaseModel)


class TownMind:
    def __init__(self, *, settings: MindSettings, moment: Moment, llm: LLMClient, memory: TownMemory,
                 town: TownMap, hub: str, social: SocialGraph, agents: dict[str, PersonaAgent],
                 order: list[AgentState], conversations: Conversations, recorder: Recorder,
                 place_events: Callable[[], list[PlaceEvent]],
                 happenings: Callable[[str], list[Happening]] = lambda _person: [],
                 models: Mapping[str, LLMSettings] | None = None,
                 props: Props | None = None,
                 aware: Callable[[str], set[str]] = lambda _fact: set(),
                 facts: Callable[[], Mapping[str, tuple[str, str]]] = dict):
        """``models``: each model group's LLM settings (``llm.groups``), whose context window and
        temperature hold for its people (``settings_of``); whose people they are, the client's
        routes say (``LLMClient.route``). ``aware``: who is aware of a fact (the provenance
        tracker); ``facts``: fact id -> (name, text) as the facts stand now."""
        self.settings = settings
        self.notes = TickNotes()
        self._moment = moment
        self._llm = llm
        self._memory = memory
        self._town = town
        self._hub = hub
        self._place_ids = tuple(town.places)
        self._social = social
        self._agents = agents
        self._order = order
        self._conversations = conversations
        self._recorder = recorder
        self._place_events = place_events
        self._happenings = happenings
        self._aware = aware
        self._props = props if props is not None else Props(town.places.values())
        self._facts = facts
        self._baselines: dict[str, list[float] | None] = {}
        self._asking: dict[str, asyncio.Future[list[float] | None]] = {}
        self._models = dict(models or {})
        self._group_settings: dict[str, tuple[MindSettings, MindSettings]] = {}

    def settings_of(self, me: AgentState) -> MindSettings:
        """``settings`` with the context window and temperature of ``me``'s model group."""
        group = self._llm.route(me.id).group
        if group is None:
            return self.settings
        made = self._group_settings.get(group)
        if made is None or made[0] is not self.settings:  # a setting event replaced ``settings``
            llm = self._models[group]
            made = (self.settings, replace(self.settings, context_tokens=llm.context_tokens,
                                           temperature=llm.temperature))
            self._group_settings[group] = made
        return made[1]

    # time and places
    @property
    def tick(self) -> int:
        return self._moment.tick

    @property
    def now(self) -> datetime:
        return self._moment.now

    @property
    def place_ids(self) -> tuple[str, ...]:
        return self._place_ids

    @property
    def hub(self) -> str:
        return self._hub

    def place_name(self, place: str) -> str:
        return self._town.name(place)

    def place_kind(self, place: str) -> str:
        return self._town.places[place].kind

    def objects(self, place: str) -> list[str]:
        return self._props.shown(place)

    # people
    def person(self, person_id: str) -> AgentState:
        return self._agents[person_id].state

    def people(self) -> Sequence[AgentState]:
        return self._order

    def set_people(self, order: list[AgentState]) -> None:
        """Who is in the town now, in id order: after someone arrived or left (``TownModel``).
        ``person`` still finds whoever left, by id, for what others remember of them."""
        self._order = order

    def here(self, person: AgentState) -> list[AgentState]:
        """Read from the Mesa cell the person's agent occupies."""
        cell = self._agents[person.id].cell
        return sorted((a.state for a in cell.agents), key=lambda s: s.id)

    def doing(self, person: AgentState) -> str:
        partner = None
        if person.conversation_id is not None and person.conversation_id in self._conversations.open:
            conv = self._conversations.get(person.conversation_id)
            partner = self.person(conv.partner(person.id)).persona.name
        destination = self._town.name(person.action.place) if person.action else None
        return person.doing(partner, destination)

    def tie(self, person_id: str, other_id: str) -> Tie | None:
        return self._social.tie(person_id, other_id)

    def after_conversation(self, person_id: str, other_id: str, sentiment: float, view: str) -> None:
        self._social.after_conversation(person_id, other_id, sentiment, view)

    def happenings(self, person_id: str) -> list[Happening]:
        return self._happenings(person_id)

    # the LLM
    async def ask(self, me: AgentState, messages: list[dict[str, str]], schema: type[T], *, default: T,
                  purpose: str, max_tokens: int, check: Callable[[T], str | None] | None = None,
                  script: str | None = None, temperature: float | None = None) -> Answer[T]:
        return await self._llm.ask(messages, schema, default=default, purpose=purpose, agent_id=me.id,
                                   tick=self._moment.tick, max_tokens=max_tokens, check=check, script=script,
                                   temperature=temperature)

    async def ask_rating(self, me: AgentState, messages: list[dict[str, str]], options: Sequence[str],
                         values: Sequence[float], *, default: float, purpose: str) -> Rating:
        return await self._llm.rate(messages, options, values, default=default, purpose=purpose, agent_id=me.id,
                                    tick=self._moment.tick)

    async def baseline(self, me: AgentState, messages: list[dict[str, str]],
                       options: Sequence[str]) -> list[float] | None:
        route = self._llm.route(me.id)
        if not self.settings.calibrate or not route.reads_probabilities:
            return None
        # A model's habit is its own: each model group asks the question of its model. (The
        # llm block's own keeps the key it always had, so older checkpoints resume unchanged.)
        question = [messages, list(options)] if route.group is None else [route.group, messages, list(options)]
        key = json.dumps(question, sort_keys=True)
        if key in self._baselines:
            return self._baselines[key]
        if key not in self._asking:  # one question for everyone who needs it at once
            self._asking[key] = asyncio.ensure_future(self._ask_baseline(messages, options, route.group))
        value = await self._asking[key]
        self._baselines[key] = value
        self._asking.pop(key, None)
        return value

    def baselines(self) -> dict[str, list[float] | None]:
        """The content-free questions answered so far (question -> probabilities), for the checkpoint."""
        return dict(self._baselines)

    def restore_baselines(self, saved: dict[str, list[float] | None]) -> None:
        """Take back what ``baselines`` saved: a resumed run asks none of them again."""
        self._baselines.update(saved)

    async def _ask_baseline(self, messages: list[dict[str, str]], options: Sequence[str],
                            group: str | None) -> list[float] | None:
        # No agent and no tick: the question is the same whoever asks it first, so a resumed run
        # asks it again word for word (and the replay cache answers it).
        rating = await self._llm.rate(messages, options, [float(i) for i in range(len(options))], default=0.0,
                                      purpose=Purpose.CALIBRATE, agent_id=None, tick=None, group=group)
        return rating.probabilities if rating.ok and not rating.sampled else None

    def count_tokens(self, me: AgentState, messages: list[dict[str, str]]) -> int:
        return self._llm.count_tokens(messages, me.id)

    # memory
    def memories(self, person_id: str) -> MemoryView:
        return MemoryView(self._memory.stream(person_id))

    def memory(self, memory_id: int) -> MemoryNode:
        return self._memory.nodes[memory_id]

    def remember(self, person_id: str, kind: MemoryKind, text: str, provenance: Provenance,
                 importance: float | None = None, evidence: tuple[int, ...] = (), depth: int = 0) -> MemoryNode:
        return self._memory.add(person_id, kind, text, provenance, importance=importance, evidence=evidence,
                                depth=depth)

    def rate(self, node: MemoryNode, importance: float) -> None:
        self._memory.rate(node, importance)

    def reflected(self, person_id: str) -> None:
        self._memory.stream(person_id).reflected()

    async def retrieve(self, person_id: str, query: str, purpose: str,
                       exclude: Iterable[int] = ()) -> list[MemoryNode]:
        return await self._memory.retrieve(person_id, query, purpose, exclude=exclude)

    async def retrieve_many(self, person_id: str, queries: Sequence[str], purpose: str) -> list[list[MemoryNode]]:
        return await self._memory.retrieve_many(person_id, queries, purpose)

    def backstory_similarity(self, query: str, by_sentence: bool = False) -> float:
        return self._memory.backstory_similarity(query, by_sentence=by_sentence)

    def recognised(self, person_id: str, query: str, threshold: float, purpose: str,
                   by_sentence: bool = False) -> list[MemoryNode]:
        return self._memory.recognised(person_id, query, threshold, purpose, by_sentence=by_sentence)

    # what happens around
    def place_events(self, place: str) -> list[PlaceEvent]:
        return [e for e in self._place_events() if e.place == place]

    def conversation(self, conversation_id: int) -> Conversation:
        return self._conversations.get(conversation_id)

    def open_conversations(self) -> list[Conversation]:
        return sorted((c for c in self._conversations.open.values() if c.open), key=lambda c: c.id)

    def take_ended_conversations(self) -> list[Conversation]:
        return self._conversations.take_ended()

    def start_conversation(self, a: AgentState, b: AgentState, call_id: int | None) -> Conversation | None:
        return self._conversations.start(a, b, call_id)

    def say(self, conv: Conversation, speaker: AgentState, text: str, call_id: int | None, move: Move) -> int | None:
        return self._conversations.say(conv, speaker, text, call_id, move)

    def end_conversation(self, conv: Conversation, reason: str) -> None:
        self._conversations.end(conv, reason)

    # recording
    def record(self, who: AgentState | None, kind: EventKind, text: str, data: dict[str, Any] | None = None) -> int | None:
        return self._recorder.event(who, kind, text, data)

    def whisper(self, person: AgentState, text: str, fact: str | None, data: dict[str, Any]) -> int:
        event_id = self._recorder.event(person, EventKind.NUDGE, text, {**data, **({"fact": fact} if fact else {})})
        source = Source.WHISPERED if fact else Source.DIRECTED
        node = self._memory.add(person.id, MemoryKind.THOUGHT, text, Provenance(source, event_id=event_id, fact=fact))
        if fact:  # the fact itself, brought into a town that did not know it: news to pass on
            person.news.append(node.id)
        return node.id

    def aware(self, fact_id: str) -> set[str]:
        return set(self._aware(fact_id))

    def fact_name(self, fact_id: str) -> str:
        return self._facts().get(fact_id, (fact_id.replace("_", " "), ""))[0]

    def fact_text(self, fact_id: str) -> str:
        return self._facts().get(fact_id, ("", ""))[1]

    def record_plan(self, who: AgentState, items: list[PlanItem], ok: bool) -> None:
        self._recorder.plan(who, items, ok)

    def record_schedule(self, who: AgentState, level: str, parent: str, items: list[dict[str, Any]],
                        ok: bool) -> None:
        self._recorder.schedule(who, level, parent, items, ok)
