"""What every prompt shows about a person's situation.

``context`` retrieves the person's memories for a query (batched with the phase's other
retrievals) and lays out time, place, what the person is doing, what is on their mind and
what they remember (with ``cognition.live_context``: their working memory for the day, as
``batches`` of lines that ``prompts.messages`` shows as one growing block, ``cognition.working``);
``situation`` is the same without memories. Questions go to the LLM through ``Mind.ask``; a
phase's retrievals go out before its questions (simulation/llm/batching.py), so every question of
a phase goes out in one batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from simulation.cognition.working import remember_shown
from simulation.core import MemoryKind, Status

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind


def memory_line(node: Any) -> str:
    return f"({node.created:%a %H:%M}) {node.text}"


async def context(me: AgentState, mind: Mind, query: str, purpose: str, exclude: Iterable[int] = (),
                  live: bool = True) -> dict[str, Any]:
    """Prompt variables shared by every question (``_context.j2``), with the top-k memories for
    ``query``: with ``cognition.live_context`` (and ``live``) merged into the person's working
    memory and shown as its ``batches``."""
    thoughts = mind.memories(me.id).recent(2, kinds=(MemoryKind.THOUGHT,))
    skip = {n.id for n in thoughts} | set(exclude)
    retrieved = await mind.retrieve(me.id, query, purpose, exclude=skip) if query else []
    if live and mind.settings.live_context:
        remember_shown(me, mind, retrieved)
        batches = [[memory_line(mind.memory(i)) for i in batch] for batch in me.working]
        return showing(me, mind, [], thoughts=[n.text for n in thoughts]) | {"batches": batches}
    return showing(me, mind, sorted(retrieved, key=lambda n: n.id), thoughts=[n.text for n in thoughts])


def showing(me: AgentState, mind: Mind, nodes: Iterable[Any], thoughts: Iterable[str] = ()) -> dict[str, Any]:
    """``situation`` with ``nodes`` as what the person remembers, in the order given (for a question
    that brings its own memories: the newest few, or those a probe made familiar)."""
    return situation(me, mind) | {"thoughts": list(thoughts), "memories": [memory_line(n) for n in nodes]}


def situation(me: AgentState, mind: Mind) -> dict[str, Any]:
    """Time, place and doing, without memories (for questions that bring their own)."""
    return {
        "p": me.persona,
        "first": me.first_name,
        "now": mind.now.strftime("%A %d %B, %H:%M"),
        "today": mind.now.strftime("%A %d %B"),
        "place": mind.place_name(me.place),
        "objects": mind.objects(me.place),
        "doing": "" if me.status in (Status.IDLE, Status.WAKING) else mind.doing(me),
        "thoughts": [],
        "memories": [],
        "mood": me.mood if mind.settings.moods else "",
    }
