"""Scenarios drafted by an LLM from a one-line topic (``agora scenario new``; issue 37, after HAMLET).

``pieces`` holds the answer models each piece is asked under (references as enums of what the
earlier pieces made), ``assemble`` puts the answers together as a scenario mapping, ``layout``
draws the map, and ``drafter`` asks the pieces, loads the result as ``agora validate`` does and
sends each problem back to the piece that made it.
"""

from simulation.authoring.drafter import Draft, DraftFailed, DraftOptions, draft, loader_problems, pieces_planned

__all__ = ["Draft", "DraftFailed", "DraftOptions", "draft", "loader_problems", "pieces_planned"]
