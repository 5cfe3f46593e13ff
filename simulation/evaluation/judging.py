"""Judge answers: a short assessment and a fixed final line, ``Score: N``, then the score read
from the judge's probabilities.

The judge writes its assessment and final line first (reasoning before the number). The score
itself is then asked as a rating: the judge's own assessment is put back as its answer, and the
score is the expected value over its probabilities of answering ``lo`` ... ``hi``
(``judged_score``, ``simulation.llm.scoring``), not the digit it happened to sample. Where the
backend cannot score, the final line is the score, as before:

The score sits in a fixed final line (as in PersonaGym's judges). The answer's JSON schema
gives that line a pattern, so a backend that enforces schemas (a llama.cpp grammar, vLLM,
OpenAI ``json_schema``) can only write ``Score: N`` on the scale; the line is still parsed
strictly, because a server without structured output can write anything. A line that does
not parse, or a score off the scale, is retried once with the reason, and a judgement that
is still unparsable is dropped and counted, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from functools import lru_cache
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, create_model

JUDGE_TOKENS = 300
"""Enough for the longest answer the schema allows even at one token per character: a judgement
cut off at max_tokens is not JSON, and would be dropped for the wrong reason."""

_FINAL = re.compile(r"^\s*score\s*:\s*(\d+)\s*(?:/\s*(\d+))?\s*\.?\s*$", re.IGNORECASE)


class JudgeAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    assessment: Annotated[str, Field(max_length=240)]
    final_line: Annotated[str, Field(max_length=24)]


@lru_cache(maxsize=8)
def judge_model(lo: int, hi: int) -> type[JudgeAnswer]:
    """A judgement whose schema lets the final line be only ``Score: N`` with ``lo <= N <= hi`` (one digit).

    The pattern is for the backend's grammar only; parsing stays lenient-but-strict in
    ``parse_final_line``, so "Score: 4/5" from an unconstrained server still counts."""
    line = Annotated[str, Field(max_length=24, json_schema_extra={"pattern": f"^Score: [{lo}-{hi}]$"})]
    return create_model(f"Judgement{lo}to{hi}", __base__=JudgeAnswer, final_line=(line, ...))


def no_judgement(lo: int, hi: int) -> JudgeAnswer:
    """The default when the judge gave nothing usable: parses to None, so it is dropped."""
    return judge_model(lo, hi)(assessment="", final_line="")


def parse_final_line(text: str, lo: int, hi: int) -> int | None:
    """The score of a ``Score: N`` line (``Score: 4/5`` and a final period allowed), or None.

    None when the line has another shape, N is outside ``lo..hi``, or a ``/M`` is not ``/hi``."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    if not lines:
        return None
    match = _FINAL.match(lines[-1])
    if not match:
        return None
    score, out_of = int(match.group(1)), match.group(2)
    if out_of is not None and int(out_of) != hi:
        return None
    return score if lo <= score <= hi else None


def final_line_check(lo: int, hi: int) -> Callable[[JudgeAnswer], str | None]:
    """A client ``check``: a judgement whose final line does not parse is retried once."""

    def check(answer: JudgeAnswer) -> str | None:
        if parse_final_line(answer.final_line, lo, hi) is None:
            return f'final_line must be exactly "Score: N" with N a whole number from {lo} to {hi}'
        return None

    return check


def scale(lo: int, hi: int) -> tuple[tuple[str, ...], list[float]]:
    """A rating scale's answer options and their values."""
    return tuple(str(v) for v in range(lo, hi + 1)), [float(v) for v in range(lo, hi + 1)]


def score_messages(messages: list[dict[str, str]], assessment: str, lo: int, hi: int) -> list[dict[str, str]]:
    """The judge's conversation with its assessment as its answer, and the score asked for alone."""
    return [*messages, {"role": "assistant", "content": assessment.strip() or "(no assessment)"},
            {"role": "user", "content": f"So your score, from {lo} to {hi}? Answer with the number only."}]


RateFn = Callable[[list[dict[str, str]], Sequence[str], Sequence[float]], Awaitable[object]]


async def judged_score(rate: RateFn, messages: list[dict[str, str]], verdict: JudgeAnswer, ok: bool,
                       lo: int, hi: int) -> float | None:
    """The judgement's score: the expected value over the judge's probabilities of each score
    after its own assessment (``rate(messages, options, values)`` returns a ``Rating``); the
    final line's N where the backend gave no probabilities; None for a judgement that failed."""
    if not ok:
        return None
    written = parse_final_line(verdict.final_line, lo, hi)
    rating = await rate(score_messages(messages, verdict.assessment, lo, hi), *scale(lo, hi))
    if getattr(rating, "ok", False) and not getattr(rating, "sampled", True):
        return round(float(rating.value), 4)  # type: ignore[attr-defined]
    return None if written is None else float(written)
