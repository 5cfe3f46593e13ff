"""End-of-run probe questions ("Do you know of a party?"), answered from the agent's retrieved memories."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import ask, context
from simulation.cognition.schemas import ProbeAnswer

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent


async def answer_probe(agent: PersonaAgent, question: str, index: int) -> tuple[str, bool, int | None]:
    ctx = await context(agent, question, "probe")
    msgs = prompts.messages(agent.system_prompt, "probe.j2", **ctx, question=question)
    answer = await ask(agent, msgs, ProbeAnswer, default=ProbeAnswer(answer="(no usable answer)"),
                       purpose=f"probe{index}", max_tokens=96)
    return answer.value.answer, answer.ok, answer.call_id
