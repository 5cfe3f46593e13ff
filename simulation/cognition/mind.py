"""Mind: the narrow context a cognition phase works through, instead of the whole model.

A phase gets one person's ``AgentState`` and a ``Mind``; everything outside the person — asking
the LLM, the memory stream and retrieval, the time, the places, the people around, the ties
between them, conversations, and recording what happened — goes through these few members.
That keeps each faculty testable with a fake (``tests/fake_mind.py`` runs the phases in
milliseconds with no model, store or LLM) and keeps cognition from depending on how the town
is stepped (as Concordia's components get their model, memory and clock injected).

``TownMind`` (``simulation/tick/town_mind.py``) is the implementation a run uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from simulation.core import EventKind, Happening, MemoryKind, Move, PlanItem, Provenance
from simulation.errors import RunError
from simulation.scenario.story import Story

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.llm.client import Answer, Rating
    from simulation.memory import MemoryNode, MemoryView
    from simulation.world.conversations import Conversation
    from simulation.world.relationships import Tie

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class MindSettings:
    """The numbers cognition reads, gathered once from the scenario's clock, memory, cognition and
    llm sections (``RunSettings.cognition``). The file's own ``cognition:`` block is another thing,
    ``simulation.scenario.CognitionSettings``: what a user writes, checked with its line."""

    tick_minutes: int
    attention_bandwidth: int
    conversation_cooldown: timedelta
    max_conversation_turns: int
    reflection_threshold: float
    context_tokens: int
    """The context window of the ``llm:`` block's model (a person in a model group: ``Mind.settings_of``)."""
    min_conversation_turns: int = 4
    """Goodbye is offered from this line on."""
    reactions_per_hour: int = 3
    """How often a person may stop for someone they see in a game hour."""
    choices: str = "sample"
    """How a scored choice is made: drawn from the options' probabilities ("sample"), or the most
    probable ("argmax")."""
    temperature: float = 0.7
    """The temperature a scored choice is drawn at (the scenario's ``llm.temperature``; a person in a
    model group: the group's, ``Mind.settings_of``)."""
    calibrate: bool = True
    """Whether a scored choice's probabilities are divided by a content-free question's
    (``cognition.calibrate``)."""
    talk_prior: float = 1.0
    """How strongly a person's extraversion and tie lean the choice to start a conversation
    (``cognition.talk_prior``; ``cognition.sociability``)."""
    seek: bool = True
    """Whether a person with untold news may choose to go and find someone to tell (``cognition.seek``)."""
    planning: bool = True
    """False: nobody is asked for a day's plan; everyone keeps their usual day (``cognition.planning``)."""
    recognition: float | None = None
    """How like a probe question a person's best memory must be for them to recognise it
    (``cognition.recognition``); None: the model is asked whether they have heard of it."""
    recognition_unit: str = "sentence"
    """What recognition compares a probe question with: each sentence of a memory, or the whole
    memory (``cognition.recognition_unit``)."""
    recognition_margin: float | None = None
    """Recognition relative to the question: how much more like it than the town's seeded memories
    (``Mind.backstory_similarity``) a person's memory must be (``cognition.recognition_margin``)."""
    probe_temperature: float | None = 0.0
    """The temperature a probe's answer is asked at (``cognition.probe_temperature``); None: the
    model's own, as every other question."""
    story: Story = field(default_factory=Story)
    """The scenario's beats and whether a director keeps the town on them (``cognition.director``)."""
    moods: bool = False
    """Whether people have moods that what happens to them moves (``cognition.moods``; ``cognition.mood``)."""
    live_context: bool = False
    """Whether questions show the person's working memory for the day, one block growing a batch
    of memories (those first shown together) at a time, instead of each question's own retrieval
    (``cognition.live_context``; ``cognition.working``)."""


NOTES = ("deciding", "talking", "conversations")
"""What a tick's phases tell later phases of the same tick (``TickNotes``); a phase declares
which of them it reads and writes (``Phase.reads``, ``Phase.writes``)."""


class ContractError(RunError):
    """A phase touched a note it did not declare: a bug in the phase, found the first time it runs
    (the run stops at that tick with this message, every committed tick kept)."""


@dataclass
class TickNotes:
    """What this tick's phases found out that later phases need (reset at the start of every tick).

    A phase reads and writes them through ``for_phase``: a view that lets it touch only the notes
    it declares (``Phase.reads`` / ``writes``), so an undeclared dependency fails loudly the first
    time the phase runs instead of quietly reading an empty list."""

    deciding: list[str] = field(default_factory=list)
    """People who think this tick: waking, out of steps for the hour, or noticing something."""
    talking: list[str] = field(default_factory=list)
    """People in a conversation that went on this tick."""
    conversations: int = 0
    """Conversations that went on this tick."""

    @property
    def thinking(self) -> set[str]:
        return set(self.deciding) | set(self.talking)

    def for_phase(self, name: str, reads: frozenset[str], writes: frozenset[str]) -> PhaseNotes:
        return PhaseNotes(self, name, reads, writes)


class PhaseNotes:
    """One phase's view of the tick's notes: what it declared, nothing else (``ContractError``)."""

    def __init__(self, notes: TickNotes, phase: str, reads: frozenset[str], writes: frozenset[str]):
        object.__setattr__(self, "_notes", notes)
        object.__setattr__(self, "_phase", phase)
        object.__setattr__(self, "_reads", reads | writes)
        object.__setattr__(self, "_writes", writes)

    def __getattr__(self, name: str) -> Any:
        wanted = {"thinking": {"deciding", "talking"}}.get(name, {name})
        if wanted <= set(NOTES) and not wanted <= self._reads:
            raise ContractError(f"phase {self._phase!r} reads notes.{name} but does not declare it in its reads")
        return getattr(self._notes, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._writes:
            raise ContractError(f"phase {self._phase!r} writes notes.{name} but does not declare it in its writes")
        setattr(self._notes, name, value)


class Mind(Protocol):
    settings: MindSettings
    notes: TickNotes

    # time and places
    @property
    def tick(self) -> int: ...
    @property
    def now(self) -> datetime: ...
    @property
    def place_ids(self) -> tuple[str, ...]: ...
    @property
    def hub(self) -> str: ...
    def place_name(self, place: str) -> str: ...
    def place_kind(self, place: str) -> str: ...
    def objects(self, place: str) -> list[str]: ...

    # people
    def person(self, person_id: str) -> AgentState: ...
    def people(self) -> Sequence[AgentState]:
        """Everyone in the town now, in id order (the order every phase runs in); whoever left it
        (a ``departure`` event) is not among them, though ``person`` still finds them by id."""
        ...
    def here(self, person: AgentState) -> list[AgentState]:
        """Everyone at ``person``'s place (``person`` included), in id order."""
        ...
    def doing(self, person: AgentState) -> str: ...
    def tie(self, person_id: str, other_id: str) -> Tie | None: ...
    def happenings(self, person_id: str) -> list[Happening]:
        """What the person knows will happen where and when (facts they are aware of, and what they
        accepted an invitation to), by start."""
        ...
    def after_conversation(self, person_id: str, other_id: str, sentiment: float, view: str) -> None: ...

    # the LLM
    async def ask(self, me: AgentState, messages: list[dict[str, str]], schema: type[T], *, default: T,
                  purpose: str, max_tokens: int, check: Callable[[T], str | None] | None = None,
                  script: str | None = None, temperature: float | None = None) -> Answer[T]:
        """A structured question (``LLMClient.ask``); ``script`` is the engine's own answer, which only
        the no-LLM control reads; ``temperature``: asked at this one instead of the model's."""
        ...
    async def ask_rating(self, me: AgentState, messages: list[dict[str, str]], options: Sequence[str],
                         values: Sequence[float], *, default: float, purpose: str) -> Rating:
        """A rating as the expected value over the options' probabilities (``simulation.llm.scoring``)."""
        ...
    async def baseline(self, me: AgentState, messages: list[dict[str, str]],
                       options: Sequence[str]) -> list[float] | None:
        """The options' probabilities for a content-free question (``cognition.calibrate``) as
        ``me``'s model answers it, asked once a run per question and model and kept; None when
        calibration is off or the model cannot be read (the scripted control has no habit to divide out)."""
        ...
    def count_tokens(self, me: AgentState, messages: list[dict[str, str]]) -> int:
        """The prompt tokens ``me``'s LLM backend will see for ``messages`` (``LLMClient.count_tokens``):
        a question fits when this plus its ``max_tokens`` is at most ``settings_of(me).context_tokens``."""
        ...
    def settings_of(self, me: AgentState) -> MindSettings:
        """``settings`` as they hold for ``me``: the context window and temperature of the model that
        answers them (their model group's, ``llm.groups``; the ``llm:`` block's for everyone else)."""
        ...

    # memory
    def memories(self, person_id: str) -> MemoryView:
        """The person's memory stream, read-only (writes go through the members below)."""
        ...
    def memory(self, memory_id: int) -> MemoryNode: ...
    def remember(self, person_id: str, kind: MemoryKind, text: str, provenance: Provenance,
                 importance: float | None = None, evidence: tuple[int, ...] = (), depth: int = 0) -> MemoryNode: ...
    def rate(self, node: MemoryNode, importance: float) -> None: ...
    def reflected(self, person_id: str) -> None:
        """The person reflected now: their counter towards the next reflection restarts."""
        ...
    async def retrieve(self, person_id: str, query: str, purpose: str,
                       exclude: Iterable[int] = ()) -> list[MemoryNode]: ...
    async def retrieve_many(self, person_id: str, queries: Sequence[str], purpose: str) -> list[list[MemoryNode]]: ...
    def backstory_similarity(self, query: str, by_sentence: bool = False) -> float:
        """How like ``query`` what the town knew before the day is: the 90th percentile of the cosine
        similarity of everyone's seeded memories (0 with none), the level a memory must rise above
        to make the question familiar, whatever its wording."""
        ...
    def recognised(self, person_id: str, query: str, threshold: float, purpose: str,
                   by_sentence: bool = False) -> list[MemoryNode]:
        """The person's memories at least ``threshold`` like ``query`` (cosine; ``by_sentence``: of
        their sentence most like it), the most like first (at most ``memory.top_k``): none when the
        question is not familiar."""
        ...

    # what happens around
    def place_events(self, place: str) -> list[Any]: ...
    def conversation(self, conversation_id: int) -> Conversation: ...
    def open_conversations(self) -> list[Conversation]:
        """Open conversations, oldest first."""
        ...
    def take_ended_conversations(self) -> list[Conversation]: ...
    def start_conversation(self, a: AgentState, b: AgentState, call_id: int | None) -> Conversation | None:
        """``a`` opens a conversation with ``b`` (``call_id``: the question that decided it) if both are
        still free at the same place; ``a`` speaks first, in the next converse phase."""
        ...
    def say(self, conv: Conversation, speaker: AgentState, text: str, call_id: int | None, move: Move) -> int | None:
        """``speaker`` says ``text`` making ``move`` (news told, an invitation made or answered); the utterance id."""
        ...
    def end_conversation(self, conv: Conversation, reason: str) -> None: ...

    # recording
    def record(self, who: AgentState | None, kind: EventKind, text: str, data: dict[str, Any] | None = None) -> int | None: ...
    def whisper(self, person: AgentState, text: str, fact: str | None, data: dict[str, Any]) -> int:
        """A director's nudge: ``text`` becomes a thought of ``person``, tied to a ``nudge`` event with
        ``data``: source ``directed`` (never awareness), or, when it is ``fact`` itself, ``whispered``
        and news to pass on, as a scenario's whisper of the fact. The memory's id."""
        ...

    # the story's facts
    def aware(self, fact_id: str) -> set[str]:
        """Who is aware of fact ``fact_id`` by the last committed tick (the provenance tracker's count)."""
        ...

    def fact_name(self, fact_id: str) -> str:
        """What the town calls a fact, said after "the" (``facts[].name``)."""
        ...

    def fact_text(self, fact_id: str) -> str:
        """The fact as one would tell it (``facts[].text``, as it stands now)."""
        ...
    def record_plan(self, who: AgentState, items: list[PlanItem], ok: bool) -> None: ...
    def record_schedule(self, who: AgentState, level: str, parent: str, items: list[dict[str, Any]],
                        ok: bool) -> None: ...
