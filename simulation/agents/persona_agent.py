"""PersonaAgent: the Mesa agent that carries one person's ``AgentState`` around the town.

Decisions that need the LLM are the cognition phases' (``simulation.cognition``); this class
holds the no-LLM parts of a day that move the person through Mesa's network space: walking a
route leg by leg between place cells, working through the queued 5-30 minute steps of the
current hour one after another (within a tick when they are short), and going to sleep.
Its cell is the one source of where the person is: ``move_to`` changes both together.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from mesa.discrete_space import CellAgent

from simulation.agents.state import AgentState
from simulation.core import Action, EventKind, MemoryKind, Provenance, Source, Status, doing_at

if TYPE_CHECKING:
    from simulation.tick.model import TownModel


class PersonaAgent(CellAgent):
    def __init__(self, model: TownModel, state: AgentState):
        super().__init__(model)
        self.model: TownModel = model
        self.state = state
        self.cell = model.space[state.place]

    @property
    def agent_id(self) -> str:
        return self.state.id

    def move_to(self, place: str) -> None:
        self.state.place = place
        self.cell = self.model.space[place]

    def doing(self) -> str:
        return self.model.doing(self.state)

    # ------------------------------------------------------------------ acting

    def start_action(self, action: Action, offset_minutes: float = 0.0) -> None:
        """Begin ``action`` (``offset_minutes`` into the tick): walk there first if it is elsewhere."""
        m, s = self.model, self.state
        walked = 0.0
        if s.status == Status.WALKING and s.route:  # re-routed mid-walk (e.g. at bedtime)
            next_stop = s.route[0]
            walked = m.town.leg_minutes(s.place, next_stop) - s.leg_left
        else:
            next_stop = None
        s.action = action
        if action.place == s.place and walked > 0:  # walk back the minutes already walked
            s.route, s.leg_left = [s.place], walked
            m.log_event(s, EventKind.MOVE, f"{s.persona.name} turns back to {m.town.name(s.place)} "
                        f"({action.text})", {"to": action.place})
        elif action.place != s.place:
            s.route = m.town.route(s.place, action.place)[1:]
            if s.route[0] == next_stop:  # carry on along the same leg
                s.leg_left = float(m.town.leg_minutes(s.place, next_stop)) - walked
            else:  # turn back to this place first, then on
                s.leg_left = float(m.town.leg_minutes(s.place, s.route[0])) + walked
            s.status = Status.WALKING
            m.log_event(s, EventKind.MOVE, f"{s.persona.name} leaves {m.town.name(s.place)} for "
                        f"{m.town.name(action.place)} ({action.text})", {"to": action.place})
        else:
            self._arrive(offset_minutes=offset_minutes)

    def _arrive(self, offset_minutes: float) -> None:
        m, s = self.model, self.state
        assert s.action is not None
        if s.action.bedtime:
            s.status = Status.SLEEPING
            s.action = None
            m.log_event(s, EventKind.SLEEP, f"{s.persona.name} goes to sleep at {m.town.name(s.place)}")
            return
        s.status = Status.ACTING
        s.action.ends = m.now + timedelta(minutes=offset_minutes + max(1, s.action.minutes))
        text = f"{s.persona.name} is {doing_at(s.action.doing, m.town.name(s.place))}"
        data = {"minutes": s.action.minutes, "until": s.action.ends.strftime("%H:%M")}
        if s.action.call_id is not None:
            data["llm_call_id"] = s.action.call_id
        m.log_event(s, EventKind.ACTION, text, data)
        m.memory.add(s.id, MemoryKind.OBSERVATION, text, Provenance(Source.DID), importance=s.action.importance)

    def advance(self, minutes: float) -> None:
        """Act phase: walk along the route, let the current action run its course, and go on with
        the hour's next queued step when one ends within the tick (no LLM)."""
        m, s = self.model, self.state
        used = 0.0
        while used <= minutes:
            if s.status == Status.WALKING:
                budget = minutes - used
                while s.route and budget > 0:
                    step = min(s.leg_left, budget)
                    s.leg_left -= step
                    budget -= step
                    if s.leg_left <= 1e-9:
                        self.move_to(s.route.pop(0))
                        if s.route:
                            s.leg_left = float(m.town.leg_minutes(s.place, s.route[0]))
                if s.route:
                    return
                used = minutes - budget
                self._arrive(offset_minutes=used)
            elif s.status == Status.ACTING and s.action and s.action.ends is not None:
                end = (s.action.ends - m.now).total_seconds() / 60
                if end > minutes:
                    return
                s.status = Status.IDLE
                s.action = None
                used = max(used, end)
                step = s.next_step(m.now + timedelta(minutes=used))
                if step is None:
                    return
                self.start_action(step, offset_minutes=used)
            else:
                return
