"""When things happen in a run: the clock (start, tick length, duration) and the scheduled events.

A scheduled event is what a scenario (or a fork, ``simulation.run.fork``) makes happen at a
game time: a whisper, a place event, a setting changed, a person arriving or leaving, a fact's
text corrected. Being part of the scenario a run is made from, each is in the run's saved
scenario, so resume, verify and forks replay it like the rest.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field, NaiveDatetime, StrictBool, StrictFloat, StrictInt, model_validator

from simulation.formats.fields import Identifier, LongText, ShortText, StrictModel
from simulation.scenario.measures import FactDetail, unique_names
from simulation.scenario.people import PersonaEntry

__all__ = ["CHANGEABLE", "KINDS", "Clock", "ScheduledEvent"]

KINDS = ("whisper", "place_event", "setting", "arrival", "departure", "correction", "prop")
"""The kinds of scheduled event (``ScheduledEvent.kind``)."""

CHANGEABLE = ("cognition.attention_bandwidth", "cognition.max_conversation_turns", "cognition.min_conversation_turns",
              "cognition.conversation_cooldown_minutes", "cognition.reactions_per_hour", "cognition.choices",
              "cognition.calibrate", "cognition.talk_prior", "cognition.seek", "memory.reflection_threshold")
"""The settings a ``setting`` event may change during a run (the numbers cognition reads each
tick); the others shape the town, its memory or its model and hold for the whole run."""


class Clock(StrictModel):
    start: NaiveDatetime = Field(description="game time of the first tick, 'YYYY-MM-DD HH:MM' (no time zone)")
    tick_minutes: int = Field(10, ge=1, le=240, description="game minutes per tick")
    duration_hours: float = Field(24, gt=0, le=24 * 60, description="game hours in a full run")

    @model_validator(mode="after")
    def _possible(self) -> Clock:
        if self.tick_minutes > self.duration_hours * 60:
            raise ValueError(f"tick_minutes ({self.tick_minutes}) is longer than the whole run "
                             f"(duration_hours {self.duration_hours:g} = {self.duration_hours * 60:g} minutes)")
        try:
            self.start + timedelta(hours=self.duration_hours)
        except OverflowError:
            raise ValueError(f"a run of {self.duration_hours:g} hours from {self.start:%Y-%m-%d %H:%M} "
                             "would end after the year 9999") from None
        return self

    @property
    def total_ticks(self) -> int:
        return max(1, int(self.duration_hours * 60 // self.tick_minutes))

    def time_at(self, tick: int) -> datetime:
        return self.start + timedelta(minutes=tick * self.tick_minutes)

    def tick_at(self, moment: datetime) -> int:
        """First tick whose time is at or after ``moment``."""
        minutes = (moment - self.start).total_seconds() / 60
        return max(0, int(-(-minutes // self.tick_minutes)))


class ScheduledEvent(StrictModel):
    at: NaiveDatetime = Field(description="game time, 'YYYY-MM-DD HH:MM' (no time zone)")
    kind: Literal[KINDS] = Field(  # type: ignore[valid-type]
        description="whisper: a thought put into one person's mind (their 'inner voice'); "
        "place_event: something everyone at a place can see while it lasts; "
        "setting: a cognition or memory setting changes from then on (e.g. cognition.reactions_per_hour); "
        "arrival: a person (person) arrives in the town at a place and lives there from then on; "
        "departure: a person (to) leaves the town: from then on they act, meet and are met no more; "
        "correction: a fact's text (and details) is corrected from then on: what later tellings and probe "
        "answers are scored against; "
        "prop: an object (object) at a place (place) is in a new state (text) from then on, and the people "
        "there notice the change for duration_minutes"
    )
    text: LongText = Field(min_length=1, description="what is thought or seen; why a setting changes; a prop's new state; the words "
                           "the record gives an arrival or a departure; a correction's new text of the fact")
    to: Identifier | None = Field(None, description="persona id (whisper; departure: who leaves)")
    place: Identifier | None = Field(None, description="place id (place_event; arrival: where they arrive)")
    duration_minutes: int = Field(60, ge=1, le=24 * 60, description="how long a place event (or a prop's "
                                  "change, as news at its place) lasts")
    object: ShortText | None = Field(None, description="a prop event: the object (town.places[].objects) whose "
                                     "state changes")
    fact: Identifier | None = Field(None, description="the fact (facts[].id) this whisper or place event brings "
                                    "into the town; a correction: the fact it corrects")
    setting: Literal[CHANGEABLE] | None = Field(None, description="the setting a 'setting' event changes")  # type: ignore[valid-type]
    value: StrictBool | StrictInt | StrictFloat | str | None = Field(None, description="its new value (a 'setting' event)")
    person: PersonaEntry | None = Field(
        None, description="who arrives (an arrival): a persona file or an inline persona, with their home, "
        "workplace, crowd and llm as under personas:, and no start_place (they start at the event's place)")
    details: list[FactDetail] | None = Field(
        None, description="a correction: the fact's details from then on, as under facts[].details "
        "(default: its details as they were)")

    @model_validator(mode="after")
    def _target(self) -> ScheduledEvent:
        if self.kind == "whisper" and not self.to:
            raise ValueError("a whisper needs 'to' (a persona id)")
        if self.kind == "place_event" and not self.place:
            raise ValueError("a place_event needs 'place' (a place id)")
        if self.kind == "setting" and (self.setting is None or self.value is None):
            raise ValueError(f"a setting event needs 'setting' (one of {', '.join(CHANGEABLE)}) and 'value'")
        if self.kind != "setting" and (self.setting is not None or self.value is not None):
            raise ValueError("'setting' and 'value' belong to a setting event")
        if self.kind == "departure" and not self.to:
            raise ValueError("a departure needs 'to' (the persona id of who leaves)")
        if self.kind == "arrival" and (self.person is None or not self.place):
            raise ValueError("an arrival needs 'person' (a persona file or inline persona, with a home) and "
                             "'place' (where they arrive)")
        if self.kind != "arrival" and self.person is not None:
            raise ValueError("'person' belongs to an arrival")
        if self.person is not None and self.person.start_place is not None:
            raise ValueError("an arriving person starts at the event's 'place', not at a start_place")
        if self.kind == "correction" and not self.fact:
            raise ValueError("a correction needs 'fact' (the id of the fact whose text it corrects) and 'text' "
                             "(the fact's new text)")
        if self.kind == "prop" and (not self.place or not self.object):
            raise ValueError("a prop event needs 'place' (a place id), 'object' (one of its objects) and 'text' "
                             "(the object's new state)")
        if self.kind != "prop" and self.object is not None:
            raise ValueError("'object' belongs to a prop event")
        if self.kind == "prop" and ("\n" in self.text.strip() or len(self.text) > 200 or self.fact is not None):
            raise ValueError("a prop event's text is the object's new state, one line of at most 200 characters, "
                             "and it brings no fact")
        if self.kind != "correction" and self.details is not None:
            raise ValueError("'details' belong to a correction")
        if self.details is not None:
            unique_names(self.details)
        return self
