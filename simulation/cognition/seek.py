"""Going to find someone to tell them news: a reason to meet that is the person's own choice.

Why. People met only where their usual day put them: in the small flagship, about five
encounters in 36 ticks, so how far news spread and how many conversations a town held were set
by the routines, whatever the model chose. Generative Agents' Isabella spent her day at the
cafe inviting whoever came; people with news also go and tell the people they care about. The
model could not choose to: nothing offered it.

What. When an hour begins (whenever the hour's steps are queued), a named person who holds news
that someone they know has not heard from them is asked about the person they like best among
those (``TARGETS``): "for the rest of the hour you would be doing this; she has not heard this
from you; she is usually at the bakery now. Do you go to the bakery to find her and tell her? Yes
or No" (``seek.j2``). It is a scored choice (``yesno.choose_yes``): P(Yes) against P(No),
calibrated against the content-free question, the odds of yes scaled by the person's lean to talk
to that one (``sociability.talk_odds``: extraversion, the tie), drawn with the question's own seed.

Why yes or no, about one person. The first version listed "carry on" beside up to two "go to"
options and asked for a number; the 1.5B measurement model scores numbered options nearly evenly,
so people set out about two times in three from the menu's length alone. One person, two answers:
the menu's length cannot decide, and P(Yes) is what the model makes of this errand.

Asked once, meant. Each (person, piece of news) pair is offered once: someone who chose to
carry on is not asked again about the same news for the same person, so a near-indifferent
model is not made to set out by being asked every hour. Where someone "usually is" is their
routine (what an acquaintance knows), not where they are: a seeker may not find them. When the
two are at one place, both free (``perceive.can_talk``), the seeker turns to them first and the
conversation starts without a second question: the choice to talk was made when they set out.
The trip lasts for the rest of the hour; the usual day resumes after it. Someone who said they
would be somewhere this hour (a yes to the story director's gathering offer, "go to the market and
stay until noon": ``plan.keep_hours``) is not asked: on the bundled model two of the four who said
yes in one run left the market before noon to go and find someone, one ten minutes after
arriving, asked by the engine against the hour they had just agreed to. ``cognition.seek: false`` turns it off (people meet only where their day takes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from simulation.agents import Seeking
from simulation.cognition import prompts
from simulation.cognition.aims import news_text, untold_news
from simulation.cognition.context import context
from simulation.cognition.calibrate import BLANK
from simulation.cognition.plan import bed_hour, hour_block, queue_hour, routine_plan
from simulation.cognition.react import REASON_CHARS
from simulation.cognition.schemas import clip
from simulation.cognition.sociability import talk_odds
from simulation.cognition.yesno import choose_yes
from simulation.core import Action, EventKind, Purpose

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind
    from simulation.memory import MemoryNode
    from simulation.world.relationships import Tie

TARGETS = 1
"""How many people one question is about: one (the best liked), so the answer is about them, not
about how many going options a menu lists."""
MIN_MINUTES = 20
"""Setting out is offered only with at least this much of the hour left."""
SEEK = "seek"
TEMPLATE = "seek.j2"


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


async def seek(me: AgentState, mind: Mind) -> bool:
    """Ask ``me`` whether to go and find someone to tell them news (see the module docstring);
    True when they set out (the rest of the hour is queued: looking for them at their place)."""
    now = mind.now
    if not mind.settings.seek or 60 - now.minute < MIN_MINUTES or now.hour + 1 >= bed_hour(me):
        return False
    agreed = me.hours.get(now.hour)
    if agreed is not None and agreed.call_id is not None:
        return False  # they said they would be somewhere this hour (plan.keep_hours): not asked to leave it
    found = targets(me, mind)
    if not found:
        return False
    target = found[0]
    me.offered.setdefault(target.person, []).append(target.news.id)
    return await offer(me, mind, target, Purpose.SEEK)


async def offer(me: AgentState, mind: Mind, target: Target, purpose: str, data: dict[str, Any] | None = None) -> bool:
    """Ask ``me`` the seek question about ``target`` (``purpose``: ``seek``, or ``go`` when the story's
    director offers the errand); when they say yes, queue the rest of the hour looking for them at
    their usual place and record a ``seek`` event (with ``data`` added). True when they set out."""
    now = mind.now
    left = 60 - now.minute
    other = mind.person(target.person)
    block = await hour_block(me, mind)
    ctx = await context(me, mind, f"{other.persona.name} {target.news.text}", purpose)
    there = mind.place_name(target.place)
    msgs = prompts.messages(me.system_prompt, TEMPLATE, **ctx, activity=block.activity,
                            activity_place=mind.place_name(block.place), other_name=other.persona.name,
                            other_occupation=other.persona.occupation, other_first=other.first_name,
                            relationship=target.tie.view, news=clip(news_text(target.news, mind), REASON_CHARS),
                            there=there)
    lean = talk_odds(me.persona.big_five, target.tie, mind.settings.talk_prior)
    going, call_id = await choose_yes(me, mind, msgs, template=TEMPLATE, purpose=purpose, factor=lean,
                                      other_first=BLANK, there=BLANK)
    if not going:
        return False
    me.seeking = Seeking(person=other.id, until=now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1),
                         call_id=call_id)
    mind.record(me, EventKind.SEEK, f"{me.persona.name} goes to {there} to find "
                f"{other.persona.name}", {"other": other.id, "place": target.place, "memory_id": target.news.id,
                                           "llm_call_id": call_id, **(data or {})})
    # the trip weighs what it is for: the news they carry (no question about their own errand); it replaces
    # what they were doing (the director may ask mid-task)
    queue_hour(me, mind, [Action(f"looking for {other.first_name}", target.place, left,
                                 importance=target.news.rated_importance, call_id=call_id)],
               f"looking for {other.first_name}", replacing=True)
    return True


__all__ = ["MIN_MINUTES", "SEEK", "TARGETS", "TEMPLATE", "Target", "offer", "seek", "targets", "usual_place"]
