"""End-of-run probe questions ("Do you know of a party?"), answered from the person's retrieved memories.

Asked straight, a model answers every question: 62-82 % of the people who never heard of the
party named one anyway. So "I have not heard of it" is a real answer, and it comes first. By
default it is the model's: "has she heard anything about what she is asked? Yes or No"
(``probe_heard.j2``), a scored yes-or-no choice (``yesno.choose_yes``, calibrated and drawn like
any other) over the memories the answer would use; only a person who says yes is asked for the
words.

Recognition, then recall (opt-in, ``cognition.recognition``; the two processes of recognition
memory: a sense that something is familiar, then the recollection of what it was). A person
recognises a question about news (a probe with a ``fact``) when one of their memories is like
it: the cosine similarity of the question and their closest memory (``Mind.familiarity``)
reaches the threshold. Below it they say they have not heard of it, with nothing asked; above
it the model answers from the memories the question brings back, and may still say it does not
know. Another question ("Who did you talk to today?") is answered from memory straight away.

Why: on the runs of step 7 the model's calibrated "yes, she has heard" told the people who knew
from those who did not no better than chance on the bundled model (AUC 0.47 on both scenarios)
and weakly on the 1.5B (0.74), and as every choice it is drawn. The similarity of the question
to the closest memory told them apart with AUC 0.76 (135M), 0.95 (1.5B) and 0.95 (Kelder Cove).
It is off by default: the similarity depends on the question's wording (0.46 was chosen on the
step-6 runs of the two bundled scenarios' questions), and the embedder is the one the instrument
decides awareness with (``provenance.conveys``), so part of the unaware's honesty it brings is by
construction (docs/behaviour.md, step 8).
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
    else ("Who did you talk to today?") there is nothing to recognise and, with recognition on,
    the model answers."""
    threshold = mind.settings.recognition
    if threshold is not None and recognise and mind.familiarity(me.id, question) < threshold:
        return NOT_HEARD, True, None
    ctx = await context(me, mind, question, Purpose.PROBE)
    if threshold is None:
        msgs = prompts.messages(me.system_prompt, HEARD, **ctx, question=question)
        heard, call_id = await choose_yes(me, mind, msgs, template=HEARD, purpose=f"{probe_purpose(index)}_choice",
                                          default=True)
        if not heard:
            return NOT_HEARD, True, call_id
    msgs = prompts.messages(me.system_prompt, "probe.j2", **ctx, question=question)
    answer = await mind.ask(me, msgs, ProbeAnswer, default=ProbeAnswer(answer="(no usable answer)"),
                            purpose=probe_purpose(index), max_tokens=96)
    return answer.value.answer, answer.ok, answer.call_id
