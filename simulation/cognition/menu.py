"""The choices a person's day is planned from.

A 135M model asked to write a day's plan as free text invents places and activities ("Mon
12:00 at Town Square, Sarah's Flat, Sarah's Flat"). Asked to choose, it cannot: the engine
builds a menu and the answer's schema allows nothing else (an enum of the options' labels).
The menu holds, in this order:

1. the person's usual day (their habits, or a plain day from where they live and work:
   ``plan.routine_plan``), each at its usual hour;
2. what they know is happening today (a fact they are aware of with a place, a day and a
   time: "the party at Hobbs Cafe, 17:00-19:00"), at its hour;
3. things anyone can do at any hour: rest at home, work (if they have a workplace), and go
   where people gather (a cafe, a bar, a park, a square) when nothing above is there already.

The prompt lists the options numbered, by their labels ("3. coffee at Hobbs Cafe"); the model
answers with numbers, so a choice maps back to an activity and a place exactly, and no text of
the scenario (a place name, a habit) ever becomes part of the answer's schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from simulation.core import PlanItem

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

GATHERING = {"cafe": "coffee at {name}", "bar": "a drink at {name}", "park": "a walk in {name}",
             "square": "sitting in {name}"}
"""Place kinds where people meet, and what one does there."""


@dataclass(frozen=True)
class Option:
    activity: str
    place: str
    hour: int | None
    """The hour it belongs to (a habit, a happening), or None: any hour."""
    label: str
    until: int | None = None
    """For a happening: the hour it is over (the usual day resumes then)."""


def _label(activity: str, place_name: str) -> str:
    return activity if place_name.lower() in activity.lower() else f"{activity} ({place_name})"


def day_menu(me: AgentState, mind: Mind, usual: list[PlanItem], today: date) -> list[Option]:
    """The options for ``me``'s plan today, ``usual`` being their usual day from now on."""
    options: list[Option] = []
    seen: set[tuple[str, str]] = set()
    labels: set[str] = set()

    def add(activity: str, place: str, hour: int | None, until: int | None = None) -> None:
        label = _label(activity, mind.place_name(place))
        if (activity, place) not in seen and label not in labels:
            seen.add((activity, place))
            labels.add(label)
            options.append(Option(activity, place, hour, label, until))

    for item in usual:
        add(item.activity, item.place, item.hour)
    for h in mind.happenings(me.id):
        if h.start.date() == today:
            add(f"going to the {h.title} at {mind.place_name(h.place)}", h.place, h.start.hour,
                max(h.start.hour + 1, h.end.hour + (h.end.minute > 0)))
    add("resting at home", me.home, None)
    if me.workplace:
        add("working", me.workplace, None)
    for place in mind.place_ids:  # where people gather and the day has nothing planned yet
        template = GATHERING.get(mind.place_kind(place))
        if template is not None and all(o.place != place for o in options):
            add(template.format(name=mind.place_name(place)), place, None)
    return options


__all__ = ["GATHERING", "Option", "day_menu"]
