"""What loading a scenario produces: every person resolved and placed, ready for the engine."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, model_validator

from simulation.formats.persona import Persona
from simulation.llm import registry
from simulation.scenario.schema import Scenario

__all__ = ["LoadedScenario", "ResolvedPersona"]


class ResolvedPersona(BaseModel):
    """A persona with the scenario's placement of it."""

    persona: Persona
    home: str
    start_place: str
    workplace: str | None = None
    source: str
    habits_left_out: list[str] = []
    """Habits of a persona file at places this town lacks (or 'work' without a workplace): not
    part of this run's usual day."""
    crowd: bool = False
    """Background crowd: the routine, and the LLM only when something reaches them (docs/cognition.md)."""
    llm_group: str | None = None
    """The model group (``llm.groups``) that answers this person's questions; None: the ``llm:`` block's own."""


class LoadedScenario(BaseModel):
    """A validated scenario with every persona resolved; what the engine runs.

    It is also what a run saves to resume from (run.db's resume_state), so it reads back
    what older versions of Agora saved there."""

    path: str
    scenario: Scenario
    people: list[ResolvedPersona]
    """The people the run starts with."""
    source_text: str
    arrivals: dict[int, ResolvedPersona] = {}
    """Index into ``scenario.events`` of each ``arrival`` -> the person who arrives, resolved as
    ``people`` are (``start_place`` is where they arrive). Not in ``people``: nothing of them exists
    before they arrive, so a fork that adds someone is its parent, row for row, until then."""

    def in_town(self, tick: int) -> set[str]:
        """Ids of the people in the town at ``tick``, its scheduled events delivered: those the run
        starts with and those who arrived by then, less those who left. What ``TownModel`` keeps
        as it steps (``order``) and ``rundb.presence`` reads back from run.db."""
        here = {p.persona.id for p in self.people}
        for at, i, ev in self.scenario.delivery_order():
            if at > tick:
                break
            if ev.kind == "arrival" and i in self.arrivals:
                here.add(self.arrivals[i].persona.id)
            elif ev.kind == "departure":
                here.discard(ev.to or "")
        return here

    @model_validator(mode="before")
    @classmethod
    def _saved_llm_block(cls, data: Any) -> Any:
        # Before each backend had its own settings, a run saved every backend's fields in its
        # llm block; those are Agora's own words, not the user's, so the chosen backend's are
        # kept and the run resumes. (A scenario file with another backend's field is an error.)
        if isinstance(data, dict) and isinstance(data.get("scenario"), dict):
            llm = data["scenario"].get("llm")
            if isinstance(llm, dict):
                data = {**data, "scenario": {**data["scenario"], "llm": registry.own_fields(llm)}}
        return data

    def everyone(self) -> list[ResolvedPersona]:
        """The people the run starts with, then those who arrive during it (in the events' order)."""
        return self.people + [self.arrivals[i] for i in sorted(self.arrivals)]

    def persona(self, agent_id: str) -> Persona:
        return next(p.persona for p in self.everyone() if p.persona.id == agent_id)

    def llm_groups(self) -> dict[str, str]:
        """Person -> model group, for the people who name one (``llm:`` on their entry), arrivals too."""
        return {p.persona.id: p.llm_group for p in self.everyone() if p.llm_group is not None}
