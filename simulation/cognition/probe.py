"""End-of-run probe questions ("Do you know of a party?"), answered from the person's memories.

Asked straight, a model answers every question: 62-82 % of the people who never heard of the
party named one anyway. So "I have not heard of it" is a real answer, and it comes first.

Recognition, then recall (the default; the two processes of recognition memory: a sense that
something is familiar, then the recollection of what it was). A person recognises a question
about news (a probe with a ``fact``) when one of their memories is like it enough: the cosine
similarity of the two embeddings reaches the threshold (``Mind.recognised``). With none they say
they have not heard of it, with nothing asked; else the model answers from the memories that
made the question familiar, and only those (the most like it first, at most ``memory.top_k``),
saying what the person remembers (where and when it is, and how they know: who told them, or their
own plan; if nothing they remember is about it, they say so), under a situation that says only the
day: the hour and the place they are at, the 1.5B gave as the happening's (docs/behaviour.md, step 12).
Another question ("Who did you talk to today?") is answered from the memories retrieval
brings back, asked only to answer from them: the news question's "where and when it is, and how
they know" made the 1.5B answer "Who did you talk to?" with the day's plan.

The threshold follows the question: how like a memory must be depends on the wording (of the
same people on step 7's runs, 79-86 % of the aware reached 0.46 on "Do you know of a
Valentine's Day party? Where and when?" and none on "Have you heard of any party happening
soon?", whose best threshold is 0.33). What stays put is how far the news rises above everyday
memories, so ``cognition.recognition_margin`` (0.2) asks a memory to be that much more like the
question than the 90th percentile of the town's seeded memories, the backstory everyone had
before the day (``Mind.backstory_similarity``). ``cognition.recognition`` is a fixed threshold
instead; ``recognition_margin: null`` turns recognition off: the model is then asked "has she
heard anything about what she is asked? Yes or No" (``probe_heard.j2``, a scored yes-or-no
choice, calibrated and drawn, ``yesno.choose_yes``) over the memories retrieved for the
question, and only a person who says yes is asked for the words.

Why. On the runs of step 7 the model's calibrated "yes, she has heard" told the people who
knew from those who did not no better than chance on the bundled model (AUC 0.47 on both
scenarios) and weakly on the 1.5B (0.74), and as every choice it is drawn; the similarity of the
question to the closest memory told them apart with AUC 0.76 (135M), 0.95 (1.5B) and 0.95
(Kelder Cove). Shown the eight memories retrieval ranks (recency, importance, relevance), the
model answered from the wrong one (a refusal, a plan, a neighbouring line), and the paper's
weights often left the line that told the person out of the eight. The embedder that
recognises is the one the instrument decides awareness with (``provenance.conveys``), so part
of the honesty it brings the unaware is by construction (docs/behaviour.md, steps 8 and 9).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import context, showing
from simulation.cognition.schemas import ProbeAnswer
from simulation.cognition.yesno import choose_yes
from simulation.core import Purpose, probe_purpose

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

NOT_HEARD = "I have not heard anything about that."
"""The answer of a person who says they have not heard of it."""
HEARD = "probe_heard.j2"


def by_sentence(mind: Mind) -> bool:
    """Whether recognition reads each sentence of a memory (``cognition.recognition_unit``)."""
    return mind.settings.recognition_unit == "sentence"


def recognition_threshold(mind: Mind, question: str) -> float | None:
    """How like ``question`` a memory must be for the person to recognise it: ``cognition.recognition``
    as it is, or ``cognition.recognition_margin`` above what the town knew before the day
    (``Mind.backstory_similarity``); None: recognition is off."""
    if mind.settings.recognition is not None:
        return mind.settings.recognition
    if mind.settings.recognition_margin is not None:
        return mind.backstory_similarity(question, by_sentence=by_sentence(mind)) + mind.settings.recognition_margin
    return None


async def answer_probe(me: AgentState, mind: Mind, question: str, index: int,
                       recognise: bool = True) -> tuple[str, bool, int | None]:
    """(the answer, whether it is usable, the llm_calls id behind it: None when nothing was asked).
    ``recognise``: the question asks whether they have heard of something (a probe about a fact);
    else ("Who did you talk to today?") there is nothing to recognise and, with recognition on,
    the model answers."""
    threshold = recognition_threshold(mind, question)
    if threshold is not None and recognise:
        familiar = mind.recognised(me.id, question, threshold, Purpose.PROBE, by_sentence=by_sentence(mind))
        if not familiar:
            return NOT_HEARD, True, None
        ctx = showing(me, mind, sorted(familiar, key=lambda n: n.id))
    else:
        ctx = await context(me, mind, question, Purpose.PROBE, live=False)
    if threshold is None:
        msgs = prompts.messages(me.system_prompt, HEARD, **ctx, question=question)
        heard, call_id = await choose_yes(me, mind, msgs, template=HEARD, purpose=f"{probe_purpose(index)}_choice",
                                          default=True)
        if not heard:
            return NOT_HEARD, True, call_id
    msgs = prompts.messages(me.system_prompt, "probe.j2", **ctx, question=question, day_only=True, news=recognise)
    answer = await mind.ask(me, msgs, ProbeAnswer, default=ProbeAnswer(answer="(no usable answer)"),
                            purpose=probe_purpose(index), max_tokens=96,
                            temperature=mind.settings.probe_temperature)
    return answer.value.answer, answer.ok, answer.call_id
