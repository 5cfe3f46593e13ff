"""The engine's state between ticks, as JSON in run.db, so a run can be resumed exactly.

run.db's tables record what happened; they do not say what a person was in the middle of
(the rest of a walk, the hour's queued steps, an open conversation, who they saw when).
``capture`` writes that state after every tick, in the tick's own transaction, and
``restore`` puts it back into a freshly built model; the memory stream and its FAISS index
are rebuilt from the ``memories`` and ``embeddings`` rows (``TownMemory.from_db``). A model
restored from tick N's state steps on exactly as the uninterrupted one would.

Each part's state is stored whole, as the part defines it: a person's ``AgentState`` (every
field that changes is a field there), each memory stream's reflection counters, the social
graph's edges, the open conversations, the place events under way, the random generators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from simulation.agents import AgentState
from simulation.conversation import Conversation
from simulation.core import PlaceEvent

if TYPE_CHECKING:
    from simulation.model import TownModel

STATE_VERSION = 2
"""2: agent state stored whole (``AgentState``); 1 (before): field by field."""


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StreamState(_State):
    since_reflection: float
    reflected_upto: int


class ModelState(_State):
    """Everything ``TownModel`` holds between ticks that run.db's other tables do not."""

    version: int = STATE_VERSION
    tick: int
    """The last committed tick; the resumed model steps ``tick + 1`` next."""
    agents: dict[str, str]
    """Person id -> ``AgentState.stored()``."""
    streams: dict[str, StreamState]
    conversations: list[Conversation]
    """The open ones, whole (a dataclass pydantic stores field by field, so a new field needs no code here)."""
    place_events: list[PlaceEvent]
    scheduled: list[int]
    """Indexes into the scenario's ``events`` not yet delivered."""
    edges: list[tuple[str, str, int, float, str]]
    """The social graph: (person, other, conversations, sentiment, view)."""
    random_state: list[Any]
    numpy_state: dict[str, Any]


def capture(model: TownModel) -> str:
    """The model's state after the tick it just finished, as JSON."""
    streams = {a.agent_id: model.memory.stream(a.agent_id) for a in model.order}
    conversations = sorted(model.conversations.open.values(), key=lambda c: c.id)
    edges = [(a, b, d["conversations"], d["sentiment"], d["view"]) for a, b, d in model.social.graph.edges(data=True)]
    version, internal, gauss = model.random.getstate()
    state = ModelState(
        tick=model.tick, agents={a.agent_id: a.state.stored() for a in model.order},
        streams={k: StreamState(since_reflection=s.since_reflection, reflected_upto=s.reflected_upto)
                 for k, s in streams.items()},
        conversations=conversations, place_events=list(model.place_events),
        scheduled=[index for _, index, _ in model.scheduled], edges=edges,
        random_state=[version, list(internal), gauss], numpy_state=model.rng.bit_generator.state,
    )
    return state.model_dump_json()


def restore(model: TownModel, text: str) -> None:
    """Put the state captured after a tick back into a model built (not seeded) for the same run."""
    state = ModelState.model_validate_json(text)
    if state.version != STATE_VERSION:
        raise ValueError(f"resume state version {state.version}, this Agora reads {STATE_VERSION}")
    model._set_tick(state.tick + 1)
    model.conversations.open = {c.id: c for c in state.conversations}
    model.place_events = list(state.place_events)
    pending = set(state.scheduled)
    model.scheduled = [item for item in model.scheduled if item[1] in pending]
    for a, b, talks, sentiment, view in state.edges:
        model.social.graph.add_edge(a, b, conversations=talks, sentiment=sentiment, view=view)
    version, internal, gauss = state.random_state
    model.random.setstate((version, tuple(internal), gauss))
    model.rng.bit_generator.state = state.numpy_state
    for agent_id, stored in state.agents.items():
        agent = model.people[agent_id]
        restored = AgentState.restored(stored, agent.state)
        for name in AgentState.model_fields:  # into the same object: the mind and conversations hold it
            setattr(agent.state, name, getattr(restored, name))
        agent.move_to(restored.place)
        stream = model.memory.stream(agent_id)
        stream.since_reflection = state.streams[agent_id].since_reflection
        stream.reflected_upto = state.streams[agent_id].reflected_upto
