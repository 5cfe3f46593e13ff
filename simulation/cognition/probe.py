"""End-of-run probe questions ("Do you know of a party?"), answered from the person's retrieved memories.

Asked straight, a model answers every question: 62-82 % of the people who never heard of the
party named one anyway. So "I have not heard of it" is a real answer, chosen first: "has she
heard anything about what she is asked? Yes or No" (``probe_heard.j2``), a scored yes-or-no
choice (``yesno.choose_yes``, calibrated and drawn like any other) over the same retrieved
memories the answer would use. Only a person who says yes is asked for the words. (It was a
numbered choice between "answer from what she remembers" and "say she has not heard"; on the
1.5B's own probe prompts the yes/no framing told the aware from the unaware better, AUC 0.92
against 0.84.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import context
from simulation.cognition.schemas import ProbeAnswer
from simulation.cognition.yesno import choose_yes
from simulation.core import Purpose, probe_purpose

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

NOT_HEARD = "I have not heard anything about that."
"""The answer of a person who says they have not heard of it."""
HEARD = "probe_heard.j2"


async def answer_probe(me: AgentState, mind: Mind, question: str, index: int) -> tuple[str, bool, int | None]:
    """(the answer, whether it is usable, the llm_calls id behind it)."""
    ctx = await context(me, mind, question, Purpose.PROBE)
    msgs = prompts.messages(me.system_prompt, HEARD, **ctx, question=question)
    heard, call_id = await choose_yes(me, mind, msgs, template=HEARD, purpose=f"{probe_purpose(index)}_choice",
                                      default=True)
    if not heard:
        return NOT_HEARD, True, call_id
    msgs = prompts.messages(me.system_prompt, "probe.j2", **ctx, question=question)
    answer = await mind.ask(me, msgs, ProbeAnswer, default=ProbeAnswer(answer="(no usable answer)"),
                            purpose=probe_purpose(index), max_tokens=96)
    return answer.value.answer, answer.ok, answer.call_id
