"""What a run measures: probe questions asked at the end, and topics whose spread is tracked."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simulation.scenario.fields import Identifier, LongText, ShortText, StrictModel

__all__ = ["Probe", "Topic"]


class Probe(StrictModel):
    question: LongText = Field(min_length=1)
    agents: list[Identifier] | Literal["all"] = "all"


class Topic(StrictModel):
    id: Identifier
    keywords: list[ShortText] = Field(min_length=1, description="case-insensitive words that mark the topic")
