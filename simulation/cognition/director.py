"""The director: a phase that keeps the town on its story's beats, by nudges it declares and records.

Why (issue 37; HAMLET's director): a designer who writes "the gale warning reaches the skippers by
noon" wants the town to get there by its people's own choices, and wants to know when it had to
be helped. At the first tick of every game hour the director reads each open beat's progress
from the record (who is aware of the beat's fact: the provenance tracker's awareness, the figure
the behaviour report counts; who is at a gathering's place) and, for the beat furthest behind its
schedule, makes one nudge, at most ``story.nudges_per_day`` a game day:

* a **reach** beat is behind when fewer of its people know the fact than a steady pace from the
  run's start to its deadline would have told by now (by half a person or more). The nudge is
  a thought put in the mind of someone who could carry it: the aware person (named, awake) with
  the warmest tie to one of the beat's people who does not know yet, naming that person and the
  news ("Tam Pascoe has not heard about the gale warning yet."). It tells the carrier nothing
  new, so whether the news travels is still the carrier's choice; only a fact nobody in the town
  knows is whispered itself, to the person with the most ties to the beat's people.
* a **gather** beat is behind, from an hour before its window until its end, when fewer people
  than it needs are at its place. The nudge is a thought for one person it counts who is
  elsewhere (and not on the way there), awake and not talking: that they feel like going to the
  place (at the window's start, or now).

A beat once seen reached is not nudged again. A nudge is a ``nudge`` event (``data``: beat, why,
fact when the thought is the fact itself) and the memory it made, tied to the event: source
``directed``, which never counts as awareness and is not read for a fact, so nobody is counted as
told, or aware, by the director's words; only the whisper of a fact nobody knew is ``whispered``
and makes its one person aware, as a scenario's whisper would. No LLM is asked, and
every choice is ordered by ids, so the same seed gives the same nudges; what the director has
used and whom it nudged it saves with the tick (``state``), so a resumed run nudges as the
uninterrupted one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from simulation.cognition.phase import Phase
from simulation.core import Status
from simulation.scenario.story import Beat

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

__all__ = ["LEAD", "Director"]

LEAD = timedelta(hours=1)
"""How long before a gathering's window the director starts to see it as behind."""


class Director(Phase):
    name = "director"

    def __init__(self) -> None:
        self.used: dict[str, int] = {}
        """Game day ('YYYY-MM-DD') -> nudges made that day."""
        self.nudged: list[list[str]] = []
        """[beat id, person id] of every nudge made, so nobody is nudged twice for one beat."""
        self.reached: list[str] = []
        """Beats seen reached (a gathering that was big enough once is not nudged again when it thins)."""

    def select(self, mind: Mind) -> list[AgentState]:
        return []

    async def run(self, me: AgentState, mind: Mind) -> None:  # pragma: no cover - never selected
        return None

    def finish(self, mind: Mind) -> None:
        story = mind.settings.story
        if not story.director or not story.beats or mind.now.minute >= mind.settings.tick_minutes:
            return
        day = mind.now.strftime("%Y-%m-%d")
        if self.used.get(day, 0) >= story.nudges_per_day:
            return
        start = mind.now - timedelta(minutes=mind.tick * mind.settings.tick_minutes)
        behind = sorted(((lag, i, beat) for i, beat in enumerate(story.beats) if beat.id not in self.reached
                         and (lag := self._behind(beat, mind, start)) > 0), key=lambda t: (-t[0], t[1]))
        for _, _, beat in behind:
            if self._nudge(beat, mind):
                self.used[day] = self.used.get(day, 0) + 1
                return

    # ------------------------------------------------------------------ progress

    def _people(self, beat: Beat, mind: Mind) -> list[AgentState]:
        """The people a beat counts who are in the town (``all``: the named people, not the crowd)."""
        if beat.people == "all":
            return [p for p in mind.people() if not p.crowd]
        here = {p.id: p for p in mind.people()}
        return [here[i] for i in beat.people if i in here]

    def _behind(self, beat: Beat, mind: Mind, start: datetime) -> float:
        """How far behind its schedule a beat is, as a share of the people it needs (0: on time,
        reached, or not open now)."""
        now = mind.now
        if now >= beat.by:
            return 0.0
        counted = self._people(beat, mind)
        needed = beat.needed(len(counted))
        if beat.fact is not None:
            aware = mind.aware(beat.fact)
            have = sum(p.id in aware for p in counted)
            expected = needed * (now - start) / max(beat.by - start, timedelta(minutes=1))
        else:
            opens = beat.after or start
            if now < opens - LEAD:
                return 0.0
            have, expected = len(self._at(beat, mind)), needed
            if now < opens:
                return (needed - have) / needed if have < needed else 0.0
        if have >= needed:
            if beat.people != "all" or beat.count is not None:  # "everyone" may grow as people arrive
                self.reached.append(beat.id)
            return 0.0
        return (expected - have) / needed if expected - have >= 0.5 else 0.0

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
        """Someone a nudge can move: a named person (the background crowd starts no conversation), awake."""
        return not person.crowd and person.status != Status.SLEEPING

    def _carry(self, beat: Beat, mind: Mind, done: set[str]) -> bool:
        aware = mind.aware(beat.fact or "")
        waiting = [p for p in self._people(beat, mind) if p.id not in aware]
        if not waiting:
            return False
        name = mind.fact_name(beat.fact or "")
        carriers = [p for p in mind.people() if p.id in aware and p.id not in done and self._can_act(p)]
        if carriers:
            pairs = []
            for c in carriers:
                for t in waiting:
                    if t.id == c.id:
                        continue
                    tie = mind.tie(c.id, t.id)
                    pairs.append((-(tie.sentiment if tie else -2.0), c.id, t.id, c, t))
            if not pairs:
                return False
            _, _, _, carrier, target = min(pairs, key=lambda x: x[:3])
            text = f"{target.persona.name} has not heard about the {name} yet."
            self._whisper(mind, beat, carrier, text, None, f"{target.id} has not heard it")
            return True
        if any(p.id in aware for p in mind.people()):  # someone here knows: none of them can act on a nudge now
            return False
        counted = {p.id for p in self._people(beat, mind)}
        ranked = sorted((-sum(mind.tie(p.id, o) is not None for o in counted if o != p.id), p.id, p)
                        for p in mind.people() if p.id not in done and self._can_act(p))
        if not ranked:
            return False
        carrier = ranked[0][2]
        self._whisper(mind, beat, carrier, mind.fact_text(beat.fact or ""), beat.fact, "nobody in the town knows it")
        return True

    def _gather(self, beat: Beat, mind: Mind, done: set[str]) -> bool:
        there = {p.id for p in self._at(beat, mind)}
        pool = self._people(beat, mind) if beat.people else [p for p in mind.people() if not p.crowd]
        free = [p for p in pool if p.id not in there and p.id not in done and self._can_act(p)
                and p.status != Status.TALKING and not (p.status == Status.WALKING and p.route[-1:] == [beat.place])]
        if not free:
            return False
        person = min(free, key=lambda p: p.id)
        opens = beat.after or mind.now
        when = "now" if mind.now >= opens else f"at {opens:%H:%M}"
        text = f"{person.first_name} feels like going to {mind.place_name(beat.place or '')} {when}."
        self._whisper(mind, beat, person, text, None, f"{len(there)} of {beat.needed(len(pool))} there")
        return True

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

