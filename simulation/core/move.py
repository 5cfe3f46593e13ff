"""A move in a conversation: what a line is for (its aim) and what it is about (its topic).

A 135M model asked "what does Margaret say next?" repeats the last line it was shown. Asked to
say a particular thing (tell Daniel about the market; ask him about his plans; invite him to the
party at Hobbs Cafe on Tuesday 14 February, 17:00-19:00), it says that. So each turn the engine
lists the moves open to the speaker (``cognition.aims``), the model chooses one, and then
writes the words for it; the conversation keeps its moves beside its lines, so the next
speaker's options follow from the last move (a question is answered, an invitation accepted or
declined) and the prompt can show what was done, not only what was said.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulation.core.happening import Happening
from simulation.core.vocabulary import Aim


@dataclass(frozen=True)
class Move:
    aim: Aim
    topic: str = ""
    """What it is about, in words the prompt shows: the news told, the question's subject, the
    happening invited to ("" for a greeting or goodbye)."""
    memory_id: int | None = None
    """For ``share``: the speaker's memory told (so it is not told to the same person twice)."""
    happening: Happening | None = None
    """For ``invite``, ``accept`` and ``decline``: what the invitation is to."""
    invitation_id: int | None = None
    """For ``invite``, ``accept`` and ``decline``: the ``invitations`` row."""
