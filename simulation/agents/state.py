"""AgentState: everything about one person in the town, as one object.

Cognition phases read and write it (through ``Mind`` for everything outside the person), the
Mesa agent (``PersonaAgent``) carries it around the town, and the checkpoint stores it whole:
every field that changes during a run is a field here, so a new one is saved and restored
without touching ``tick/checkpoint.py`` (forgetting a field there used to break exact resume
silently). Who the person is (persona, home, workplace, the system prompt built from them)
is fixed for the run and rebuilt from the scenario, so it is excluded from the stored JSON and
``restore`` keeps it as built; ``focus`` and ``perceived`` are recomputed every tick before
anything reads them.
"""

from __future__ import annotations

import json
from datetime import date, datetime, time

from pydantic import BaseModel, ConfigDict, Field

from simulation.core import Action, Focus, Happening, HourBlock, Perception, PlanItem, Status
from simulation.formats import Persona


def is_awake(now: datetime, wake: time, sleep: time) -> bool:
    t = now.time()
    if wake <= sleep:
        return wake <= t < sleep
    return t >= wake or t < sleep  # bedtime after midnight


class Seeking(BaseModel):
    """A person on their way to find someone to tell them news (``cognition.seek``)."""

    model_config = ConfigDict(extra="forbid")

    person: str
    """Whom they are looking for."""
    until: datetime
    """When they give up (the end of the hour they set out in)."""
    call_id: int | None = None
    """The ``llm_calls`` row of the choice to go (what the conversation, once they meet, is linked to)."""


class AgentState(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    # who: fixed for the run (rebuilt from the scenario, not stored)
    id: str = Field(exclude=True)
    persona: Persona = Field(exclude=True)
    home: str = Field(exclude=True)
    workplace: str | None = Field(None, exclude=True)
    system_prompt: str = Field("", exclude=True)
    crowd: bool = Field(False, exclude=True)
    """Background crowd: follows the routine, asks the LLM only when something reaches them."""

    # where and what
    place: str
    status: Status = Status.SLEEPING
    resume_status: Status = Status.IDLE
    """What the agent goes back to when its conversation ends (idle or acting)."""
    action: Action | None = None
    route: list[str] = Field(default_factory=list)
    """Places still to pass through while walking, the destination last."""
    leg_left: float = 0.0
    """Minutes to the next place on the route."""
    conversation_id: int | None = None

    # plans
    plan: list[PlanItem] = Field(default_factory=list)
    """Today's plan in broad strokes, sorted by hour."""
    plan_day: date | None = None
    plan_call: int | None = None
    """The ``llm_calls`` row of the answer that chose today's plan (what its actions are linked to)."""
    hours: dict[int, HourBlock] = Field(default_factory=dict)
    """Today's hour blocks, filled in lazily as plan steps begin (ahead of time only by a change the
    person agreed to: ``plan.keep_hours``)."""
    steps: list[Action] = Field(default_factory=list)
    """The current hour's 5-30 minute actions still to do."""
    steps_key: tuple[date, int] | None = None
    """(day, hour) the queued steps belong to; they lapse when the hour is over."""
    replan: str | None = None
    """What the agent just decided to do instead (a reaction); the next steps start with it."""

    # attention
    last_seen: dict[str, int] = Field(default_factory=dict)
    """Person id or ``event:<id>`` -> the tick it was last noticed."""
    last_talk: dict[str, datetime] = Field(default_factory=dict)
    """Person id -> when the last conversation with them started (the cooldown)."""
    stopped_for: list[datetime] = Field(default_factory=list)
    """When, this game hour, this person stopped to react to someone they saw (the hourly cap)."""
    # talk
    told: dict[str, list[int]] = Field(default_factory=dict)
    """Person id -> the memories this person has told them (news is not told twice)."""
    news: list[int] = Field(default_factory=list)
    """Memories worth passing on, in the order they came: a fact known from the start, a whisper,
    a place event seen, a line heard that shared news or invited this person."""
    invited: dict[str, list[str]] = Field(default_factory=dict)
    """Person id -> the happenings (fact ids) this person has invited them to."""
    going: list[Happening] = Field(default_factory=list)
    """Happenings this person accepted an invitation to (offered when their day is planned)."""
    seeking: Seeking | None = None
    """Whom this person set out to find this hour, to tell them news (``cognition.seek``)."""
    offered: dict[str, list[int]] = Field(default_factory=dict)
    """Person id -> the news (memory ids) this person was asked whether to go and tell them: each
    pair is asked about once (``cognition.seek``)."""
    working: list[list[int]] = Field(default_factory=list)
    """Today's memories shown to this person, in the batches they were first shown in
    (``cognition.working``, with ``cognition.live_context``): their prompts show them in this
    order, one message a batch, so the backend keeps them evaluated between calls."""
    working_day: date | None = None
    """The day ``working`` belongs to: a new day starts it afresh."""
    # inner life (``cognition.moods``)
    mood: str = ""
    """How the person feels, one of ``cognition.mood.MOODS`` ("" until first asked)."""
    valence: float = 0.0
    """-1 (unpleasant) to 1 (pleasant): the expected valence over the mood's probabilities."""
    arousal: float = 0.0
    """-1 (sleepy) to 1 (keyed up): the expected arousal over the mood's probabilities."""
    mood_seen: int = 0
    """The newest memory id the mood was last asked after."""
    mood_at: datetime | None = None
    """When the mood was last asked (at most once a game hour)."""
    focus: Focus | None = Field(None, exclude=True)
    """What it reacts to this tick (set by perception)."""
    perceived: Perception = Field(default_factory=Perception, exclude=True)
    """What it noticed this tick."""

    @property
    def first_name(self) -> str:
        return self.persona.name.split()[0]

    def awake_at(self, now: datetime) -> bool:
        return is_awake(now, self.persona.routine.wake, self.persona.routine.sleep)

    @property
    def free(self) -> bool:
        """At a place and not already busy talking or going to bed."""
        return self.status in (Status.IDLE, Status.ACTING, Status.WAKING) and not (self.action and self.action.bedtime)

    def doing(self, partner: str | None = None, destination: str | None = None) -> str:
        """What the agent is doing, in words; ``partner`` and ``destination`` are the names of the person
        it talks with and the place it walks to (the state holds only their ids)."""
        if self.status == Status.SLEEPING:
            return "asleep"
        if self.status == Status.TALKING and partner:
            return f"talking with {partner}"
        if self.status == Status.WALKING and self.action:
            return f"walking to {destination}"
        if self.action:
            return self.action.doing
        return "looking around"

    def doing_apart_from_talk(self, place_name: str) -> str:
        """What the agent was doing before its conversation, in words: asked "what are you doing?"
        mid-conversation, "talking with you" answers nothing."""
        if self.status == Status.TALKING:
            if self.resume_status == Status.ACTING and self.action:
                return self.action.doing
            return f"spending some time at {place_name}"
        if self.status == Status.WALKING or not self.action:
            return f"spending some time at {place_name}"
        return self.action.doing

    def sought(self, now: datetime) -> str | None:
        """Whom this person is out looking for at ``now`` (None once the hour they set out in is over)."""
        if self.seeking is not None and now >= self.seeking.until:
            self.seeking = None
        return self.seeking.person if self.seeking is not None else None

    def has_steps(self, at: datetime) -> bool:
        return bool(self.steps) and self.steps_key == (at.date(), at.hour)

    def next_step(self, at: datetime) -> Action | None:
        """The next queued step if it still belongs to the hour at ``at``; lapsed steps are dropped."""
        if self.has_steps(at):
            return self.steps.pop(0)
        self.steps.clear()
        return None

    def interrupt(self, reaction: str) -> None:
        """React: drop the current action and the hour's remaining steps; re-plan from now, starting
        with ``reaction``."""
        self.replan = reaction
        self.steps.clear()
        self.steps_key = None
        if self.status == Status.ACTING:
            self.status = Status.IDLE
            self.action = None

    def stored(self) -> str:
        """The state as the checkpoint stores it (JSON, identity and per-tick attention left out)."""
        return self.model_dump_json()

    def restore(self, text: str) -> None:
        """Put a stored state (``stored``) back into this person, built afresh from the scenario. Who
        they are (every field excluded from the stored JSON: persona, home, the crowd flag ...)
        stays as built; nothing here lists those fields, so a new one can never be forgotten."""
        kept = {name: getattr(self, name) for name, f in type(self).model_fields.items() if f.exclude}
        stored = type(self).model_validate({**json.loads(text), **kept})
        for name, f in type(self).model_fields.items():
            if not f.exclude:  # into this object: the mind and the conversations hold it
                setattr(self, name, getattr(stored, name))
