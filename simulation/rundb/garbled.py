"""Garbled lines: a line that is a bare word ("Fiona", "furthermore"), reads the prompt's frame
back ("The conversation so far: Fiona greeted Walter.", "In Isabella's own words and speaking style")
or is the model refusing as an assistant ("I'm sorry, but I can't assist with that.").

An instruction-tuned model asked for a townsperson's line sometimes steps out of the person and
refuses as the assistant it was trained to be (3 of the 1.5B measurement model's 108 lines in
step 9's runs); nobody in the town said it either. The rule is narrow on purpose: "I'm sorry, I
can't make it" is a person's line; only the assistant's register ("assist with", "as an AI",
"language model", "I'm sorry, but I can't help") counts.

A small model asked for a line sometimes continues the prompt instead of speaking; a reader sees
at once that nobody said it, so the behaviour report counts such lines (``talk.garbled_share``).
The engine rejects them when they are written (``cognition.converse.check_spoken``, by the same
rule); this counts what got through, so an engine that let them pass is measured by it too.
"""

from __future__ import annotations

import re
from typing import Any

SCAFFOLDING = ("the conversation so far", "own words and speaking style", "write only what",
               "nothing has been said yet", "has just gone up to")
"""Words of the utterance prompt's frame (``utterance.j2``, ``_dialogue.j2``)."""

REFUSAL = re.compile(
    r"\b(?:as an ai\b|ai (?:language )?model|language model|"
    r"(?:can(?:no|')t|unable to|not able to) assist\b|"
    r"(?:i'm|i am) sorry, but i (?:can(?:no|')t|am unable to|won't) (?:help|assist|provide|fulfil|comply))",
    re.IGNORECASE)
"""An assistant's refusal or self-description, not a townsperson's words."""

_TERMINAL = re.compile(r"[.!?][\"')]*$")


def garbled(text: str) -> str | None:
    """Why ``text`` is not a line anyone said (a bare word, the prompt's frame read back), else None.
    A single word with a sentence's end ("Yes.", "Mate!") is a line."""
    words = text.split()
    if len(words) == 1 and not _TERMINAL.search(text.strip()):
        return "is a bare word, not a line"
    low = text.lower()
    if any(phrase in low for phrase in SCAFFOLDING):
        return "reads the prompt back instead of speaking"
    if REFUSAL.search(text.replace("\u2019", "'")):
        return "is the model refusing as an assistant, not the person speaking"
    return None


def garbled_lines(con: Any, run_id: str) -> tuple[int, int]:
    """(lines said that are garbled, lines said) in a run."""
    bad = lines = 0
    for text, in con.execute("select text from utterances where run_id = ?", [run_id]):
        lines += 1
        bad += bool((text or "").strip()) and garbled(text) is not None
    return bad, lines


__all__ = ["REFUSAL", "SCAFFOLDING", "garbled", "garbled_lines"]
