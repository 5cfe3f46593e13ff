"""Garbled lines: a line that is a bare word ("Fiona", "furthermore") or reads the prompt's frame
back ("The conversation so far: Fiona greeted Walter.", "In Isabella's own words and speaking style").

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
    return None


def garbled_lines(con: Any, run_id: str) -> tuple[int, int]:
    """(lines said that are garbled, lines said) in a run."""
    bad = lines = 0
    for text, in con.execute("select text from utterances where run_id = ?", [run_id]):
        lines += 1
        bad += bool((text or "").strip()) and garbled(text) is not None
    return bad, lines


__all__ = ["SCAFFOLDING", "garbled", "garbled_lines"]
