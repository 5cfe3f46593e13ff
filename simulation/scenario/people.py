"""Who lives in a scenario's town: named people (persona files or inline) and a sampled population."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simulation.formats.fields import Identifier, StrictModel
from simulation.formats.persona import Persona

__all__ = ["PersonaEntry", "PopulationEntry"]

LLM_GROUP = ("the model group (a name under llm.groups) whose backend answers this person's questions "
             "(default: the llm block's own; docs/llm.md)")


class PopulationEntry(StrictModel):
    """People sampled from a population spec (``personas/populations/*.yaml``) and placed in the town."""

    spec: str = Field(description="population spec YAML, relative to the scenario file")
    n: int = Field(ge=1, le=1000, description="how many people to sample")
    seed: int | None = Field(None, ge=0, le=2**31 - 1, description="sampling seed (default: the scenario's seed)")
    homes: list[Identifier] = Field(
        default_factory=list, max_length=500,
        description="place ids people live in, dealt out in a seeded order (default: every place of kind 'home')",
    )
    workplaces: dict[Identifier, Identifier] = Field(
        default_factory=dict,
        description="an occupation's workplace kind in the spec -> place id (default: a place of that kind, if any)",
    )
    start: Literal["home", "workplace"] = Field(
        "home", description="where sampled people are on the first tick (workplace falls back to home)"
    )
    crowd: bool = Field(False, description="background crowd: follows the routine and asks the LLM only when something reaches them (someone talks to them, an event where they are); docs/cognition.md")
    llm: Identifier | None = Field(None, description=LLM_GROUP)


class PersonaEntry(StrictModel):
    """A person in a scenario: a persona (from a file or inline) and where they live."""

    file: str | None = Field(None, description="persona YAML, relative to the scenario file")
    persona: Persona | None = Field(None, description="an inline persona instead of a file")
    home: Identifier = Field(description="place id of this person's home")
    start_place: Identifier | None = Field(None, description="where they are at the start (default: home)")
    workplace: Identifier | None = Field(None, description="place id where they usually spend the working day")
    crowd: bool = Field(False, description="background crowd: follows the routine and asks the LLM only when something reaches them (someone talks to them, an event where they are); docs/cognition.md")
    llm: Identifier | None = Field(None, description=LLM_GROUP)

    @model_validator(mode="after")
    def _one_source(self) -> PersonaEntry:
        if (self.file is None) == (self.persona is None):
            raise ValueError("give exactly one of 'file' or 'persona'")
        return self
