"""Going to find someone to tell them news: a reason to meet that is the person's own choice.

Why. People met only where their usual day put them: in the small flagship, about five
encounters in 36 ticks, so how far news spread and how many conversations a town held were set
by the routines, whatever the model chose. Generative Agents' Isabella spent her day at the
cafe inviting whoever came; people with news also go and tell the people they care about. The
model could not choose to: nothing offered it.

What. When an hour begins (whenever the hour's steps are queued), a named person who holds news
that someone they know has not heard from them is asked, like a reaction (``react.j2``): carry
on with the hour's activity, or go to where that person usually is at this hour and tell them
(up to ``TARGETS`` people, the best liked first). It is a scored choice like every other: the
options listed in an order shuffled per person and moment, the model's probabilities over their
numbers calibrated against the content-free question, each going option's odds scaled by the
person's lean to talk to that one (``sociability.talk_odds``: extraversion, the tie), drawn with
the question's own seed.

Asked once, meant. Each (person, piece of news) pair is offered once: someone who chose to
carry on is not asked again about the same news for the same person, so a near-indifferent
model is not made to set out by being asked every hour. Where someone "usually is" is their
routine (what an acquaintance knows), not where they are: a seeker may not find them. When the
two are at one place, both free (``perceive.can_talk``), the seeker turns to them first and the
conversation starts without a second question: the choice to talk was made when they set out.
The trip lasts for the rest of the hour; the usual day resumes after it. ``cognition.seek:
false`` turns it off (people meet only where their day takes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from simulation.agents import Seeking
from simulation.cognition import prompts
from simulation.cognition.aims import news_text, untold_news
from simulation.cognition.context import context
from simulation.cognition.converse import choose_number, shuffled
from simulation.cognition.plan import bed_hour, hour_block, routine_plan
from simulation.cognition.react import LABELS, CONTINUE, REASON_CHARS
from simulation.cognition.schemas import clip
from simulation.cognition.sociability import talk_odds
from simulation.core import Action, EventKind, Purpose

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind
    from simulation.memory import MemoryNode
    from simulation.world.relationships import Tie

TARGETS = 2
"""At most this many people are offered at once (those the person likes best)."""
MIN_MINUTES = 20
"""Setting out is offered only with at least this much of the hour left."""
SEEK = "seek"
LABEL = "go to"
"""How a going option's words begin (what a test double recognises it by)."""


@dataclass(frozen=True)
class Target:
    person: str
    news: MemoryNode
    place: str
    """Where they usually are at this hour."""
    tie: Tie


def usual_place(other: AgentState, hour: int, hub: str) -> str:
    """Where ``other`` usually is at ``hour``: the item of their usual day in force then, else home."""
    current = [i for i in routine_plan(other, 0, hub) if i.hour <= hour]
    return current[-1].place if current else other.home


def targets(me: AgentState, mind: Mind) -> list[Target]:
    """The people ``me`` could go and tell: known (a tie), awake, not here, usually elsewhere at this hour,
    with news of ``me``'s they have not heard from ``me`` and ``me`` was not yet asked about;
    the best liked first (then by id), at most ``TARGETS``."""
    if me.crowd or not me.news:
        return []
    now = mind.now
    found = []
    for other in mind.people():
        tie = mind.tie(me.id, other.id) if other.id != me.id else None
        if tie is None or not other.awake_at(now) or other.place == me.place:
            continue  # a stranger, asleep, or right here (a reaction's choice, not a trip's)
        place = usual_place(other, now.hour, mind.hub)
        if place == me.place:
            continue
        asked = set(me.offered.get(other.id, ()))
        news = [n for n in untold_news(me, mind, other.id) if n.id not in asked]
        if news:
            found.append(Target(other.id, news[0], place, tie))
    found.sort(key=lambda t: (-t.tie.sentiment, t.person))
    return found[:TARGETS]


def option(target: Target, mind: Mind) -> str:
    other = mind.person(target.person)
    reason = clip(news_text(target.news, mind), REASON_CHARS)
    return f"{LABEL} {mind.place_name(target.place)} to find {other.first_name} and tell them about this: {reason}"


async def seek(me: AgentState, mind: Mind) -> bool:
    """Ask ``me`` whether to go and find someone to tell them news (see the module docstring);
    True when they set out (the rest of the hour is queued: looking for them at their place)."""
    now = mind.now
    left = 60 - now.minute
    if not mind.settings.seek or left < MIN_MINUTES or now.hour + 1 >= bed_hour(me):
        return False
    found = targets(me, mind)
    if not found:
        return False
    for t in found:
        me.offered.setdefault(t.person, []).append(t.news.id)
    block = await hour_block(me, mind)
    menu = {CONTINUE: f"{LABELS[CONTINUE]}: {block.activity} at {mind.place_name(block.place)}"}
    menu |= {t.person: option(t, mind) for t in found}
    decisions = list(menu)
    order = shuffled(len(decisions), f"seek/{me.id}/{now.isoformat()}")
    shown = [decisions[i] for i in order]
    query = " ".join(f"{mind.person(t.person).persona.name} {t.news.text}" for t in found)
    ctx = await context(me, mind, query, Purpose.SEEK)
    msgs = prompts.messages(me.system_prompt, "react.j2", **ctx, event="", other=None,
                            options=[menu[d] for d in shown])
    strength = mind.settings.talk_prior
    lean = {t.person: talk_odds(me.persona.big_five, t.tie, strength) for t in found}
    pick, call_id = await choose_number(me, mind, msgs, len(shown), default=shown.index(CONTINUE) + 1,
                                        purpose=Purpose.SEEK, template="react.j2",
                                        factors=[lean.get(d, 1.0) for d in shown])
    chosen = shown[pick]
    if chosen == CONTINUE:
        return False
    target = next(t for t in found if t.person == chosen)
    other = mind.person(target.person)
    me.seeking = Seeking(person=other.id, until=now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1),
                         call_id=call_id)
    me.steps = [Action(f"looking for {other.first_name}", target.place, left, call_id=call_id)]
    me.steps_key = (now.date(), now.hour)
    mind.record(me, EventKind.SEEK, f"{me.persona.name} goes to {mind.place_name(target.place)} to find "
                f"{other.persona.name}", {"other": other.id, "place": target.place, "memory_id": target.news.id,
                                           "llm_call_id": call_id})
    mind.record_schedule(me, "steps", f"looking for {other.first_name}",
                         [{"action": s.text, "place": s.place, "minutes": s.minutes, "importance": s.importance}
                          for s in me.steps], True)
    return True


__all__ = ["LABEL", "MIN_MINUTES", "SEEK", "TARGETS", "Target", "seek", "targets", "usual_place"]
