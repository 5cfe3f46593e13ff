"""What a run measures: the facts whose spread is traced, probe questions asked at the end, and
the older keyword topics (still loaded, no longer measured).

A **fact** is one piece of news with checkable details (for the flagship: a party, at Hobbs
Cafe, on February 14, from 17:00 to 19:00). It enters the town the way the scenario says: a
whisper or a place event that names it (``events[].fact``), or the seed memories of the
people in ``known_by``. From there the engine traces it through every memory that carries it
(docs/provenance.md): who heard it from whom, when, and which details survived.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from pydantic import Field, field_validator, model_validator

from simulation.formats.fields import Identifier, LongText, ShortText, StrictModel

__all__ = ["Fact", "FactDetail", "Probe", "Topic"]

_TIME = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class FactDetail(StrictModel):
    """One checkable part of a fact. ``kind`` says how it is recognised in what people say:

    * ``place``: ``value`` is a place id; its name (and ``aliases``) match, naming another place
      instead is a changed detail;
    * ``date``: ``value`` is "YYYY-MM-DD"; "February 14", "the 14th", its weekday, "tomorrow" the day
      before (and ``aliases``) match, another date or weekday instead is a changed detail;
    * ``time``: ``value`` is "HH:MM" or "HH:MM-HH:MM"; a clock time inside it matches ("5pm",
      "17:00", "five o'clock"), only times outside it is a changed detail;
    * ``text``: only ``aliases`` match (nothing counts as changed).
    """

    name: Identifier
    kind: Literal["place", "date", "time", "text"]
    value: ShortText
    aliases: list[ShortText] = Field(default_factory=list, description="more words that name this detail")

    @model_validator(mode="after")
    def _value_fits_kind(self) -> FactDetail:
        if self.kind == "date":
            try:
                date.fromisoformat(self.value)
            except ValueError:
                raise ValueError(f"a date detail's value is 'YYYY-MM-DD', not {self.value!r}") from None
        elif self.kind == "time":
            parts = self.value.split("-")
            if len(parts) > 2 or not all(_TIME.match(p.strip()) for p in parts):
                raise ValueError(f"a time detail's value is 'HH:MM' or 'HH:MM-HH:MM', not {self.value!r}")
            if len(parts) == 2 and parts[0].strip() > parts[1].strip():
                raise ValueError(f"the time range {self.value!r} ends before it starts")
        elif self.kind == "text" and not self.aliases:
            raise ValueError("a text detail needs 'aliases': the words that show it was passed on")
        return self


def unique_names(details: list[FactDetail]) -> list[FactDetail]:
    """``details`` if no two share a name (a fact's, or a correction's new ones), else ValueError."""
    names = [d.name for d in details]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"detail names must differ; repeated: {', '.join(doubled)}")
    return details


class Fact(StrictModel):
    id: Identifier
    name: ShortText | None = Field(
        None, description="what the town calls it, as said after 'the' (\"Valentine's Day party\"): how an "
        "invitation to it or a plan to go names it; default: the id, underscores as spaces")
    text: LongText = Field(min_length=1, description="the fact as one would tell it, with its details")
    details: list[FactDetail] = Field(default_factory=list)
    known_by: list[Identifier] = Field(
        default_factory=list, description="persona ids who know it from the start (a seed memory of its text)")

    @field_validator("details")
    @classmethod
    def _unique_names(cls, details: list[FactDetail]) -> list[FactDetail]:
        return unique_names(details)


class Probe(StrictModel):
    question: LongText = Field(min_length=1)
    agents: list[Identifier] | Literal["all"] = "all"
    fact: Identifier | None = Field(
        None, description="the fact this question asks about: answers are scored against its details")


class Topic(StrictModel):
    """Kept so that older scenario files load; spread is measured for ``facts:`` now."""

    id: Identifier
    keywords: list[ShortText] = Field(min_length=1, description="case-insensitive words that mark the topic")
