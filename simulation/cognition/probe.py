"""End-of-run probe questions ("Do you know of a party?"), answered from the person's retrieved memories.

Asked straight, a model answers every question: 62-82 % of the people who never heard of the
party named one anyway. So "I have not heard of it" is a real answer, and it comes first.

Recognition, then recall (the two processes of recognition memory: a sense that something is
familiar, then the recollection of what it was). A person recognises a question when one of
their memories is like it: the cosine similarity of the question and their closest memory
(``Mind.familiarity``) reaches ``cognition.recognition`` (0.46). Below it they say they have
not heard of it; above it the model answers from the memories the question brings back, ranked
relevance first (``memory.probe_weights``), in the person's words, and may still say it does
not know. Only a question about news (a probe with a ``fact``) is recognised; another ("Who did
you talk to today?") is answered from the memories it brings back.

Why not ask the model whether they have heard (the step-3 way, ``recognition: null``): on the
runs of step 7 its calibrated P(yes) told the people who knew from those who did not no better
than chance on the bundled model (AUC 0.47 on both scenarios) and weakly on the 1.5B (0.74),
and every answer was then drawn, so a person who knew said "not heard" one time in four. The
similarity of the question to the closest memory told them apart with AUC 0.76 (135M), 0.95
(1.5B) and 0.95 (Kelder Cove). The threshold was chosen on the step-6 runs (best Youden's J,
0.46: 72 % of the aware kept, 2 % of the unaware let through) and measured on others.

The embedder is the one the instrument uses to decide who is aware of a fact
(``provenance.conveys``), so part of the unaware's honesty is by construction; what the
model adds is measured by the aware who answer right (place and time in its own words).
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


async def answer_probe(me: AgentState, mind: Mind, question: str, index: int,
                       recognise: bool = True) -> tuple[str, bool, int | None]:
    """(the answer, whether it is usable, the llm_calls id behind it: None when nothing was asked).
    ``recognise``: the question asks whether they have heard of something (a probe about a fact);
    else ("Who did you talk to today?") there is nothing to recognise and the model answers."""
    threshold = mind.settings.recognition
    if threshold is not None:
        if recognise and mind.familiarity(me.id, question) < threshold:
            return NOT_HEARD, True, None
        return await _recall(me, mind, question, index, await context(me, mind, question, Purpose.PROBE))
    ctx = await context(me, mind, question, Purpose.PROBE)
    msgs = prompts.messages(me.system_prompt, HEARD, **ctx, question=question)
    heard, call_id = await choose_yes(me, mind, msgs, template=HEARD, purpose=f"{probe_purpose(index)}_choice",
                                      default=True)
    if not heard:
        return NOT_HEARD, True, call_id
    return await _recall(me, mind, question, index, ctx)


async def _recall(me: AgentState, mind: Mind, question: str, index: int,
                  ctx: dict[str, object]) -> tuple[str, bool, int | None]:
    """The model's answer from the memories in ``ctx``."""
    msgs = prompts.messages(me.system_prompt, "probe.j2", **ctx, question=question)
    answer = await mind.ask(me, msgs, ProbeAnswer, default=ProbeAnswer(answer="(no usable answer)"),
                            purpose=probe_purpose(index), max_tokens=96)
    return answer.value.answer, answer.ok, answer.call_id
