"""The rubric a judge applies to one turn of a town simulation, and the answer it must give.

Four items, each an integer from 1 to 5 (constrained by the answer's JSON schema as an enum,
so a grammar-enforcing backend can write nothing else, and validated again by pydantic, so a
server that does not enforce schemas cannot slip in a 7 or "four"). The answer is the four
scores and nothing else: a free-text assessment bounded in length becomes, in a llama.cpp
grammar, a rule nested once per character, and on the bundled model one 240-character
assessment took four minutes to write, while a whole pass of scores-only judgements averaged
about two seconds a call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

LO, HI = 1, 5
"""The fixed scale of every rubric item."""

Score = Literal[1, 2, 3, 4, 5]


@dataclass(frozen=True)
class Item:
    key: str
    utterance: str
    """What the item asks of a line someone said."""
    action: str
    """What the item asks of something someone decided to do."""


ITEMS: tuple[Item, ...] = (
    Item("in_character",
         "the line fits who this person is: personality, occupation, circumstances and speaking style",
         "the decision fits who this person is: personality, occupation, circumstances and habits"),
    Item("goals",
         "the line moves this person's own goals or plan for the day forward (or at least does not work against them)",
         "the decision moves this person's own goals or plan for the day forward"),
    Item("responsive",
         "the line responds to what the other person just said, rather than ignoring or repeating it",
         "the decision responds to the situation: the place, the people there and what the person noticed"),
    Item("plausible",
         "a real person would plausibly say this here: socially natural, polite enough, not strange",
         "a real person would plausibly do this here and now: socially natural, not strange"),
)
KEYS: tuple[str, ...] = tuple(i.key for i in ITEMS)
ANCHORS = "1 = not at all, 2 = barely, 3 = partly, 4 = mostly, 5 = fully"


class RubricAnswer(BaseModel):
    """The judge's answer for one turn (the JSON schema sent with every judge request)."""

    model_config = ConfigDict(extra="ignore")

    in_character: Score
    goals: Score
    responsive: Score
    plausible: Score

    def scores(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in KEYS}


NO_ANSWER = RubricAnswer(in_character=1, goals=1, responsive=1, plausible=1)
"""The client's default after two unusable answers: never stored, the turn is dropped."""

JUDGE_TOKENS = 160
"""Room for four scores with all the white space a JSON grammar allows between them, so no
judgement is cut off into invalid JSON and dropped for the wrong reason."""


def criteria(kind: str) -> list[tuple[str, str]]:
    """(key, what it asks) for a turn of ``kind`` ("utterance", "action" or "reaction")."""
    return [(i.key, i.utterance if kind == "utterance" else i.action) for i in ITEMS]


def text(kind: str) -> str:
    """The rubric as the judge reads it, and as the GRPO export's ``rubric`` column carries it."""
    lines = [f"- {key}: {what}" for key, what in criteria(kind)]
    return f"Score each item from {LO} to {HI} ({ANCHORS}):\n" + "\n".join(lines)
