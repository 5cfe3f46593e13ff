"""Importance (poignancy) of new memories, read from the LLM's probabilities.

Each memory is its own question, "how much does this matter, 1 to 10?", and its importance
is the expected value over the model's probabilities of answering 1 ... 10
(``Mind.ask_rating``, ``simulation.llm.scoring``): deterministic, and on a 135M model no
longer a sampled digit that rated "the house caught fire" 1 and "ate breakfast" 10 depending
on the seed. An agent's unrated memories wait until the agent next thinks (so an agent
walking or busy costs nothing), then are rated together, all agents' questions in one batch,
before the agent decides. Trivial events were created with
importance 1, the agent's own planned actions carry the rating their plan gave them, and
utterances are rated with their conversation's recap, so none of those needs a question.
Nor do sights of people at what they are doing (``perceive.SEEN``) or a person's own trips and
reactions (``seek``, ``plan.REACTION_IMPORTANCE``): what is asked about is what reached the
person (an event, a whisper, a fact), their plan, and a change their plan made. That keeps the
engine within its budget of six questions per person per game hour: in the step-6 Kelder Cove
runs (bundled model) importance was 74-108 of a run's 282-374 questions, 5.9-7.8 per person-hour
in all, and the sights and own doings were 62-94 of them.

An agent that thinks every tick (in a busy place, it keeps noticing people) would otherwise
ask every tick about one or two memories. Its memories wait instead until ``RATE_AT`` of them
are unrated, the oldest has waited ``RATE_WITHIN``, or it wakes up and plans its day; until
then retrieval treats them as of middling importance. In the 25-agent town this halves the
importance questions (``bench/town.py``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.phase import Phase
from simulation.core import Purpose, Source, Status
from simulation.memory.stream import UNRATED_IMPORTANCE, MemoryNode

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

SCALE = tuple(str(i) for i in range(1, 11))
RATE_AT = 4
RATE_WITHIN = timedelta(minutes=60)
CROWD_IMPORTANCE = 2.0
"""What the background crowd's everyday memories (people seen, their own doings) weigh, asked of
nobody; only what reached them (an event where they were, a whisper, a fact) is asked about."""


def reached(node: MemoryNode) -> bool:
    """Whether a memory is something that reached its owner (worth a question for the crowd)."""
    p = node.provenance
    return p is not None and (p.event_id is not None or p.fact is not None or p.source == Source.WHISPERED)


def rating_due(me: AgentState, mind: Mind) -> bool:
    """Whether the person's unrated memories are rated this tick (they think now, see above)."""
    unrated = mind.memories(me.id).unrated
    if not unrated:
        return False
    return me.status == Status.WAKING or len(unrated) >= RATE_AT or mind.now - unrated[0].created >= RATE_WITHIN


EXAMPLES = (("{first} washed the dishes.", "1"), ("{first}'s best friend was badly hurt in a car crash.", "9"),
            ("{first} walked to the shop.", "2"), ("{first} won a prize for their work and was offered a new job.", "8"))
"""Rated examples shown as earlier turns of the conversation. Asked cold, the bundled 135M model
put the same distribution on every memory (a house fire and breakfast both came out near 7);
after these four turns its expected ratings order a fire, an engagement or a death above
breakfast, brushing teeth or making the bed (tests/test_scoring.py)."""


def rating_messages(me: AgentState, memory: str) -> list[dict[str, str]]:
    """The importance question as a conversation: the scale, the rated examples as earlier
    turns, then the memory (in its data block)."""
    first = me.first_name
    turns = [*EXAMPLES, (memory, None)]
    msgs = prompts.messages(me.system_prompt, "importance.j2", first=first, memory=turns[0][0].format(first=first))
    msgs.append({"role": "assistant", "content": turns[0][1]})
    for text, rating in turns[1:]:
        said = text.format(first=first) if rating is not None else text
        msgs.append({"role": "user", "content": prompts.render("importance_next.j2", memory=said)})
        if rating is not None:
            msgs.append({"role": "assistant", "content": rating})
    return msgs


async def _rate(me: AgentState, mind: Mind, nodes: list[MemoryNode]) -> None:
    """One question for memories of the same words (the same sight noted twice is rated once)."""
    msgs = rating_messages(me, nodes[0].text)
    rating = await mind.ask_rating(me, msgs, SCALE, [float(v) for v in SCALE], default=UNRATED_IMPORTANCE,
                                   purpose=Purpose.IMPORTANCE)
    for node in nodes:
        mind.rate(node, round(rating.value, 2))


async def rate_unrated(me: AgentState, mind: Mind) -> None:
    """Rate every memory of ``me`` still waiting for its importance (the crowd's everyday ones
    get ``CROWD_IMPORTANCE`` without a question)."""
    todo = list(mind.memories(me.id).unrated)
    if me.crowd:
        for node in [n for n in todo if not reached(n)]:
            mind.rate(node, CROWD_IMPORTANCE)
        todo = [n for n in todo if reached(n)]
    same: dict[str, list[MemoryNode]] = {}
    for node in todo:
        same.setdefault(node.text, []).append(node)
    await asyncio.gather(*(_rate(me, mind, nodes) for nodes in same.values()))


class RateImportance(Phase):
    """The deciding people's unrated memories, rated before they decide (when due, see above)."""

    name = "importance"
    reads = frozenset({"deciding"})

    def select(self, mind: Mind) -> list[AgentState]:
        return [me for me in map(mind.person, mind.notes.deciding) if rating_due(me, mind)]

    async def run(self, me: AgentState, mind: Mind) -> None:
        await rate_unrated(me, mind)
