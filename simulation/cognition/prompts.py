"""Prompt rendering (jinja2 templates in ``templates/``) into chat messages.

The system message is the agent's persona block and never changes during a run, so the
llama.cpp backend keeps it evaluated between an agent's calls; the situation and the question
about it are two user messages (``messages``), so a situation asked about twice is read once.

Safety: persona and scenario text, and what the model wrote earlier (memories, plans,
dialogue), is data. It reaches a prompt only inside a tagged block (``<persona>``, ``<town>``,
``<situation>``, ``<memories>``) that the system message declares to be data, never
instructions, or JSON-encoded inside an ``Example:`` answer. Every ``{{ value }}`` passes
through ``neutralise``, so no inserted text can open or close a block. The answer format is
the request's JSON schema, built from code and place ids only, so no text can change it.
"""

from __future__ import annotations

from typing import Any

from simulation.formats import templating
from simulation.formats.templating import neutralise  # noqa: F401  (the rule, for callers that import it from here)
from simulation.llm.types import PIECE_BREAK

DATA_TAGS = ("persona", "town", "situation", "memories", "memory", "choices")
"""The blocks that hold data in cognition prompts."""


def render(template: str, **context: Any) -> str:
    return templating.render(("simulation.cognition",), template, **context)


SITUATION_END = "</situation>\n"


def messages(system: str, template: str, **context: Any) -> list[dict[str, str]]:
    """The system message, then the rendered question: its ``<situation>`` block as one user
    message and what is asked about it as another. The split is for the llama.cpp backend, which
    keeps every message but the last as a reusable prefix (``simulation.llm.llamacpp.prefix_cache``):
    the move a speaker chooses and the line they then say share one situation, read once.

    With a working memory (``batches``: ``cognition.working``) the situation message opens with
    it, one ``<memories>`` block, each batch followed by a
    ``PIECE_BREAK``: the block grows at its end from one question of the person to the next, so
    the backend reuses it up to the last batch and evaluates only the new one. It used to be one
    user message per batch, several in a row before the situation, which a capable model read
    less well (docs/benchmarks/live-measure)."""
    text = render(template, **context)
    first = [{"role": "system", "content": system}]
    batches = context.get("batches") or ()
    parts = [render("_working.j2", first=context.get("first", ""), memories=batch, opening=not i)
             for i, batch in enumerate(batches)]
    working = "".join(part.rstrip("\n") + "\n" + PIECE_BREAK for part in parts) + "</memories>\n" if parts else ""
    head, sep, tail = text.partition(SITUATION_END)
    if sep and tail.strip():
        return [*first, {"role": "user", "content": working + head + sep.rstrip("\n")}, {"role": "user", "content": tail}]
    return [*first, {"role": "user", "content": working + text}]
