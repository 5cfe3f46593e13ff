"""JSON answer schemas for every question the engine asks an LLM.

Place fields are enums of the town's place ids, so a grammar-constrained model can only
name real places. Numbers are clamped after parsing rather than rejected: llama.cpp's
grammar cannot bound integers, and "stay 500 minutes" is better read as "a long while"
than thrown away. String lengths are bounded in the schema so answers end before
``max_tokens`` cuts them off.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model


def _clamp(lo: int, hi: int) -> AfterValidator:
    return AfterValidator(lambda v: max(lo, min(hi, v)))


def _bounded(lo: int, hi: int) -> Any:
    return Annotated[int, Field(json_schema_extra={"minimum": lo, "maximum": hi}), _clamp(lo, hi)]


def _text(max_length: int) -> Any:
    return Annotated[str, Field(min_length=1, max_length=max_length)]


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ReactAnswer(Answer):
    """On meeting someone: talk to them or carry on."""

    talk: bool
    greeting: Annotated[str, Field(max_length=120, description="what you say first, if you talk")]


class UtteranceAnswer(Answer):
    say: _text(160)  # type: ignore[valid-type]
    end_conversation: bool


class ProbeAnswer(Answer):
    answer: _text(240)  # type: ignore[valid-type]


class PlanItem(Answer):
    hour: int
    activity: str
    place: str


class DailyPlan(Answer):
    plan: list[PlanItem]


class NextAction(Answer):
    action: str
    place: str
    minutes: int


@lru_cache(maxsize=32)
def plan_model(place_ids: tuple[str, ...]) -> type[DailyPlan]:
    """A daily-plan answer model whose places must be these ids."""
    places = Literal[place_ids]  # type: ignore[valid-type]
    item = create_model(
        "PlanItem", __base__=PlanItem,
        hour=(_bounded(0, 23), ...), activity=(_text(60), ...), place=(places, ...),
    )
    return create_model("DailyPlan", __base__=DailyPlan, plan=(list[item], Field(min_length=1, max_length=8)))  # type: ignore[valid-type]


@lru_cache(maxsize=32)
def action_model(place_ids: tuple[str, ...]) -> type[NextAction]:
    """A next-action answer model whose place must be one of these ids."""
    places = Literal[place_ids]  # type: ignore[valid-type]
    return create_model(
        "NextAction", __base__=NextAction,
        action=(_text(60), ...), place=(places, ...), minutes=(_bounded(10, 180), ...),
    )
