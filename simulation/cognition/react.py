"""Reacting to someone met at a place: start a conversation, or carry on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.converse import check_line
from simulation.cognition.schemas import ReactAnswer

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent


def _salutation(hour: int) -> str:
    return "Good morning" if hour < 12 else "Good afternoon" if hour < 18 else "Good evening"


async def react(agent: PersonaAgent, other: PersonaAgent) -> tuple[str | None, int | None]:
    """The opening line if ``agent`` decides to talk to ``other`` (else None), and its llm_calls id."""
    m = agent.model
    ctx = agent.prompt_context(query=other.persona.name)
    msgs = prompts.messages(
        agent.system_prompt, "react.j2", **ctx, other=other.persona, other_first=other.first_name,
        other_doing=other.doing(), relationship=agent.persona.relationships.get(other.agent_id, ""),
        example=ReactAnswer(talk=True, greeting=f"{_salutation(m.now.hour)}, {other.first_name}!").model_dump_json(),
    )
    answer = await m.llm.ask(msgs, ReactAnswer, default=ReactAnswer(talk=False, greeting=""),
                             purpose="react", agent_id=agent.agent_id, tick=m.tick, max_tokens=64,
                             check=lambda v: check_line(v.greeting, []) if v.talk else None)
    if not answer.value.talk:
        return None, answer.call_id
    return answer.value.greeting, answer.call_id  # a talking answer's greeting passed check_line
