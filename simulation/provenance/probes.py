"""Scoring a probe answer against a fact's details, deterministically.

"Do you know of a Valentine's Day party? Where and when?" asked of someone aware of the party
should get the right place and time; asked of someone who never heard of it, "I don't know" is
right and "yes, at the pub at eight" is invented. Details the question itself gives away ("a
Valentine's Day party") are not scored: repeating them shows nothing. Verdicts are defined in
``rules``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from simulation.provenance.details import CHANGED, KEPT, LOST, Detail, DetailReader
from simulation.provenance.rules import HONEST, INVENTED, MISSED, PARTIAL, RIGHT, WRONG

_NEG = r"(?:don't|do not|didn't|did not|haven't|have not|hasn't|never|not)"
DONT_KNOW = re.compile(
    r"\b" + _NEG + r"\s+(?:really\s+)?(?:know|heard|hear|sure|aware|remember|recall)\b|\bno idea\b|\bunaware\b|"
    r"\bnothing about\b|\bnot that i know\b|^\W*no\b", re.IGNORECASE)
AFFIRM = re.compile(r"^\W*(?:yes|yeah|yep|sure|of course|indeed|i do\b|i know\b|i've heard|i have heard|i heard)",
                    re.IGNORECASE)


@dataclass(frozen=True)
class ProbeScore:
    verdict: str
    details: dict[str, str]
    """Detail name -> kept / lost / changed, for the details the question does not give away."""


def score_answer(reader: DetailReader, answer: str, question: str, details: Sequence[Detail], when: date,
                 aware: bool) -> ProbeScore:
    text = answer.replace("’", "'")
    asked = [d for d in details if reader.read(question, d, when) != KEPT]
    found = reader.read_all(text, asked, when)
    kept = sum(v == KEPT for v in found.values())
    changed = sum(v == CHANGED for v in found.values())
    if aware:
        if changed:
            verdict = WRONG
        elif kept and kept == len(found):
            verdict = RIGHT
        elif kept:
            verdict = PARTIAL
        else:
            verdict = MISSED
    else:
        claims = kept + changed > 0 or (AFFIRM.search(text) is not None and DONT_KNOW.search(text) is None)
        verdict = INVENTED if claims else HONEST
    return ProbeScore(verdict, found)


__all__ = ["CHANGED", "KEPT", "LOST", "ProbeScore", "score_answer"]
