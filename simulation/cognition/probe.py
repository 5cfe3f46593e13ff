"""End-of-run probe questions ("Do you know of a party?"), answered from the person's retrieved memories."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import context
from simulation.cognition.schemas import ProbeAnswer
from simulation.core import Purpose, probe_purpose

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind


async def answer_probe(me: AgentState, mind: Mind, question: str, index: int) -> tuple[str, bool, int | None]:
    ctx = await context(me, mind, question, Purpose.PROBE)
    msgs = prompts.messages(me.system_prompt, "probe.j2", **ctx, question=question)
    answer = await mind.ask(me, msgs, ProbeAnswer, default=ProbeAnswer(answer="(no usable answer)"),
                            purpose=probe_purpose(index), max_tokens=96)
    return answer.value.answer, answer.ok, answer.call_id
