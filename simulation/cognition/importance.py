"""Importance (poignancy) of new memories, rated by the LLM in one question per agent.

An agent's unrated memories wait until the agent next thinks (so an agent walking or busy
costs nothing), then are rated together: up to ``CHUNK`` memories a question, all agents'
questions in one batch, before the agent decides. Trivial events were created with
importance 1, the agent's own planned actions carry the rating their plan gave them, and
utterances are rated with their conversation's recap, so none of those needs a question.

An agent that thinks every tick (in a busy place, it keeps noticing people) would otherwise
ask every tick about one or two memories. Its memories wait instead until ``RATE_AT`` of them
are unrated, the oldest has waited ``RATE_WITHIN``, or it wakes up and plans its day; until
then retrieval treats them as of middling importance. In the 25-agent town this halves the
importance questions (``bench/town.py``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.phase import Phase
from simulation.cognition.schemas import importance_model
from simulation.core import Purpose, Status
from simulation.memory.stream import UNRATED_IMPORTANCE, MemoryNode

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

CHUNK = 8
RATE_AT = 4
RATE_WITHIN = timedelta(minutes=60)


def rating_due(me: AgentState, mind: Mind) -> bool:
    """Whether the person's unrated memories are rated this tick (they think now, see above)."""
    unrated = mind.memories(me.id).unrated
    if not unrated:
        return False
    return me.status == Status.WAKING or len(unrated) >= RATE_AT or mind.now - unrated[0].created >= RATE_WITHIN


async def _rate(me: AgentState, mind: Mind, nodes: list[MemoryNode]) -> None:
    model = importance_model(len(nodes))
    default = model(ratings=[int(UNRATED_IMPORTANCE)] * len(nodes))
    msgs = prompts.messages(me.system_prompt, "importance.j2", first=me.first_name,
                            memories=[n.text for n in nodes],
                            example=model(ratings=[2 + i % 5 for i in range(len(nodes))]).model_dump_json())
    answer = await mind.ask(me, msgs, model, default=default, purpose=Purpose.IMPORTANCE,
                            max_tokens=8 + 4 * len(nodes))
    for node, value in zip(nodes, answer.value.ratings):
        mind.rate(node, value)


async def rate_unrated(me: AgentState, mind: Mind) -> None:
    """Rate every memory of ``me`` still waiting for its importance."""
    nodes = list(mind.memories(me.id).unrated)
    chunks = [nodes[i:i + CHUNK] for i in range(0, len(nodes), CHUNK)]
    await asyncio.gather(*(_rate(me, mind, chunk) for chunk in chunks))


class RateImportance(Phase):
    """The deciding people's unrated memories, rated before they decide (when due, see above)."""

    name = "importance"

    def select(self, mind: Mind) -> list[AgentState]:
        return [me for me in map(mind.person, mind.notes.deciding) if rating_due(me, mind)]

    async def run(self, me: AgentState, mind: Mind) -> None:
        await rate_unrated(me, mind)
