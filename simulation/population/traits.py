"""Words for a sampled person's Big Five: trait adjectives and a speaking style a reader (and an LLM) can use.

Only clearly high or low factors get words, so an average person is not given a character
the numbers do not support.
"""

from __future__ import annotations

from simulation.formats.persona import BigFive
from simulation.population.spec import FACTORS

__all__ = ["speaking_style_for", "traits_for"]

# Words for the ends of each factor: what a neighbour would say about someone.
_POLES = {
    "openness": (("practical", "conventional"), ("curious", "imaginative")),
    "conscientiousness": (("easy-going", "disorganised"), ("organised", "dependable")),
    "extraversion": (("quiet", "reserved"), ("outgoing", "talkative")),
    "agreeableness": (("blunt", "sceptical"), ("kind", "trusting")),
    "neuroticism": (("calm", "even-tempered"), ("anxious", "moody")),
}


def traits_for(b5: BigFive) -> list[str]:
    """Adjectives for the factors that are clearly high or low (two words when extreme)."""
    words: list[str] = []
    for factor in FACTORS:
        v = getattr(b5, factor)
        low, high = _POLES[factor]
        if v >= 0.65 or v <= 0.35:
            pole = high if v >= 0.65 else low
            words.extend(pole if v >= 0.8 or v <= 0.2 else pole[:1])
    return words or ["even-keeled"]


def speaking_style_for(b5: BigFive) -> str:
    parts = []
    if b5.extraversion >= 0.65:
        parts.append("Talks readily and at length, and starts conversations with strangers.")
    elif b5.extraversion <= 0.35:
        parts.append("Says little, in short sentences, and rarely starts a conversation.")
    else:
        parts.append("Chats easily with people they know, less so with strangers.")
    if b5.agreeableness >= 0.65:
        parts.append("Warm and polite; thanks people and softens any disagreement.")
    elif b5.agreeableness <= 0.35:
        parts.append("Blunt; disagrees openly and does not soften criticism.")
    if b5.neuroticism >= 0.65:
        parts.append("Often voices worries and second thoughts.")
    elif b5.neuroticism <= 0.35:
        parts.append("Sounds unhurried and sure of themself.")
    if b5.openness >= 0.65:
        parts.append("Likes to bring up ideas, books and plans.")
    return " ".join(parts)
