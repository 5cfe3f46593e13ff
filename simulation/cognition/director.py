"""The director: a phase that keeps the town on its story's beats, by offers it declares and records.

Why (issue 37; HAMLET's director): a designer who writes "the gale warning reaches the skippers by
noon" wants the town to get there by its people's own choices, and wants to know when it had to
be helped. At the first tick of every game hour the director reads each open beat's progress
from the record (who is aware of the beat's fact: the provenance tracker's awareness, the figure
the behaviour report counts; who is at a gathering's place) and, for the beats behind their
schedule, asks as many people as each is short, at most ``story.nudges_per_day`` a game day. The
lagging beats take turns, round by round, one nudge a beat: the one nudged least so far first,
then the furthest behind (the first director spent every nudge of a day on the beat furthest
behind). Nobody is asked twice in one hour, and no two carriers are sent after the same person:

* a **reach** beat is behind when fewer of its people know the fact than a steady pace from the
  run's start to its deadline would have told by now (by half a person or more). The nudge goes
  to someone who could carry it: the aware person (named, free to go: idle or busy with an
  activity, not near bedtime) with the warmest tie to one of the beat's people who does not know
  yet and has not heard it from them. It is a thought ("Tam Pascoe has not heard about the gale
  warning yet.") and an offer: the seek question (``cognition/seek.py``), "she has not heard this
  from you; she is usually at the harbour now; do you go there to find her and tell her?", asked
  as every seek question is (scored, calibrated, drawn) under the purpose ``go``. Only a fact
  nobody in the town knows is whispered itself, to the person with the most ties to the beat's
  people, with no question.
* a **gather** beat is behind, inside its window, when fewer people than it needs are at its place.
  Each nudge goes to one person it counts who is elsewhere and free to go, first one who knows what
  is on there now (a happening of a fact they are aware of: their reason, nothing new to them), then
  the one with most acquaintances there, then by id. It is a thought ("Ana feels like going to the
  harbour now, for the regatta.") and an offer: "for the rest of the hour Ana would be mending nets at
  the shed; does Ana go to the harbour now and stay until 12:00? Yes or No" (``go.j2``, scored like
  the seek question). A yes is a change to Ana's day: the rest of this hour and the hours after it
  until the gathering's end are spent there (``plan.keep_hours``); then her plan goes on.

Why an offer and not only a thought. The first director only put the thought in the person's
mind. Paired against no director on the small flagship with two beats (bench/director, 5 seeds,
the bundled model, 2026-11-29), all 15 of its nudges were "feels like going to Johnson Park", and
none of the 15 people nudged walked there within the hour: beats reached 0.2 with it and without.
Nothing in a person's day turns a remembered thought into going somewhere: people move when they
plan an hour, react to what they notice, or decide to seek someone. So the nudge now comes with
the one question that can move them, and saying no is as much theirs as saying yes: the director
decides whom to ask and about what, never the answer. With one offer an hour and three a day,
about a third of them taken, the market (three people together) drew 1.2 at once against 0.4
without it, and beats reached moved by 0.1 (docs/benchmarks/director-bundled): one person who said
yes spent an hour there and was gone when the next arrived. Hence as many offers an hour as the
beat is short, and a yes that stays for the gathering.

A beat once seen reached is not nudged again, and nobody is nudged twice for one beat. A nudge is
a ``nudge`` event (``data``: beat, why, fact when the thought is the fact itself) and the memory it
made, tied to the event: source ``directed``, which never counts as awareness and is not read for a
fact, so nobody is counted as told, or aware, by the director's words; only the whisper of a fact
nobody knew is ``whispered`` and makes its one person aware, as a scenario's whisper would. A yes to
a reach offer is a ``seek`` event (``data.beat`` names the beat); a yes to a gathering queues the
rest of the hour at its place (a ``steps`` schedule row) and keeps the hours after it, until the
gathering ends, for the same (so only someone who has planned today is asked: a plan made after
the yes would undo it). Every choice of whom to nudge is ordered
by ids, so the same seed gives the same nudges; what the director has used and whom it nudged it
saves with the tick (``state``), so a resumed run nudges as the uninterrupted one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from simulation.cognition import prompts
from simulation.cognition.aims import untold_news
from simulation.cognition.calibrate import BLANK
from simulation.cognition.context import context
from simulation.cognition.phase import Phase
from simulation.cognition.plan import bed_hour, bedtime, hour_block, keep_hours, queue_hour
from simulation.cognition.seek import Target, offer, usual_place
from simulation.cognition.yesno import choose_yes
from simulation.core import Action, Purpose, Status
from simulation.scenario.story import Beat

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

__all__ = ["GO_TEMPLATE", "Director", "Offer"]

GO_TEMPLATE = "go.j2"
"""The question a gathering's offer asks (yes or no; the reach offer asks the seek question)."""


@dataclass(frozen=True)
class Offer:
    """What the director asks one person this tick: to go and find ``target`` (a reach beat), or to
    go to ``place`` (a gathering); ``thought`` is the nudge it put in their mind."""

    beat: str
    thought: str
    target: Target | None = None
    place: str | None = None
    until: datetime | None = None
    """A gathering's end: a yes keeps the person there until then."""


class Director(Phase):
    name = "director"

    def __init__(self) -> None:
        self.used: dict[str, int] = {}
        """Game day ('YYYY-MM-DD') -> nudges made that day."""
        self.nudged: list[list[str]] = []
        """[beat id, person id] of every nudge made, so nobody is nudged twice for one beat."""
        self.reached: list[str] = []
        """Beats seen reached (a gathering that was big enough once is not nudged again when it thins)."""
        self.offers: dict[str, Offer] = {}
        """This tick's offers, by the person asked (between ``select`` and ``run``)."""
        self.whispered: set[str] = set()
        """Beats whose fact was whispered itself this tick (once is enough: that person now knows)."""

    def select(self, mind: Mind) -> list[AgentState]:
        self.offers, self.whispered = {}, set()
        story = mind.settings.story
        if not story.director or not story.beats or mind.now.minute >= mind.settings.tick_minutes:
            return []
        day = mind.now.strftime("%Y-%m-%d")
        left = story.nudges_per_day - self.used.get(day, 0)
        if left <= 0:
            return []
        start = mind.now - timedelta(minutes=mind.tick * mind.settings.tick_minutes)
        # every lagging beat gets its turn: the least nudged first, then the furthest behind; then
        # round by round, one nudge a beat, until each has as many as it is short or the day's are spent
        turns = {b.id: sum(n[0] == b.id for n in self.nudged) for b in story.beats}
        behind: list[tuple[int, float, int, Beat]] = []
        wanted: dict[str, int] = {}
        for i, beat in enumerate(story.beats):
            lag, short = (0.0, 0) if beat.id in self.reached else self._behind(beat, mind, start)
            if lag > 0:
                behind.append((turns[beat.id], -lag, i, beat))
                wanted[beat.id] = short
        behind.sort(key=lambda t: t[:3])
        while left > 0 and any(wanted.values()):
            for *_, beat in behind:
                if left > 0 and wanted[beat.id] > 0:
                    if self._nudge(beat, mind):
                        wanted[beat.id] -= 1
                        left -= 1
                        self.used[day] = self.used.get(day, 0) + 1
                    else:
                        wanted[beat.id] = 0  # nobody more to ask for it this hour
        return [mind.person(i) for i in sorted(self.offers)]

    async def run(self, me: AgentState, mind: Mind) -> None:
        made = self.offers[me.id]
        if made.target is not None:
            await offer(me, mind, made.target, Purpose.GO, {"beat": made.beat})
        elif made.place is not None:
            await self._go(me, mind, made)

    def finish(self, mind: Mind) -> None:
        self.offers = {}

    # ------------------------------------------------------------------ progress

    def _people(self, beat: Beat, mind: Mind) -> list[AgentState]:
        """The people a beat counts who are in the town (``all``: the named people, not the crowd)."""
        if beat.people == "all":
            return [p for p in mind.people() if not p.crowd]
        here = {p.id: p for p in mind.people()}
        return [here[i] for i in beat.people if i in here]

    def _behind(self, beat: Beat, mind: Mind, start: datetime) -> tuple[float, int]:
        """How far behind its schedule a beat is, as a share of the people it needs (0: on time,
        reached, or not open now), and how many people it is short of that schedule: the nudges it
        may have this hour (a gathering of three with nobody there asks three people, each free to
        say no)."""
        now = mind.now
        if now >= beat.by:
            return 0.0, 0
        counted = self._people(beat, mind)
        needed = beat.needed(len(counted))
        if beat.fact is not None:
            aware = mind.aware(beat.fact)
            have = sum(p.id in aware for p in counted)
            expected = needed * (now - start) / max(beat.by - start, timedelta(minutes=1))
        else:
            if now < (beat.after or start):  # a gathering is asked for inside its window only
                return 0.0, 0
            have, expected = len(self._at(beat, mind)), needed
        if have >= needed:
            if beat.people != "all" or beat.count is not None:  # "everyone" may grow as people arrive
                self.reached.append(beat.id)
            return 0.0, 0
        if expected - have < 0.5:
            return 0.0, 0
        return (expected - have) / needed, math.ceil(expected - have)

    def _at(self, beat: Beat, mind: Mind) -> list[AgentState]:
        """The people a gather beat counts who are at its place now, not walking."""
        pool = self._people(beat, mind) if beat.people else list(mind.people())
        return [p for p in pool if p.place == beat.place and p.status != Status.WALKING]

    # ------------------------------------------------------------------ nudges

    def _nudge(self, beat: Beat, mind: Mind) -> bool:
        done = {who for b, who in self.nudged if b == beat.id}
        if beat.fact is not None:
            return self._carry(beat, mind, done)
        return self._gather(beat, mind, done)

    @staticmethod
    def _can_act(person: AgentState) -> bool:
        """Someone the fact itself can be whispered to: a named person (the background crowd starts no
        conversation), awake."""
        return not person.crowd and person.status != Status.SLEEPING

    @staticmethod
    def _free(person: AgentState, mind: Mind) -> bool:
        """Someone who can take up an offer now: a named person who has planned today (a yes changes
        that plan; a plan made after it would undo it), idle or busy with an activity (not asleep,
        waking, walking or talking), with an hour left before bedtime (the seek rule), and whose hour
        is not for the place of a gathering open now (one the director filled, or their own plan's:
        an offer would take them away from it)."""
        if person.crowd or person.status not in (Status.IDLE, Status.ACTING) or person.plan_day != mind.now.date():
            return False
        block = person.hours.get(mind.now.hour)
        gatherings = {b.place for b in mind.settings.story.beats
                      if b.place is not None and (b.after is None or b.after <= mind.now) and mind.now < b.by}
        return mind.now.hour + 1 < bed_hour(person) and (block is None or block.place not in gatherings)

    def _carry(self, beat: Beat, mind: Mind, done: set[str]) -> bool:
        aware = mind.aware(beat.fact or "")
        waiting = [p for p in self._people(beat, mind) if p.id not in aware]
        if not waiting:
            return False
        name = mind.fact_name(beat.fact or "")
        carriers = [p for p in mind.people()
                    if p.id in aware and p.id not in done and p.id not in self.offers and self._free(p, mind)]
        sought = {o.target.person for o in self.offers.values() if o.target is not None}
        if carriers:
            pairs = []
            for c in carriers:
                for t in waiting:
                    tie = mind.tie(c.id, t.id) if t.id != c.id else None
                    if tie is None or t.place == c.place or t.id in sought:  # a stranger, right here (a
                        continue  # reaction's choice), or someone another carrier goes to find this hour
                    place = usual_place(t, mind.now.hour, mind.hub)
                    news = [n for n in untold_news(c, mind, t.id) if n.provenance and n.provenance.fact == beat.fact]
                    if news and place != c.place:
                        pairs.append((-tie.sentiment, c.id, t.id, c, Target(t.id, news[0], place, tie)))
            if not pairs:
                return False
            _, _, _, carrier, target = min(pairs, key=lambda x: x[:3])
            text = f"{mind.person(target.person).persona.name} has not heard about the {name} yet."
            self._whisper(mind, beat, carrier, text, None, f"{target.person} has not heard it")
            self.offers[carrier.id] = Offer(beat.id, text, target=target)
            return True
        if any(p.id in aware for p in mind.people()) or beat.id in self.whispered:
            return False  # someone here knows (none of them can act on a nudge now), or was just told
        counted = {p.id for p in self._people(beat, mind)}
        ranked = sorted((-sum(mind.tie(p.id, o) is not None for o in counted if o != p.id), p.id, p)
                        for p in mind.people() if p.id not in done and self._can_act(p))
        if not ranked:
            return False
        carrier = ranked[0][2]
        self._whisper(mind, beat, carrier, mind.fact_text(beat.fact or ""), beat.fact, "nobody in the town knows it")
        self.whispered.add(beat.id)
        return True

    def _gather(self, beat: Beat, mind: Mind, done: set[str]) -> bool:
        there = {p.id for p in self._at(beat, mind)}
        pool = self._people(beat, mind) if beat.people else [p for p in mind.people() if not p.crowd]
        free = [p for p in pool
                if p.id not in there and p.id not in done and p.id not in self.offers and self._free(p, mind)]
        if not free:
            return False

        def on(p: AgentState) -> list[str]:
            """What ``p`` knows is going on at the place now (their reason to go; nothing new to them)."""
            return [h.title for h in mind.happenings(p.id) if h.place == beat.place and h.start <= mind.now < h.end]

        def friends(p: AgentState) -> int:
            return sum(mind.tie(p.id, o) is not None for o in there)

        # a reason first (they know what is on there), then friends there, then by id
        person = min(free, key=lambda p: (not on(p), -friends(p), p.id))
        what = on(person)
        reason = f", for the {what[0]}" if what else ""
        text = f"{person.first_name} feels like going to {mind.place_name(beat.place or '')} now{reason}."
        self._whisper(mind, beat, person, text, None, f"{len(there)} of {beat.needed(len(pool))} there")
        self.offers[person.id] = Offer(beat.id, text, place=beat.place, until=beat.by)
        return True

    async def _go(self, me: AgentState, mind: Mind, made: Offer) -> None:
        """Ask ``me`` whether to go to the gathering's place now and stay until it ends (or until their
        bedtime, if it goes on past it); on yes, this hour and the ones after it until then are spent
        there (``keep_hours``)."""
        place = made.place or ""
        there = mind.place_name(place)
        end = None
        if made.until is not None:
            end = min(made.until, bedtime(me, mind.now.date()))
        until = end.strftime("%H:%M") if end is not None else ""
        block = await hour_block(me, mind)
        ctx = await context(me, mind, f"{there} {made.thought}", Purpose.GO)
        msgs = prompts.messages(me.system_prompt, GO_TEMPLATE, **ctx, activity=block.activity,
                                activity_place=mind.place_name(block.place), thought=made.thought, there=there,
                                until=until)
        going, call_id = await choose_yes(me, mind, msgs, template=GO_TEMPLATE, purpose=Purpose.GO, there=BLANK,
                                          until=BLANK if until else "")
        if not going:
            return
        activity = f"spending time at {there}"
        queue_hour(me, mind, [Action(activity, place, 60 - mind.now.minute, call_id=call_id)],
                   f"going to {there}", replacing=True)
        if end is not None:
            keep_hours(me, mind, activity, place, end, call_id)

    def _whisper(self, mind: Mind, beat: Beat, person: AgentState, text: str, fact: str | None, why: str) -> None:
        mind.whisper(person, text, fact, {"beat": beat.id, "why": why})
        self.nudged.append([beat.id, person.id])

    # ------------------------------------------------------------------ resume

    def state(self) -> Any:
        return {"used": dict(self.used), "nudged": [list(x) for x in self.nudged], "reached": list(self.reached)}

    def restore(self, state: Any) -> None:
        state = state or {}
        self.used = {str(k): int(v) for k, v in (state.get("used") or {}).items()}
        self.nudged = [[str(b), str(p)] for b, p in state.get("nudged") or []]
        self.reached = [str(b) for b in state.get("reached") or []]

