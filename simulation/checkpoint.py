"""The engine's state between ticks, as JSON in run.db, so a run can be resumed exactly.

run.db's tables record what happened; they do not say what an agent was in the middle of
(the rest of a walk, the hour's queued steps, an open conversation, who it saw when).
``capture`` writes that state after every tick, in the tick's own transaction, and
``restore`` puts it back into a freshly built model; the memory stream and its FAISS index
are rebuilt from the ``memories`` and ``embeddings`` rows (``TownMemory.from_db``). A model
restored from tick N's state steps on exactly as the uninterrupted one would.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from simulation.agent import Action, HourBlock
from simulation.cognition.schemas import PlanItem
from simulation.conversation import Conversation

if TYPE_CHECKING:
    from simulation.model import TownModel

STATE_VERSION = 1


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentState(_State):
    place: str
    status: str
    resume_status: str
    action: Action | None
    route: list[str]
    leg_left: float
    plan: list[dict[str, Any]]
    plan_day: date | None
    hours: dict[int, tuple[str, str]]
    steps: list[Action]
    steps_key: tuple[date, int] | None
    replan: str | None
    conversation_id: int | None
    last_seen: dict[str, int]
    last_talk: dict[str, datetime]
    since_reflection: float
    reflected_upto: int = 0


class ConversationState(_State):
    id: int
    place: str
    participants: tuple[str, str]
    started_tick: int
    started_at: datetime
    lines: list[tuple[str, str]]
    next_speaker: str
    memory_ids: dict[str, list[int]]


class PlaceEventState(_State):
    id: int
    place: str
    text: str
    until: datetime


class ModelState(_State):
    """Everything ``TownModel`` holds between ticks that run.db's other tables do not."""

    version: int = STATE_VERSION
    tick: int
    """The last committed tick; the resumed model steps ``tick + 1`` next."""
    agents: dict[str, AgentState]
    conversations: list[ConversationState]
    place_events: list[PlaceEventState]
    scheduled: list[int]
    """Indexes into the scenario's ``events`` not yet delivered."""
    edges: list[tuple[str, str, int, float, str]]
    """The social graph: (agent, other, conversations, sentiment, view)."""
    random_state: list[Any]
    numpy_state: dict[str, Any]


def capture(model: TownModel) -> str:
    """The model's state after the tick it just finished, as JSON."""
    agents = {}
    for a in model.order:
        agents[a.agent_id] = AgentState(
            place=a.place, status=a.status, resume_status=a.resume_status,
            action=a.action, route=list(a.route), leg_left=a.leg_left,
            plan=[item.model_dump() for item in a.plan], plan_day=a.plan_day,
            hours={h: (b.activity, b.place) for h, b in a.hours.items()},
            steps=list(a.steps), steps_key=a.steps_key, replan=a.replan,
            conversation_id=a.conversation.id if a.conversation else None,
            last_seen=dict(a.last_seen), last_talk=dict(a.last_talk), since_reflection=a.memory.since_reflection,
            reflected_upto=a.memory.reflected_upto,
        )
    conversations = [
        ConversationState(id=c.id, place=c.place, participants=c.participants, started_tick=c.started_tick,
                          started_at=c.started_at, lines=list(c.lines), next_speaker=c.next_speaker,
                          memory_ids={k: list(v) for k, v in c.memory_ids.items()})
        for c in sorted(model.conversations.values(), key=lambda c: c.id)
    ]
    edges = [(a, b, d["conversations"], d["sentiment"], d["view"]) for a, b, d in model.social.graph.edges(data=True)]
    version, internal, gauss = model.random.getstate()
    state = ModelState(
        tick=model.tick, agents=agents, conversations=conversations,
        place_events=[PlaceEventState(id=e.id, place=e.place, text=e.text, until=e.until) for e in model.place_events],
        scheduled=[index for _, index, _ in model.scheduled], edges=edges,
        random_state=[version, list(internal), gauss], numpy_state=model.rng.bit_generator.state,
    )
    return state.model_dump_json()


def restore(model: TownModel, text: str) -> None:
    """Put the state captured after a tick back into a model built (not seeded) for the same run."""
    from simulation.model import ActivePlaceEvent

    state = ModelState.model_validate_json(text)
    if state.version != STATE_VERSION:
        raise ValueError(f"resume state version {state.version}, this Agora reads {STATE_VERSION}")
    model.tick = state.tick + 1
    model.now = model.clock.time_at(model.tick)
    model.memory.set_time(model.tick, model.now)
    model.conversations = {
        c.id: Conversation(id=c.id, place=c.place, participants=c.participants, started_tick=c.started_tick,
                           started_at=c.started_at, lines=list(c.lines), next_speaker=c.next_speaker,
                           memory_ids={k: list(v) for k, v in c.memory_ids.items()})
        for c in state.conversations
    }
    model.place_events = [ActivePlaceEvent(e.id, e.place, e.text, e.until) for e in state.place_events]
    pending = set(state.scheduled)
    model.scheduled = [item for item in model.scheduled if item[1] in pending]
    for a, b, talks, sentiment, view in state.edges:
        model.social.graph.add_edge(a, b, conversations=talks, sentiment=sentiment, view=view)
    version, internal, gauss = state.random_state
    model.random.setstate((version, tuple(internal), gauss))
    model.rng.bit_generator.state = state.numpy_state
    for agent_id, s in state.agents.items():
        agent = model.people[agent_id]
        agent.set_place(s.place)
        agent.status, agent.resume_status = s.status, s.resume_status
        agent.action = s.action
        agent.route, agent.leg_left = list(s.route), s.leg_left
        agent.plan = [PlanItem.model_validate(item) for item in s.plan]
        agent.plan_day = s.plan_day
        agent.hours = {h: HourBlock(h, activity, place) for h, (activity, place) in s.hours.items()}
        agent.steps = list(s.steps)
        agent.steps_key = s.steps_key
        agent.replan = s.replan
        agent.conversation = model.conversations[s.conversation_id] if s.conversation_id is not None else None
        agent.last_seen = dict(s.last_seen)
        agent.last_talk = dict(s.last_talk)
        agent.memory.since_reflection = s.since_reflection
        agent.memory.reflected_upto = s.reflected_upto

