"""The IPIP-50 Big-Five factor markers: items, keys and scoring.

Data: ``data/ipip50.json``, the 50-item IPIP representation of Goldberg's (1992) Big-Five
markers from the International Personality Item Pool (ipip.ori.org), public domain.
The inventory names two factors differently from a persona's targets: *intellect* is scored as
openness, and *emotional stability* is the reverse of neuroticism, so its plus-keyed items are
minus-keyed for neuroticism. Scoring: a minus-keyed answer x counts as 6 - x; a factor is the
mean of its answered items (1-5), rescaled to 0-1 as (mean - 1) / 4.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

FACTORS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
_AS_TARGET = {"intellect": ("openness", 1), "emotional_stability": ("neuroticism", -1)}


@dataclass(frozen=True)
class Item:
    id: int
    text: str
    factor: str
    """One of FACTORS (the persona's target names)."""
    sign: int
    """+1 if agreeing raises the factor, -1 if it lowers it (scored 6 - x)."""

    @property
    def statement(self) -> str:
        """First-person form: 'Am the life of the party.' -> 'I am the life of the party.'"""
        return "I " + self.text[:1].lower() + self.text[1:]


@lru_cache(maxsize=1)
def inventory() -> dict:
    """The shipped inventory file (name, source, response scale, items)."""
    text = resources.files("simulation.evaluation").joinpath("data/ipip50.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def items() -> tuple[Item, ...]:
    out = []
    for raw in inventory()["items"]:
        factor, flip = _AS_TARGET.get(raw["factor"], (raw["factor"], 1))
        sign = (1 if raw["keyed"] == "plus" else -1) * flip
        out.append(Item(int(raw["id"]), raw["text"], factor, sign))
    return tuple(out)


def select(n: int | None) -> tuple[Item, ...]:
    """The first ``n`` items (all when None). The inventory cycles through the five factors,
    so any multiple of 5 is balanced across them."""
    all_items = items()
    return all_items if n is None or n >= len(all_items) else all_items[:n]


def keyed_score(item: Item, answer: float) -> float:
    """The item's contribution on its factor's 1-5 scale."""
    return answer if item.sign > 0 else 6 - answer


@dataclass(frozen=True)
class FactorScore:
    factor: str
    mean: float | None
    """Mean keyed score on 1-5, None if no item of the factor was answered."""
    answered: int
    missing: int

    @property
    def scaled(self) -> float | None:
        """The 0-1 score comparable with a persona's target."""
        return None if self.mean is None else (self.mean - 1.0) / 4.0


def score(answers: dict[int, float | None], asked: tuple[Item, ...]) -> dict[str, FactorScore]:
    """Factor scores from answers by item id (None or absent = not answered)."""
    out = {}
    for factor in FACTORS:
        mine = [it for it in asked if it.factor == factor]
        got = [keyed_score(it, answers[it.id]) for it in mine if answers.get(it.id) is not None]  # type: ignore[arg-type]
        out[factor] = FactorScore(factor, sum(got) / len(got) if got else None, len(got), len(mine) - len(got))
    return out
