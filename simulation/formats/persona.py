"""A persona file: one person, their Big Five targets and their usual day.

Persona files hold exactly a ``Persona`` mapping; scenarios reference them or inline one.
"""

from __future__ import annotations

from datetime import time

from pydantic import Field, ValidationInfo, field_validator

from simulation.formats.fields import Identifier, LongText, ShortText, StrictModel, Unit, clock_time

__all__ = ["HOME", "WORK", "BigFive", "Persona", "Routine", "RoutineItem"]


class BigFive(StrictModel):
    """Target Big Five trait levels on a 0-1 scale (0.5 = population average)."""

    openness: Unit
    conscientiousness: Unit
    extraversion: Unit
    agreeableness: Unit
    neuroticism: Unit


HOME, WORK = "home", "work"
"""Routine places that stand for the person's own home and workplace, wherever the scenario puts them."""


class RoutineItem(StrictModel):
    """One habit of the usual day: from ``at`` on, this activity at this place."""

    at: time = Field(description="when it starts, on the hour: 'HH:00' (the day is planned hour by hour)")
    activity: ShortText = Field(max_length=60, description="what the person does, e.g. 'lunch at the cafe'")
    place: Identifier = Field(description="'home', 'work', or a place id of the town")

    _check_at = field_validator("at", mode="before")(clock_time)

    @field_validator("at")
    @classmethod
    def _on_the_hour(cls, at: time) -> time:
        if at.minute or at.second:
            raise ValueError(f"habits start on the hour ('{at:%H}:00'): the day is planned hour by hour")
        return at


class Routine(StrictModel):
    """When a person is awake, and what a usual day looks like.

    ``day`` is the usual day as habits (optional). A small model planning a day from prose
    invents places and activities; with habits, the day's plan is chosen from them and the
    town's happenings (cognition/plan.py), and they are the plan when the model gives nothing
    usable. Habits at shared places (breakfast at the cafe, the pub after work) are what bring
    people together."""

    wake: time = Field(description="usual wake-up time, 'HH:MM'")
    sleep: time = Field(description="usual bedtime, 'HH:MM'")
    description: LongText = ""
    day: list[RoutineItem] = Field(default_factory=list, max_length=12,
                                   description="the usual day as habits, in time order")

    _check_times = field_validator("wake", "sleep", mode="before")(clock_time)

    @field_validator("day")
    @classmethod
    def _in_order(cls, day: list[RoutineItem]) -> list[RoutineItem]:
        starts = [i.at for i in day]
        if starts != sorted(starts) or len(set(starts)) != len(starts):
            raise ValueError("habits must be in time order, each at a different time")
        return day


class Persona(StrictModel):
    """One person. Persona files hold exactly this mapping."""

    id: Identifier
    name: ShortText
    age: int = Field(ge=0, le=120)
    occupation: ShortText
    household: LongText = ""
    traits: list[ShortText] = Field(default_factory=list, max_length=12)
    big_five: BigFive
    # The SPeCtrum split (Lee et al., 2025): who a person is to others, to themself, and in
    # their present circumstances. Optional, so older persona files stay valid.
    social_identity: LongText = Field(
        "", description="roles, groups and standing in town: job, family role, communities they belong to"
    )
    personal_identity: LongText = Field(
        "", description="character, values, tastes and habits: who they are to themself"
    )
    life_context: LongText = Field(
        "", description="their circumstances now: household, money, health, what is on their mind this month"
    )
    backstory: LongText = ""
    speaking_style: LongText = ""
    # SimsChat's inner life (Yang et al., 2024): what the person wants from life and what they are
    # good at. Optional; shown in the persona block when given.
    aspiration: LongText = Field("", description="what they want from life, in a sentence (SimsChat's aspiration)")
    skills: list[ShortText] = Field(default_factory=list, max_length=12,
                                    description="what they are good at: cooking, carpentry, arguing a case ...")
    routine: Routine
    relationships: dict[Identifier, LongText] = Field(
        default_factory=dict, description="how this person sees others, by persona id"
    )
    memories: list[LongText] = Field(
        default_factory=list, max_length=200, description="seed memories at the start of a run"
    )

    @field_validator("relationships")
    @classmethod
    def _not_own_relation(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if info.data.get("id") in value:
            raise ValueError(f"{info.data['id']!r} is this person's own id; relationships are with others")
        return value
