"""What every prompt shows about the agent's situation, and the one way cognition asks the LLM.

``context`` retrieves the agent's memories for a query (batched with the phase's other
retrievals) and lays out time, place, what the agent is doing, what is on its mind and
what it remembers. ``ask`` parks the question with the LLM client; the phase's retrievals
go out before its questions (simulation/batching.py), so every question of a phase goes out
in one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from simulation.agent import IDLE, WAKING
from simulation.llm.client import Answer
from simulation.memory.stream import THOUGHT

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent

T = TypeVar("T", bound=BaseModel)


async def ask(agent: PersonaAgent, messages: list[dict[str, str]], model: type[T], *, default: T, purpose: str,
              max_tokens: int, check: Callable[[T], str | None] | None = None) -> Answer[T]:
    m = agent.model
    return await m.llm.ask(messages, model, default=default, purpose=purpose, agent_id=agent.agent_id,
                           tick=m.tick, max_tokens=max_tokens, check=check)


def memory_line(node: Any) -> str:
    return f"({node.created:%a %H:%M}) {node.text}"


async def context(agent: PersonaAgent, query: str, purpose: str, exclude: Iterable[int] = ()) -> dict[str, Any]:
    """Prompt variables shared by every question (``_context.j2``), with the top-k memories for ``query``."""
    m = agent.model
    thoughts = agent.memory.recent(2, kinds=(THOUGHT,))
    skip = {n.id for n in thoughts} | set(exclude)
    retrieved = await m.memory.retrieve(agent.agent_id, query, purpose, exclude=skip) if query else []
    return situation(agent) | {
        "thoughts": [n.text for n in thoughts],
        "memories": [memory_line(n) for n in sorted(retrieved, key=lambda n: n.id)],
    }


def situation(agent: PersonaAgent) -> dict[str, Any]:
    """Time, place and doing, without memories (for questions that bring their own)."""
    m = agent.model
    return {
        "p": agent.persona,
        "first": agent.first_name,
        "now": m.now.strftime("%A %d %B, %H:%M"),
        "place": m.town.name(agent.place),
        "objects": m.town.places[agent.place].objects,
        "doing": "" if agent.status in (IDLE, WAKING) else agent.doing(),
        "thoughts": [],
        "memories": [],
    }
