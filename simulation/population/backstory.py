"""LLM backstories for sampled people: a few sentences each, built on the fields the sampler drew.

The prompt shows the sampled profile inside a delimited ``<persona>`` block (templates in
``templates/``, rendered by the shared ``simulation.formats.templating`` environment, so the same
safety rule applies: no profile text can close the block). Its words are kept exactly as they
were when this prompt lived with the evaluation's, so backstories already in a replay cache
are replayed, not asked again.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from simulation.formats import templating
from simulation.formats.persona import Persona
from simulation.llm import batching
from simulation.llm.client import LLMClient
from simulation.population.sampler import Sampled

__all__ = ["add_backstories"]

MAX_TOKENS = 560


class Backstory(BaseModel):
    model_config = ConfigDict(extra="ignore")

    backstory: Annotated[str, Field(min_length=40, max_length=500)]


def _render(template: str, **context: Any) -> str:
    return templating.render(("simulation.population",), template, **context)


def _known_as(agent_id: str) -> str:
    """How a relationship is shown: a name made from the other person's id ('ada_ash' -> 'Ada Ash')."""
    return " ".join(part.capitalize() for part in agent_id.split("_"))


def backstory_messages(persona: Persona) -> list[dict[str, str]]:
    """The two messages that ask for ``persona``'s backstory."""
    profile = {"p": persona, "first": persona.name.split()[0],
               "relationships": [(_known_as(k), v) for k, v in persona.relationships.items()],
               "memories": list(persona.memories)}
    return [{"role": "system", "content": _render("backstory_system.j2")},
            {"role": "user", "content": _render("backstory.j2", **profile)}]


def add_backstories(people: list[Sampled], backend: Any, seed: int, temperature: float = 0.7,
                    on_progress: Any = None, on_call: Any = None) -> int:
    """Ask the LLM for a short backstory per person, all in one batch; returns how many failed.

    An answer that does not name the person is retried once, then left empty."""
    client = LLMClient(backend, run_seed=seed, temperature=temperature, max_tokens=MAX_TOKENS,
                       on_progress=on_progress, on_call=on_call)

    async def one(s: Sampled) -> bool:
        first = s.persona.name.split()[0]
        answer = await client.ask(
            backstory_messages(s.persona), Backstory, default=Backstory(backstory="-" * 40), purpose="backstory",
            agent_id=s.persona.id, tick=None, max_tokens=MAX_TOKENS,
            check=lambda a: None if first in a.backstory else f"name {first} in it")
        if answer.ok:
            s.persona.backstory = answer.value.backstory.strip()
        return answer.ok

    async def all_() -> list[bool]:
        return list(await asyncio.gather(*(one(s) for s in people)))

    return sum(not ok for ok in batching.run(all_(), name="backstories"))
