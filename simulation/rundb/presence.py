"""Who was in the town when, read from run.db: the denominators of every per-person number.

A person is in the town from the tick they arrived (``agents.arrived_tick``: 0 for the people a
run starts with) up to, not including, the tick they left (``agents.left_tick``: NULL for whoever
stayed), so at tick *t* when ``arrived <= t < left``: they have an ``agent_states`` row then. A
rate per person-hour (calls, encounters, importance) divides by the hours each person was there,
not the whole run's hours times everyone ever in it, or a fork that adds or removes someone
would count the hours the newcomer was not yet there and the leaver no longer was::

    person-hours = sum over people of (min(left, ticks) - arrived) * tick_minutes / 60

with ``ticks`` the run's ticks recorded. ``headcount`` gives that as people-equivalents (person-
ticks / ticks), so the callers' ``headcount * game_hours`` is the person-hours and, for a run
where everyone was there throughout, exactly the ``len(people) * game_hours`` it always was.
A run recorded before the two columns existed had everyone there throughout. Standard library
only (see the package's docstring).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simulation.rundb.connect import column_names


@dataclass(frozen=True)
class Stay:
    """When one person was in the town: from ``arrived`` up to ``left`` (None: to the end)."""

    arrived: int = 0
    left: int | None = None

    def here_at(self, tick: int) -> bool:
        return self.arrived <= tick and (self.left is None or tick < self.left)

    def ticks(self, run_ticks: int) -> int:
        """How many of the run's first ``run_ticks`` ticks they were in the town for."""
        end = run_ticks if self.left is None else min(self.left, run_ticks)
        return max(0, end - self.arrived)


def stays(con: Any, run_id: str) -> dict[str, Stay]:
    """agent id -> their stay, in id order (everyone ever in the run)."""
    columns = column_names(con, "agents")
    arrived = "arrived_tick" if "arrived_tick" in columns else "0"
    left = "left_tick" if "left_tick" in columns else "null"
    return {a: Stay(int(t or 0), None if g is None else int(g)) for a, t, g in con.execute(
        f"select agent_id, {arrived}, {left} from agents where run_id = ? order by agent_id", [run_id])}


def run_ticks(con: Any, run_id: str) -> int:
    """The ticks the run recorded (``ticks`` rows), as ``behaviour.game_hours`` counts them."""
    return int(con.execute("select count(*) from ticks where run_id = ?", [run_id]).fetchone()[0] or 0)


def everyone_throughout(stayed: Mapping[str, Stay]) -> bool:
    """Whether nobody arrived after the start or left: an ordinary run."""
    return all(s.arrived == 0 and s.left is None for s in stayed.values())


def headcount(stayed: Mapping[str, Stay], ticks: int, who: Iterable[str] | None = None) -> float:
    """People-equivalents of ``who`` (default: everyone in ``stayed``) over a run of ``ticks``
    ticks: their person-ticks / ``ticks``, so times the run's game hours it is their person-hours
    (see the module's docstring). ``len(who)`` exactly when each was there throughout (and for a
    run of no ticks, where every per-hour rate is undefined anyway)."""
    ids = list(stayed if who is None else who)
    if not ticks:
        return float(len(ids))
    return sum(stayed.get(a, Stay()).ticks(ticks) for a in ids) / ticks


def here_at(stayed: Mapping[str, Stay], tick: int) -> list[str]:
    """The people in the town at ``tick``, in id order."""
    return [a for a, s in stayed.items() if s.here_at(tick)]


__all__ = ["Stay", "everyone_throughout", "headcount", "here_at", "run_ticks", "stays"]
