"""End-of-run probe questions ("Do you know of a party?"), answered from the person's retrieved memories.

Asked straight, a model answers every question: 62-82 % of the people who never heard of the
party named one anyway. So "I have not heard of it" is a real option, chosen first: a scored
choice (``converse.choose_number``, calibrated and drawn like any other) between answering from
what the person remembers and saying they have not heard of it, asked over the same retrieved
memories. Only a person who chooses to answer is asked for the words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import context
from simulation.cognition.converse import choose_number, shuffled
from simulation.cognition.schemas import ProbeAnswer
from simulation.core import Purpose, probe_purpose

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

NOT_HEARD = "I have not heard anything about that."
"""The answer of a person who chose to say they do not know."""
ANSWER, UNKNOWN = "answer", "unknown"


def choices(first: str) -> dict[str, str]:
    """The two answers a person may give (decision -> its words on the menu)."""
    return {ANSWER: f"answer from what {first} remembers about it",
            UNKNOWN: f"say that {first} has not heard anything about it"}


async def answer_probe(me: AgentState, mind: Mind, question: str, index: int) -> tuple[str, bool, int | None]:
    """(the answer, whether it is usable, the llm_calls id behind it)."""
    ctx = await context(me, mind, question, Purpose.PROBE)
    menu = choices(me.first_name)
    order = shuffled(2, f"probe/{me.id}/{index}")
    shown = [list(menu)[i] for i in order]
    msgs = prompts.messages(me.system_prompt, "probe_choice.j2", **ctx, question=question,
                            options=[menu[d] for d in shown])
    pick, call_id = await choose_number(me, mind, msgs, 2, default=shown.index(ANSWER) + 1,
                                        purpose=f"{probe_purpose(index)}_choice", template="probe_choice.j2")
    if shown[pick] == UNKNOWN:
        return NOT_HEARD, True, call_id
    msgs = prompts.messages(me.system_prompt, "probe.j2", **ctx, question=question)
    answer = await mind.ask(me, msgs, ProbeAnswer, default=ProbeAnswer(answer="(no usable answer)"),
                            purpose=probe_purpose(index), max_tokens=96)
    return answer.value.answer, answer.ok, answer.call_id
