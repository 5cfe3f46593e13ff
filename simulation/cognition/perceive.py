"""Perception without the LLM: who and what is at a person's place, up to their attention
bandwidth; and attention: what, of all that, a free person reacts to this tick."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition.phase import Phase
from simulation.core import Focus, MemoryKind, Perception, PlaceEvent, Provenance, Source, Status, doing_at

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

NEWS_AFTER_MINUTES = 60
"""Seeing the same person again only counts as news after this many game minutes apart."""
TRIVIAL = 1.0
"""Importance of seeing someone idle: rated without asking the LLM."""
SEEN = 2.0
"""Importance of seeing someone at what they are doing, asked of nobody: as mundane as one's own
usual day (``plan.USUAL_IMPORTANCE``), "someone standing around" on the rating scale. Asked, these
sights were about half of all importance questions (41-61 of 74-108 in the step-6 Kelder Cove runs) and
the models could not tell them apart: the bundled model put every one at 5.4-7.0, the
measurement model at 3.7-5.4 (besides one at 7.2), beside 5.5-7 for the news they heard. What
reached the person (an event at their place, a whisper, a fact, a line heard) is still asked."""
UNSEEING = (Status.SLEEPING, Status.WALKING)


def perceive(me: AgentState, mind: Mind, here: list[AgentState], events: list[PlaceEvent]) -> Perception:
    """Record new observations as memories; return the people and place events worth reacting to."""
    seen = Perception()
    if me.status in UNSEEING:
        return seen
    tick = mind.tick
    budget = mind.settings.attention_bandwidth
    for ev in events:
        key = f"event:{ev.id}"
        if key not in me.last_seen and budget > 0:
            me.last_seen[key] = tick
            node = mind.remember(me.id, MemoryKind.OBSERVATION, f"At {mind.place_name(ev.place)}: {ev.text}",
                                 Provenance(Source.PERCEIVED, event_id=ev.id, fact=ev.fact, quote=ev.text))
            me.news.append(node.id)
            seen.events.append(ev)
            budget -= 1
    for other in here:
        if budget <= 0:
            break
        if other.id == me.id or other.status in UNSEEING:
            continue
        last = me.last_seen.get(other.id)
        me.last_seen[other.id] = tick
        if last is not None and (tick - last) * mind.settings.tick_minutes < NEWS_AFTER_MINUTES:
            continue
        idle = other.status in (Status.IDLE, Status.WAKING) and other.action is None
        mind.remember(me.id, MemoryKind.OBSERVATION, f"{other.persona.name} is "
                      f"{doing_at(mind.doing(other), mind.place_name(me.place))}", Provenance(Source.PERCEIVED, from_agent=other.id),
                      importance=TRIVIAL if idle else SEEN)
        seen.people.append(other.id)
        budget -= 1
    return seen


def can_talk(me: AgentState, other: AgentState, mind: Mind) -> bool:
    last = me.last_talk.get(other.id)
    return other.free and other.place == me.place and (
        last is None or mind.now - last >= mind.settings.conversation_cooldown)


def may_stop_for_someone(me: AgentState, mind: Mind) -> bool:
    """Under the hourly cap (``reactions_per_hour``) on stopping for people: in a crowded place
    someone new is always there, and each stop is a question to the LLM."""
    hour = mind.now.replace(minute=0, second=0, microsecond=0)
    me.stopped_for = [t for t in me.stopped_for if t >= hour]
    return len(me.stopped_for) < mind.settings.reactions_per_hour


def focus(me: AgentState, mind: Mind) -> Focus | None:
    """What a free person reacts to this tick: a new place event, someone free to talk (up to
    the hourly cap; the one they are out looking for first). The background crowd reacts to events only: they talk when someone talks
    to them."""
    if not me.free:
        return None
    event = me.perceived.events[0] if me.perceived.events else None
    other = None
    if not me.crowd and may_stop_for_someone(me, mind):
        sought = me.sought(mind.now)  # someone they set out to find comes first (cognition/seek.py)
        people = sorted(me.perceived.people, key=lambda o: o != sought)
        other = next((o for o in people if can_talk(me, mind.person(o), mind)), None)
    return Focus(event, other) if event or other else None


def needs_thought(me: AgentState, mind: Mind) -> bool:
    """Waking, out of steps for the hour, or noticing something: everyone else costs no call.
    Sets ``me.focus``."""
    me.focus = focus(me, mind)
    if me.status == Status.WAKING or me.focus is not None:
        return True
    return me.status == Status.IDLE and not me.has_steps(mind.now)


class Perceive(Phase):
    """Everyone awake and at a place notices who and what is there (no LLM); then everyone free
    decides whether something needs a thought this tick (``mind.notes.deciding``)."""

    name = "perceive"
    writes = frozenset({"deciding"})

    async def run(self, me: AgentState, mind: Mind) -> None:
        me.perceived = perceive(me, mind, mind.here(me), mind.place_events(me.place))

    def finish(self, mind: Mind) -> None:
        mind.notes.deciding = [me.id for me in mind.people() if needs_thought(me, mind)]
