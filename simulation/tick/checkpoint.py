"""The engine's state between ticks, as JSON in run.db, so a run can be resumed exactly.

run.db's tables record what happened; they do not say what a person was in the middle of
(the rest of a walk, the hour's queued steps, an open conversation, who they saw when).
``capture`` writes that state after every tick, in the tick's own transaction, and
``restore`` puts it back into a freshly built model; the memory stream and its FAISS index
are rebuilt from the ``memories`` and ``embeddings`` rows (``TownMemory.from_db``). A model
restored from tick N's state steps on exactly as the uninterrupted one would.

This module is the format, not the parts: each part of the engine says what its state is and
takes it back itself (``TownModel.state`` / ``restore`` gather them: a person's
``AgentState``, each memory stream's reflection counters, the social graph, the open
conversations, the place events under way, the random generators, and any cognition phase
that keeps something from tick to tick, ``Phase.state``), so a part that grows a field needs
no line here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from simulation.core import PlaceEvent
from simulation.memory.stream import StreamState
from simulation.world.conversations import Conversation

if TYPE_CHECKING:
    from simulation.tick.model import TownModel

STATE_VERSION = 2
"""2: agent state stored whole (``AgentState``); 1 (before): field by field. (``phases`` was added
later with a default, so version 2 states written before it still load.)"""


class ModelState(BaseModel):
    """Everything ``TownModel`` holds between ticks that run.db's other tables do not."""

    model_config = ConfigDict(extra="forbid")

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
    phases: dict[str, Any] = Field(default_factory=dict)
    """Phase name -> what that phase keeps between ticks (``Phase.state``; phases that keep nothing
    are absent)."""
    baselines: dict[str, list[float] | None] = Field(default_factory=dict)
    """The content-free questions answered so far (``TownMind.baseline``), so a resumed run does not
    ask them again."""


def capture(model: TownModel) -> str:
    """The model's state after the tick it just finished, as JSON."""
    return model.state().model_dump_json()


def restore(model: TownModel, text: str) -> None:
    """Put the state captured after a tick back into a model built (not seeded) for the same run."""
    state = ModelState.model_validate_json(text)
    if state.version != STATE_VERSION:
        raise ValueError(f"resume state version {state.version}, this Agora reads {STATE_VERSION}")
    model.restore(state)
