"""How much a person leans towards starting a conversation: a prior from who they are.

A capable small model asked "carry on, stop, or talk to Daniel?" is nearly indifferent: the 1.5B
measurement model put 0.3-0.4 on talking whoever asked and whomever they saw, and its persona
*lowered* it (scored with and without the persona block, four reaction prompts: 0.30-0.35 with,
0.36-0.43 without). So who starts a conversation was chance, and an outgoing café owner was as
shy as a reserved pharmacist. People differ in this before any situation does: extraverts start
conversations more often, and everyone talks more readily to someone they know and like.

The prior is an odds factor on the "talk" option, multiplied into the model's (calibrated)
probabilities before the draw, a product of experts:

    factor = exp(strength * (2 * (extraversion - 0.5) + KNOWN * knows + LIKES * sentiment))

An average person meeting a stranger gets 1 (the model alone decides); an outgoing one (0.85)
meeting a friend (sentiment 0.4) about 4; a reserved one (0.2) meeting a stranger about 0.55.
``cognition.talk_prior`` is the strength (0 turns it off). The model still decides: a factor
scales its odds, it never replaces them, and the scripted control (no model) is unmoved by it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulation.formats.persona import BigFive
    from simulation.world.relationships import Tie

KNOWN = 0.5
"""Log-odds added for someone the person knows (a relationship, seeded or made in the run)."""
LIKES = 0.5
"""Log-odds per unit of sentiment (-1..1) towards them."""


def talk_odds(big_five: BigFive, tie: Tie | None, strength: float) -> float:
    """The factor the odds of starting a conversation are multiplied by (1 at strength 0)."""
    lean = 2 * (big_five.extraversion - 0.5)
    if tie is not None:
        lean += KNOWN + LIKES * max(-1.0, min(1.0, tie.sentiment))
    return math.exp(strength * lean)


def weighted(probabilities: list[float], factors: list[float] | None) -> list[float]:
    """``probabilities`` times per-option ``factors``, renormalised (unchanged without factors)."""
    if factors is None:
        return probabilities
    weights = [p * f for p, f in zip(probabilities, factors, strict=True)]
    total = sum(weights)
    return [w / total for w in weights] if total > 0 else probabilities


__all__ = ["KNOWN", "LIKES", "talk_odds", "weighted"]
