"""PersonaAgent: one person's state in the town (where, doing what, with whom, remembering what).

Decisions that need the LLM live in ``simulation.cognition``; this class holds the state
they read and write, and the no-LLM parts of a day: waking, going to bed, walking,
finishing an action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from mesa.discrete_space import CellAgent

from simulation.cognition.schemas import PlanItem
from simulation.memory import MemoryNode, MemoryStream
from simulation.scenario import Persona

if TYPE_CHECKING:
    from simulation.conversation import Conversation
    from simulation.model import TownModel

# status values
SLEEPING, WAKING, IDLE, WALKING, ACTING, TALKING = "sleeping", "waking", "idle", "walking", "acting", "talking"


@dataclass
class Action:
    text: str
    place: str
    minutes: int
    ends: datetime | None = None
    bedtime: bool = False


def is_awake(now: datetime, wake: time, sleep: time) -> bool:
    t = now.time()
    if wake <= sleep:
        return wake <= t < sleep
    return t >= wake or t < sleep  # bedtime after midnight


@dataclass
class Perception:
    """Whom an agent noticed this tick (people first met, or met again after a while)."""

    people: list[str] = field(default_factory=list)


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
        self.memory = MemoryStream()
        self.status = SLEEPING
        self.action: Action | None = None
        self.route: list[str] = []
        self.leg_left = 0.0
        self.plan: list[PlanItem] = []
        self.plan_day: date | None = None
        self.conversation: Conversation | None = None
        self.resume_status = IDLE
        self.last_seen: dict[str, int] = {}
        self.last_talk: dict[str, datetime] = {}
        self.perceived = Perception()
        self.pending_action: Action | None = None
        """Chosen in the decide phase; started in the act phase (or after a conversation)."""
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

    def remember(self, kind: str, text: str) -> MemoryNode:
        return self.model.record_memory(self, kind, text)

    # ------------------------------------------------------------------ prompts

    def prompt_context(self, query: str = "") -> dict[str, Any]:
        """What every prompt shows: time, place, current doing, what's on their mind, memories."""
        m = self.model
        window = m.scenario.cognition.memory_window
        thoughts = self.memory.recent(2, kinds=("thought",))
        skip = {n.id for n in thoughts}
        relevant = self.memory.relevant(query, max(1, window // 3), skip) if query else []
        skip |= {n.id for n in relevant}
        recent = [n for n in self.memory.recent(window, exclude=("thought", "plan")) if n.id not in skip]
        room = window - len(relevant)
        chosen = sorted(relevant + (recent[-room:] if room > 0 else []), key=lambda n: n.id)
        return {
            "p": self.persona,
            "first": self.first_name,
            "now": m.now.strftime("%A %d %B, %H:%M"),
            "place": m.town.name(self.place),
            "objects": m.town.places[self.place].objects,
            "doing": "" if self.status in (IDLE, WAKING) else self.doing(),
            "thoughts": [n.text for n in thoughts],
            "memories": [f"({n.time:%a %H:%M}) {n.text}" for n in chosen],
        }

    def plan_for(self, hour: int) -> PlanItem | None:
        """The plan step in force at ``hour`` (the latest one that started by then)."""
        current = None
        for item in self.plan:  # sorted by hour when made
            if item.hour <= hour:
                current = item
        return current

    def start_action(self, action: Action) -> None:
        """Begin ``action``: walk there first if it is elsewhere."""
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
            self._arrive(offset_minutes=0.0)

    def _arrive(self, offset_minutes: float) -> None:
        m = self.model
        assert self.action is not None
        if self.action.bedtime:
            self.status = SLEEPING
            self.action = None
            m.log_event(self, "sleep", f"{self.persona.name} goes to sleep at {m.town.name(self.place)}")
            return
        self.status = ACTING
        self.action.ends = m.now + timedelta(minutes=offset_minutes + self.action.minutes)
        text = f"{self.persona.name} is {self.action.text} at {m.town.name(self.place)}"
        m.log_event(self, "action", text, {"minutes": self.action.minutes, "until": self.action.ends.strftime("%H:%M")})
        self.remember("observation", text)

    def advance(self, minutes: float) -> None:
        """Act phase: walk along the route or let the current action run its course."""
        if self.status == WALKING:
            budget = minutes
            while self.route and budget > 0:
                step = min(self.leg_left, budget)
                self.leg_left -= step
                budget -= step
                if self.leg_left <= 1e-9:
                    self.set_place(self.route.pop(0))
                    if self.route:
                        self.leg_left = float(self.model.town.leg_minutes(self.place, self.route[0]))
            if not self.route:
                self._arrive(offset_minutes=minutes - budget)
        elif self.status == ACTING and self.action and self.action.ends is not None:
            if self.action.ends <= self.model.now + timedelta(minutes=minutes):
                self.status = IDLE
                self.action = None
