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


def clip(text: str, limit: int) -> str:
    """``text`` cut to fit a schema field of ``limit`` characters (safe defaults and examples are
    built from earlier answers and persona text, which may be longer than the field allows)."""
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _text(max_length: int) -> Any:
    return Annotated[str, Field(min_length=1, max_length=max_length)]


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ReactDetail(Answer):
    """What a person who stopped for something does instead (the decision to stop was a scored
    choice: ``cognition.react``)."""

    detail: _text(120)  # type: ignore[valid-type]


LINE_CHARS = 160
"""The longest line a person may say (``UtteranceAnswer.say``): the grammar closes the string there."""


class UtteranceAnswer(Answer):
    """The words of a line (what the line is for was chosen before: ``core.move``)."""

    say: _text(LINE_CHARS)  # type: ignore[valid-type]


class RecapAnswer(Answer):
    """After a conversation: what it was about, and how one now sees the other."""

    summary: _text(200)  # type: ignore[valid-type]
    view: _text(160)  # type: ignore[valid-type]
    feeling: _bounded(-5, 5)  # type: ignore[valid-type]
    importance: _bounded(1, 10)  # type: ignore[valid-type]


class ProbeAnswer(Answer):
    answer: _text(240)  # type: ignore[valid-type]


class PlanChoice(Answer):
    hour: int
    choice: int


class DailyPlan(Answer):
    yesterday: str = ""
    plan: list[PlanChoice]


class Questions(Answer):
    questions: list[str]


class Insight(Answer):
    insight: str
    evidence: list[int]


class Insights(Answer):
    insights: list[Insight]


MAX_PLAN_ITEMS = 10
MAX_INSIGHTS = 5


@lru_cache(maxsize=64)
def choice_plan_model(n_options: int, first_hour: int = 0, last_hour: int = 23,
                      with_yesterday: bool = False) -> type[DailyPlan]:
    """A daily plan chosen from a menu: each item an hour from ``first_hour`` to ``last_hour``
    and the number of one of ``n_options`` options. Both are enums, so the model can name
    nothing else (a grammar cannot bound a plain integer, and the bundled model counted hours
    from 1); numbers, not the options' text, so the schema holds no scenario text and the
    grammar stays small. With a one-line summary of yesterday written first when there was a
    yesterday (the plan is then chosen after it)."""
    hours = tuple(range(first_hour, max(first_hour, last_hour) + 1))
    item = create_model("PlanChoice", __base__=Answer, hour=(Literal[hours], ...),  # type: ignore[valid-type]
                        choice=(Literal[tuple(range(1, n_options + 1))], ...))  # type: ignore[valid-type]
    fields: dict[str, Any] = {}
    if with_yesterday:
        fields["yesterday"] = (_text(160), ...)
    fields["plan"] = (list[item], Field(min_length=1, max_length=MAX_PLAN_ITEMS))  # type: ignore[valid-type]
    return create_model("DailyPlan", __base__=DailyPlan, **fields)


@lru_cache(maxsize=4)
def questions_model(n: int = 3) -> type[Questions]:
    return create_model("Questions", __base__=Questions,
                        questions=(list[_text(120)], Field(min_length=n, max_length=n)))  # type: ignore[valid-type]


@lru_cache(maxsize=32)
def insights_model(n_statements: int) -> type[Insights]:
    """Up to five insights, each citing statements by their number (1..n_statements)."""
    numbers = Literal[tuple(range(1, n_statements + 1))]  # type: ignore[valid-type]
    insight = create_model(
        "Insight", __base__=Insight, insight=(_text(100), ...),
        evidence=(list[numbers], Field(min_length=1, max_length=5)),  # type: ignore[valid-type]
    )
    return create_model("Insights", __base__=Insights,
                        insights=(list[insight], Field(min_length=1, max_length=MAX_INSIGHTS)))  # type: ignore[valid-type]
