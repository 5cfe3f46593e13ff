"""PersonaAgent: one person's state in the town (where, doing what, with whom, planning what).

Decisions that need the LLM live in ``simulation.cognition``; this class holds the state
they read and write, and the no-LLM parts of a day: waking, going to bed, walking,
working through the queued 5-30 minute steps of the current hour, one after another,
within a tick when they are short.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING

from mesa.discrete_space import CellAgent

from simulation.cognition.schemas import PlanItem
from simulation.memory import MemoryNode, MemoryStream
from simulation.scenario import Persona

if TYPE_CHECKING:
    from simulation.conversation import Conversation
    from simulation.model import ActivePlaceEvent, TownModel

# status values
SLEEPING, WAKING, IDLE, WALKING, ACTING, TALKING = "sleeping", "waking", "idle", "walking", "acting", "talking"


@dataclass
class Action:
    text: str
    place: str
    minutes: int
    ends: datetime | None = None
    bedtime: bool = False
    importance: float | None = None
    """Of the memory "X is <text> at <place>" formed when it starts (None: rated later)."""
    call_id: int | None = None
    """The ``llm_calls`` row whose answer queued it (None: no LLM answer did)."""


@dataclass
class HourBlock:
    """What a plan step amounts to in one hour of the day (the middle level of a plan)."""

    hour: int
    activity: str
    place: str


def is_awake(now: datetime, wake: time, sleep: time) -> bool:
    t = now.time()
    if wake <= sleep:
        return wake <= t < sleep
    return t >= wake or t < sleep  # bedtime after midnight


@dataclass
class Perception:
    """What an agent noticed this tick: people first met (or met again after a while), new place events."""

    people: list[str] = field(default_factory=list)
    events: list[ActivePlaceEvent] = field(default_factory=list)


@dataclass
class Focus:
    """What an agent reacts to this tick: a new event at its place and/or someone free to talk."""

    event: ActivePlaceEvent | None
    other: PersonaAgent | None


class PersonaAgent(CellAgent):
    def __init__(self, model: TownModel, persona: Persona, home: str, start_place: str, workplace: str | None = None):
        super().__init__(model)
        self.model: TownModel = model
        self.agent_id = persona.id
        self.persona = persona
        self.first_name = persona.name.split()[0]
        self.home = home
        self.workplace = workplace
        self.place = start_place
        self.cell = model.space[start_place]
        self.status = SLEEPING
        self.action: Action | None = None
        self.route: list[str] = []
        self.leg_left = 0.0
        self.plan: list[PlanItem] = []
        """Today's plan in broad strokes, sorted by hour."""
        self.plan_day: date | None = None
        self.hours: dict[int, HourBlock] = {}
        """Today's hour blocks, filled in lazily as plan steps begin."""
        self.steps: list[Action] = []
        """The current hour's 5-30 minute actions still to do."""
        self.steps_key: tuple[date, int] | None = None
        """(day, hour) the queued steps belong to; they lapse when the hour is over."""
        self.replan: str | None = None
        """What the agent just decided to do instead (a reaction); the next steps start with it."""
        self.focus: Focus | None = None
        self.conversation: Conversation | None = None
        self.resume_status = IDLE
        self.last_seen: dict[str, int] = {}
        self.last_talk: dict[str, datetime] = {}
        self.perceived = Perception()
        self.system_prompt = ""

    # ------------------------------------------------------------------ state

    def awake_at(self, now: datetime) -> bool:
        return is_awake(now, self.persona.routine.wake, self.persona.routine.sleep)

    @property
    def free(self) -> bool:
        """At a place and not already busy talking or going to bed."""
        return self.status in (IDLE, ACTING, WAKING) and not (self.action and self.action.bedtime)

    def doing(self) -> str:
        if self.status == SLEEPING:
            return "asleep"
        if self.status == TALKING and self.conversation:
            other = self.conversation.partner(self.agent_id)
            return f"talking with {self.model.people[other].persona.name}"
        if self.status == WALKING and self.action:
            return f"walking to {self.model.town.name(self.action.place)}"
        if self.action:
            return self.action.text
        return "looking around"

    def set_place(self, place: str) -> None:
        self.place = place
        self.cell = self.model.space[place]

    @property
    def memory(self) -> MemoryStream:
        return self.model.memory.stream(self.agent_id)

    def remember(self, kind: str, text: str, importance: float | None = None, evidence: tuple[int, ...] = (),
                 depth: int = 0) -> MemoryNode:
        """A new memory; ``importance`` None means the LLM rates it when the agent next thinks."""
        return self.model.memory.add(self.agent_id, kind, text, importance=importance, evidence=evidence,
                                     depth=depth)

    # ------------------------------------------------------------------ plans

    def plan_for(self, hour: int) -> PlanItem | None:
        """The plan step in force at ``hour`` (the latest one that started by then)."""
        current = None
        for item in self.plan:  # sorted by hour when made
            if item.hour <= hour:
                current = item
        return current

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
        if self.status == ACTING:
            self.status = IDLE
            self.action = None

    # ------------------------------------------------------------------ acting

    def start_action(self, action: Action, offset_minutes: float = 0.0) -> None:
        """Begin ``action`` (``offset_minutes`` into the tick): walk there first if it is elsewhere."""
        m = self.model
        walked = 0.0
        if self.status == WALKING and self.route:  # re-routed mid-walk (e.g. at bedtime)
            next_stop = self.route[0]
            walked = m.town.leg_minutes(self.place, next_stop) - self.leg_left
        else:
            next_stop = None
        self.action = action
        if action.place == self.place and walked > 0:  # walk back the minutes already walked
            self.route, self.leg_left = [self.place], walked
            m.log_event(self, "move", f"{self.persona.name} turns back to {m.town.name(self.place)} "
                        f"({action.text})", {"to": action.place})
        elif action.place != self.place:
            self.route = m.town.route(self.place, action.place)[1:]
            if self.route[0] == next_stop:  # carry on along the same leg
                self.leg_left = float(m.town.leg_minutes(self.place, next_stop)) - walked
            else:  # turn back to this place first, then on
                self.leg_left = float(m.town.leg_minutes(self.place, self.route[0])) + walked
            self.status = WALKING
            m.log_event(self, "move", f"{self.persona.name} leaves {m.town.name(self.place)} for "
                        f"{m.town.name(action.place)} ({action.text})", {"to": action.place})
        else:
            self._arrive(offset_minutes=offset_minutes)

    def _arrive(self, offset_minutes: float) -> None:
        m = self.model
        assert self.action is not None
        if self.action.bedtime:
            self.status = SLEEPING
            self.action = None
            m.log_event(self, "sleep", f"{self.persona.name} goes to sleep at {m.town.name(self.place)}")
            return
        self.status = ACTING
        self.action.ends = m.now + timedelta(minutes=offset_minutes + max(1, self.action.minutes))
        text = f"{self.persona.name} is {self.action.text} at {m.town.name(self.place)}"
        data = {"minutes": self.action.minutes, "until": self.action.ends.strftime("%H:%M")}
        if self.action.call_id is not None:
            data["llm_call_id"] = self.action.call_id
        m.log_event(self, "action", text, data)
        self.remember("observation", text, importance=self.action.importance)

    def advance(self, minutes: float) -> None:
        """Act phase: walk along the route, let the current action run its course, and go on with
        the hour's next queued step when one ends within the tick (no LLM)."""
        m = self.model
        used = 0.0
        while used <= minutes:
            if self.status == WALKING:
                budget = minutes - used
                while self.route and budget > 0:
                    step = min(self.leg_left, budget)
                    self.leg_left -= step
                    budget -= step
                    if self.leg_left <= 1e-9:
                        self.set_place(self.route.pop(0))
                        if self.route:
                            self.leg_left = float(m.town.leg_minutes(self.place, self.route[0]))
                if self.route:
                    return
                used = minutes - budget
                self._arrive(offset_minutes=used)
            elif self.status == ACTING and self.action and self.action.ends is not None:
                end = (self.action.ends - m.now).total_seconds() / 60
                if end > minutes:
                    return
                self.status = IDLE
                self.action = None
                used = max(used, end)
                step = self.next_step(m.now + timedelta(minutes=used))
                if step is None:
                    return
                self.start_action(step, offset_minutes=used)
            else:
                return
