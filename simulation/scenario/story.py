"""A scenario's ``story:`` section: the beats a story should reach.

Why (issue 37; HAMLET's blueprint and director): a designer writes not only who lives in the town
but what should happen in it, "the gale warning reaches the skippers by noon", "half the village
is at the chapel for the meeting", and wants to know whether it did. A **beat** is one such
checkable goal with a deadline:

* a *reach* beat (``fact``): the fact should reach ``people`` (all of them, or ``count`` of
  them; ``all``: every named person of the run, the background crowd apart) by ``by``; reached
  when that many of them are aware of it (``rundb.facts.first_aware``, the same awareness every
  other figure counts);
* a *gather* beat (``place``): ``count`` people (default: all of ``people``, or 2 when none are
  named) should be at ``place`` together, not walking, at the end of one tick between ``after``
  and ``by``; when ``people`` are named, only they count.

The behaviour report scores every beat whose deadline the run reached (``rundb.beats``,
``story.beats_reached``). With ``director: on`` a phase nudges the beats behind their schedule
each game hour, as many people as each is short, at most ``nudges_per_day`` times a game day
(``simulation.cognition.director``); the report counts the nudges (``story.nudges``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NaiveDatetime, StrictBool, model_validator

from simulation.formats.fields import Identifier, LongText, StrictModel

__all__ = ["Beat", "Story"]


class Beat(StrictModel):
    id: Identifier
    what: LongText = Field("", description="the beat in a sentence, for people reading the report")
    fact: Identifier | None = Field(None, description="a reach beat: the fact (facts[].id) that should reach people")
    place: Identifier | None = Field(None, description="a gather beat: the place (town.places[].id) people "
                                     "should gather at")
    people: Literal["all"] | list[Identifier] = Field(
        default_factory=list, description="who should learn the fact or come: persona ids, or 'all' (every "
        "named person of the run); a gather beat may name nobody, and then anyone counts")
    count: int | None = Field(None, ge=1, le=1000, description="how many of them are enough (default: all "
                              "named; a gather beat that names nobody: 2)")
    after: NaiveDatetime | None = Field(None, description="a gather beat: the window's start, 'YYYY-MM-DD "
                                        "HH:MM' (default: the run's start)")
    by: NaiveDatetime = Field(description="the deadline, 'YYYY-MM-DD HH:MM' (no time zone), at or before the "
                              "run's last tick")

    @model_validator(mode="after")
    def _kind(self) -> Beat:
        if (self.fact is None) == (self.place is None):
            raise ValueError("a beat is either a reach beat ('fact': the news, and 'people' who should "
                             "learn it) or a gather beat ('place'), so it names exactly one of them")
        if self.fact is not None and not self.people:
            raise ValueError("a reach beat needs 'people': who the fact should reach")
        if self.fact is not None and self.after is not None:
            raise ValueError("'after' belongs to a gather beat (a reach beat counts from the run's start)")
        if isinstance(self.people, list):
            if len(self.people) > 1000:
                raise ValueError("'people' names more than 1000 people")
            if self.people and self.count is not None and self.count > len(self.people):
                raise ValueError(f"'count' ({self.count}) is more than the {len(self.people)} people named")
            if len(set(self.people)) != len(self.people):
                raise ValueError("'people' names someone twice")
        if self.after is not None and self.after >= self.by:
            raise ValueError(f"'after' ({self.after:%Y-%m-%d %H:%M}) is not before 'by' ({self.by:%Y-%m-%d %H:%M})")
        return self

    @property
    def kind(self) -> str:
        return "reach" if self.fact is not None else "gather"

    def needed(self, everyone: int) -> int:
        """How many people reach it: ``count``, else everyone named (``everyone``: how many ``all``
        is), else 2 (a gathering of anyone)."""
        if self.count is not None:
            return self.count
        return everyone if self.people == "all" else len(self.people) or 2


class Story(StrictModel):
    beats: list[Beat] = Field(default_factory=list, max_length=200,
                              description="what should happen, by when: each scored in the behaviour report")
    director: StrictBool = Field(False, description="on: a director phase nudges the beats behind their "
                                 "schedule each game hour (simulation/cognition/director.py)")
    nudges_per_day: int = Field(3, ge=0, le=100, description="the director's nudges at most, per game day")
