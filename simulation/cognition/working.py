"""A person's working memory for the day: the memories their questions have shown them, kept in
the order they were first shown, so that each question adds only what is new.

Why (issue 34): a question used to show the memories retrieved for it, sorted by time, inside the
situation message. Two questions of one person a few minutes apart retrieve mostly the same
memories, but the message differs (one memory more, one fewer), so the llama.cpp backend,
which reuses a prompt's messages only up to the first that changed
(``simulation.llm.llamacpp.prefix_cache``), evaluated all of them again: about 500 tokens a
question, most of a reaction's or a move's cost. Here each question's retrieval is merged into
the person's working memory: the memories not shown to them yet today become one new batch at
its end, and the prompt shows every batch so far in one ``<memories>`` block that opens the
situation message, each batch ending in a piece break (``prompts.messages``,
``simulation.llm.types.PIECE_BREAK``). The text before the new batch is then that of the
person's last question, already evaluated, restored from a saved state when their sequence held
someone else's meanwhile. (Until 2026-11-30 each batch was a user message of its own, several in
a row; the 1.5B measurement model's lines fell back twice as often: docs/benchmarks/live-measure.)

What the person sees changes: every memory retrieved for any of their questions today, not only
this question's, in the order they came to mind (each line carries its time). The retrieval's
choice is still there (its memories are all shown, the new ones last), so nothing relevant is
lost; what is added is what was relevant earlier in the day. When its lines would pass
``WORKING_SHARE`` of the person's context window (estimated by characters, so a prompt still has
room for the persona, the situation, the question and the answer) or ``WORKING_LINES`` lines,
the working memory starts again from this question's retrieval (the person's context is
evaluated anew then, once), and every new day starts it empty. Probes do not use it: an
end-of-run question is asked over its own retrieval, and leaves the working memory as it was.

Deterministic and exact on resume: the batches are memory ids on ``AgentState.working``, stored
with the person at every tick; ``context`` rebuilds their lines from the memory stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from simulation.llm.backend import estimate_tokens

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

__all__ = ["WORKING_LINES", "WORKING_SHARE", "remember_shown"]

WORKING_LINES = 40
"""Memory lines a person's working memory holds at most before it starts again."""
WORKING_SHARE = 0.3
"""The share of the person's context window (``Mind.settings_of(me).context_tokens``) its lines
may take: 614 tokens of the flagship's 2,048, beside a persona of about 700."""


def remember_shown(me: AgentState, mind: Mind, nodes: Iterable[Any]) -> None:
    """Add the memories a question retrieved (``nodes``) to ``me``'s working memory: those not
    shown yet today, in time order, as one batch at its end."""
    today = mind.now.date()
    if me.working_day != today:
        me.working, me.working_day = [], today
    shown = {i for batch in me.working for i in batch}
    fresh = sorted((n for n in nodes if n.id not in shown), key=lambda n: n.id)
    if not fresh:
        return
    budget = WORKING_SHARE * mind.settings_of(me).context_tokens
    lines = [mind.memory(i) for i in shown] + fresh
    if len(lines) > WORKING_LINES or _tokens(lines) > budget:
        me.working = [sorted(n.id for n in nodes)]
        return
    me.working.append([n.id for n in fresh])


def _tokens(nodes: Iterable[Any]) -> int:
    """The lines' tokens as ``estimate_tokens`` guesses them (over-counting, so the prompt fits)."""
    return estimate_tokens([{"content": "".join(f"- ({n.created:%a %H:%M}) {n.text}\n" for n in nodes)}])

