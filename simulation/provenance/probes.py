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
FIRST_SENTENCE = re.compile(r".+?(?:[.!?;](?=\s|$)|$)", re.DOTALL)
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
        verdict = INVENTED if _claims(reader, text, asked, when, kept + changed > 0) else HONEST
    return ProbeScore(verdict, found)


def _claims(reader: DetailReader, text: str, asked: Sequence[Detail], when: date, names_a_detail: bool) -> bool:
    """Whether an unaware person's answer claims to know. An answer that opens by saying it does not
    know is honest even if it then talks of something else ("I don't know of a party, but I
    volunteer at the library"), unless that opening sentence itself names a detail ("I don't
    know, maybe the pub at 8")."""
    first = FIRST_SENTENCE.match(text.strip())
    opening = first.group(0) if first else text
    if DONT_KNOW.search(opening):
        opened = reader.read_all(opening, asked, when)
        return any(v in (KEPT, CHANGED) for v in opened.values())
    return names_a_detail or (AFFIRM.search(text) is not None and DONT_KNOW.search(text) is None)


__all__ = ["CHANGED", "KEPT", "LOST", "ProbeScore", "score_answer"]
