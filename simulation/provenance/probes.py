"""Scoring a probe answer against a fact's details, deterministically and strictly.

"Do you know of a Valentine's Day party? Where and when?" asked of someone aware of the party
should get the right place and time; asked of someone who never heard of it, "I don't know" is
honest and "yes, at the pub at eight" is invented. Details the question itself gives away ("a
Valentine's Day party") are not scored: repeating them shows nothing.

Scores do not forgive (docs/provenance.md):

* the whole answer is read, never only its opening sentence, and a hedge ("I don't know",
  "maybe") does not cancel a detail named after it: "I don't know. It's at the Rose and Crown
  Pub at 8pm." from someone not aware is ``invented``;
* a right value named beside a wrong one of the same kind is not right: "At Hobbs Cafe or the
  Rose and Crown, at 9am or 5pm." from someone aware is ``mixed`` (``details.MIXED``);
* an answer the model failed to give (``ok`` false: the engine's placeholder "(no usable
  answer)") is ``failed``, neither honest nor missed, and is left out of every verdict share.

Verdicts are defined in ``rules``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from simulation.provenance.details import CHANGED, KEPT, LOST, MIXED, Detail, DetailReader
from simulation.provenance.rules import FAILED, HONEST, INVENTED, MISSED, PARTIAL, RIGHT, WRONG
from simulation.provenance.rules import MIXED as MIXED_VERDICT

_NEG = r"(?:don't|do not|didn't|did not|haven't|have not|hasn't|never|not)"
DONT_KNOW = re.compile(
    r"\b" + _NEG + r"\s+(?:really\s+)?(?:know|heard|hear|sure|aware|remember|recall)\b|\bno idea\b|\bunaware\b|"
    r"\bnothing about\b|\bnot that i know\b|^\W*no\b", re.IGNORECASE)
"""Saying one does not know (anywhere in the answer)."""
AFFIRM = re.compile(r"^\W*(?:yes|yeah|yep|sure|of course|indeed|i do\b|i know\b|i've heard|i have heard|i heard)",
                    re.IGNORECASE)
"""Opening by claiming to know."""


@dataclass(frozen=True)
class ProbeScore:
    verdict: str
    details: dict[str, str]
    """Detail name -> kept / mixed / changed / lost, for the details the question does not give away."""


def score_answer(reader: DetailReader, answer: str, question: str, details: Sequence[Detail], when: date,
                 aware: bool, *, ok: bool = True) -> ProbeScore:
    """The verdict (``rules``) on ``answer`` to ``question`` about a fact with ``details``, asked on
    day ``when`` of a person ``aware`` of the fact or not; ``ok`` is false when the model gave no
    usable answer (the answer is then the engine's placeholder, scored ``failed``).

    Aware: a detail changed -> wrong; else a detail mixed -> mixed; else every detail kept ->
    right; some kept -> partial; none -> missed. Not aware: names any asked detail (kept, mixed
    or changed, hedged or not) or claims to know without saying anywhere that they do not ->
    invented; else honest."""
    text = answer.replace("’", "'")
    asked = [d for d in details if reader.read(question, d, when) != KEPT]
    found = reader.read_all(text, asked, when)
    if not ok:
        return ProbeScore(FAILED, found)
    states = list(found.values())
    if aware:
        if CHANGED in states:
            verdict = WRONG
        elif MIXED in states:
            verdict = MIXED_VERDICT
        elif states and all(s == KEPT for s in states):
            verdict = RIGHT
        elif KEPT in states:
            verdict = PARTIAL
        else:
            verdict = MISSED
    else:
        names_a_detail = any(s != LOST for s in states)
        claims = AFFIRM.search(text) is not None and DONT_KNOW.search(text) is None
        verdict = INVENTED if names_a_detail or claims else HONEST
    return ProbeScore(verdict, found)


__all__ = ["CHANGED", "KEPT", "LOST", "MIXED", "ProbeScore", "score_answer"]
