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
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import ask
from simulation.cognition.schemas import importance_model
from simulation.memory.stream import UNRATED_IMPORTANCE, MemoryNode

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent

CHUNK = 8
RATE_AT = 4
RATE_WITHIN = timedelta(minutes=60)


def rating_due(agent: PersonaAgent, now: datetime) -> bool:
    """Whether the agent's unrated memories are rated this tick (it thinks now, see above)."""
    unrated = agent.memory.unrated
    if not unrated:
        return False
    return agent.status == "waking" or len(unrated) >= RATE_AT or now - unrated[0].created >= RATE_WITHIN


async def _rate(agent: PersonaAgent, nodes: list[MemoryNode]) -> None:
    model = importance_model(len(nodes))
    default = model(ratings=[int(UNRATED_IMPORTANCE)] * len(nodes))
    msgs = prompts.messages(agent.system_prompt, "importance.j2", first=agent.first_name,
                            memories=[n.text for n in nodes],
                            example=model(ratings=[2 + i % 5 for i in range(len(nodes))]).model_dump_json())
    answer = await ask(agent, msgs, model, default=default, purpose="importance", max_tokens=8 + 4 * len(nodes))
    for node, value in zip(nodes, answer.value.ratings):
        agent.model.memory.rate(node, value)


async def rate_unrated(agent: PersonaAgent) -> None:
    """Rate every memory of ``agent`` still waiting for its importance."""
    nodes = list(agent.memory.unrated)
    chunks = [nodes[i:i + CHUNK] for i in range(0, len(nodes), CHUNK)]
    await asyncio.gather(*(_rate(agent, chunk) for chunk in chunks))
