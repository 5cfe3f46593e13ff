"""A memory cut into its sentences, for recognising a question by the sentence that answers it.

A memory of a line heard is "Daniel Okafor said to Grace Okafor: \"Grace, I was thinking of throwing
a Valentine's Day party at Hobbs Cafe tomorrow night. I'll invite as many people as possible,
right?\"": its embedding is the average of the frame, the party and the rest, and on the 1.5B's
runs of issue 33 step 9 such memories of the aware were 0.40-0.43 like "Do you know of a
Valentine's Day party? Where and when?", under the bar recognition sets. The sentence that names
the party, on its own, is as like the question as the news is. Recognition (``TownMemory.recognised``
with ``by_sentence``) compares the question with each sentence of a memory and keeps the best.
"""

from __future__ import annotations

import re

_BREAK = re.compile(r"(?<=[.!?:])[\"'\u201d]?\s+")
_QUOTES = " \"'\u201c\u201d"
MIN_WORDS = 3
"""A piece shorter than this ("Yes.", "Hi Grace!") is no sentence to recognise news by."""


def sentences(text: str) -> list[str]:
    """``text``'s sentences (a frame such as "Daniel said to Grace:" is one), quotes trimmed, those of
    fewer than ``MIN_WORDS`` words left out; the whole text when none is left."""
    parts = [p.strip(_QUOTES) for p in _BREAK.split(text)]
    return [p for p in parts if len(p.split()) >= MIN_WORDS] or [text]


__all__ = ["MIN_WORDS", "sentences"]
