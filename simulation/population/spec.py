"""A population spec (``personas/populations/*.yaml``): marginal distributions of the fields of its people.

Ages, occupations and households are weighted choices (occupations and households may be
limited to some ages), each Big Five factor a truncated normal, and names come from lists.
``load_spec`` also checks what pydantic cannot: that every age can be given an occupation
and a household.
"""

from __future__ import annotations

import string
from datetime import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field, field_validator, model_validator

from simulation.errors import InputError, Problem
from simulation.formats.fields import Identifier, LongText, ShortText, StrictModel, Unit, clock_time
from simulation.formats.validation import validate_document
from simulation.formats.yamlfile import YamlDocument, load_yaml
from simulation.population.names import slug

__all__ = [
    "FACTORS", "AgeBin", "BigFiveSpec", "Choice", "Household", "Names", "Occupation", "PopulationSpec", "RoutineSpec",
    "TimeWindow", "TraitDistribution", "allowed_at", "load_spec", "spec_problems", "weights",
]

FACTORS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
Weight = Annotated[float, Field(gt=0, le=1e6, description="relative weight (need not sum to 1)")]
AgeRange = tuple[Annotated[int, Field(ge=0, le=120)], Annotated[int, Field(ge=0, le=120)]]


def _ordered(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] > value[1]:
        raise ValueError(f"write the range low to high, e.g. [{value[1]}, {value[0]}]")
    return value


class AgeBin(StrictModel):
    range: AgeRange = Field(description="[youngest, oldest], inclusive; ages are uniform inside the bin")
    weight: Weight = 1.0

    _check = field_validator("range")(_ordered)


class Occupation(StrictModel):
    title: ShortText
    weight: Weight = 1.0
    workplace: Identifier | None = Field(
        None, description="kind of town place where they work (matched against places' kind), or none"
    )
    ages: AgeRange | None = Field(None, description="only people of these ages get this occupation")
    day: LongText = Field("", description="their usual day, without the subject: 'opens the bakery at 06:00'")
    memories: list[LongText] = Field(
        default_factory=list, max_length=20, description="seed memories; {first} is replaced by the first name"
    )

    _check = field_validator("ages")(_ordered)


class Household(StrictModel):
    text: LongText = Field(min_length=1, description="e.g. 'Lives alone in a rented flat.'")
    weight: Weight = 1.0
    ages: AgeRange | None = None

    _check = field_validator("ages")(_ordered)


class Choice(StrictModel):
    text: ShortText
    weight: Weight = 1.0


class TraitDistribution(StrictModel):
    """A normal distribution truncated to [0, 1]."""

    mean: Unit = 0.5
    sd: float = Field(0.15, gt=0, le=1)


class BigFiveSpec(StrictModel):
    openness: TraitDistribution = Field(default_factory=TraitDistribution)
    conscientiousness: TraitDistribution = Field(default_factory=TraitDistribution)
    extraversion: TraitDistribution = Field(default_factory=TraitDistribution)
    agreeableness: TraitDistribution = Field(default_factory=TraitDistribution)
    neuroticism: TraitDistribution = Field(default_factory=TraitDistribution)


class TimeWindow(StrictModel):
    earliest: time = Field(description="'HH:MM'")
    latest: time = Field(description="'HH:MM'; times are drawn uniformly in 10-minute steps")

    _check_times = field_validator("earliest", "latest", mode="before")(clock_time)

    @model_validator(mode="after")
    def _order(self) -> TimeWindow:
        if self.latest < self.earliest:
            raise ValueError("latest must not be before earliest")
        return self


class RoutineSpec(StrictModel):
    wake: TimeWindow
    sleep: TimeWindow

    @model_validator(mode="after")
    def _order(self) -> RoutineSpec:
        if self.sleep.earliest <= self.wake.latest:
            raise ValueError("the sleep window must start after the wake window ends")
        return self


NamePart = Annotated[str, Field(min_length=1, max_length=80)]


class Names(StrictModel):
    first: list[NamePart] = Field(min_length=1, max_length=5000)
    last: list[NamePart] = Field(min_length=1, max_length=5000)


class PopulationSpec(StrictModel):
    """A population: marginal distributions of the fields of its people."""

    name: ShortText
    description: LongText = ""
    ages: list[AgeBin] = Field(min_length=1, max_length=200)
    occupations: list[Occupation] = Field(min_length=1, max_length=500)
    households: list[Household] = Field(min_length=1, max_length=200)
    big_five: BigFiveSpec = Field(default_factory=BigFiveSpec)
    names: Names
    values: list[Choice] = Field(default_factory=list, max_length=200, description="two are drawn per person")
    affiliations: list[Choice] = Field(
        default_factory=list, max_length=200, description="zero to two groups per person ('the town choir')"
    )
    concerns: list[Choice] = Field(
        default_factory=list, max_length=200, description="one per person, without the subject: 'is saving for a car'"
    )
    routine: RoutineSpec
    acquaintances: int = Field(2, ge=0, le=20, description="how many others in the population each person knows")


def weights(items: list[Any]) -> np.ndarray:
    """The items' relative weights as probabilities."""
    w = np.array([it.weight for it in items], dtype=float)
    return w / w.sum()


def allowed_at(items: list[Any], age: int) -> list[int]:
    """Indices of the items (occupations, households) a person of ``age`` may get."""
    return [i for i, it in enumerate(items) if it.ages is None or it.ages[0] <= age <= it.ages[1]]


def _fields_of(template: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError:
        return {"?"}


def spec_problems(doc: YamlDocument, spec: PopulationSpec) -> list[Problem]:
    """What pydantic cannot check: every age can be given an occupation and a household."""
    problems = []
    for group, items in (("occupations", spec.occupations), ("households", spec.households)):
        for i, bin_ in enumerate(spec.ages):
            lo, hi = bin_.range
            for age in range(lo, hi + 1):
                if not allowed_at(items, age):
                    problems.append(doc.problem(("ages", i, "range"), f"no entry of {group} allows age {age}"))
                    break
    for i, occ in enumerate(spec.occupations):
        for j, memory in enumerate(occ.memories):
            bad = _fields_of(memory) - {"first", "name"}
            if bad:
                problems.append(doc.problem(("occupations", i, "memories", j),
                                            "only {first} and {name} may appear in braces"))
    for i, name in enumerate(spec.names.first):
        if not slug(name):
            problems.append(doc.problem(("names", "first", i), f"{name!r} has no letters to make an id from"))
    return problems


def load_spec(path: Path | str) -> PopulationSpec:
    """Load and validate a population spec; errors name file, line and field."""
    doc = load_yaml(path, "population spec")
    spec = validate_document(doc, PopulationSpec, "population spec")
    problems = spec_problems(doc, spec)
    if problems:
        raise InputError(problems)
    return spec
