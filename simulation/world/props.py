"""Props: the objects at the town's places, each with a state that can change during a run.

Why (issue 37; HAMLET's props): a story moves through things as well as people: the cafe's door is
locked, the boat is holed, the hall is decorated. A scenario gives an object a starting state
(``town.places[].states``) and schedules changes (a ``prop`` event: the place, the object and its
new state as the text); the director may change one as a nudge later. Everyone at the place sees
the state in every prompt's "There:" line ("piano (out of tune)"), and a change is a place event
for the hour after it, so the people there notice it as they notice any happening.

What holds between ticks is only each object's state, and it follows from the scenario's prop
events alone, so a resumed run makes it again from the events delivered before its checkpoint
(``TownModel.restore``), as it does settings and arrivals.
"""

from __future__ import annotations

from collections.abc import Iterable

from simulation.scenario import Place

__all__ = ["Props"]


class Props:
    def __init__(self, places: Iterable[Place]):
        places = list(places)
        self._objects = {p.id: list(p.objects) for p in places}
        self._states = {(p.id, name): state for p in places for name, state in p.states.items()}

    def state(self, place: str, name: str) -> str | None:
        return self._states.get((place, name))

    def set(self, place: str, name: str, state: str) -> str | None:
        """``name`` at ``place`` is ``state`` from now on; the state it had (None: none given)."""
        if name not in self._objects.get(place, []):
            raise KeyError(f"no object {name!r} at {place!r}")
        was = self._states.get((place, name))
        self._states[(place, name)] = state
        return was

    def shown(self, place: str) -> list[str]:
        """The place's objects as people see them: each with its state in brackets, when it has one."""
        return [f"{name} ({s})" if (s := self._states.get((place, name))) else name
                for name in self._objects.get(place, [])]
