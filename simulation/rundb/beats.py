"""Whether a run reached its story's beats (``scenario.story``), read from what it recorded.

A *reach* beat is reached when ``needed`` of its people were aware of its fact by its deadline
(``facts.first_aware``: the awareness every other figure counts, so a beat cannot be reached by a
rule of its own); a *gather* beat when ``needed`` people (of those it names, or anyone) were at
its place, not walking, at the end of one tick inside its window (``agent_states``, as attendance
counts). A beat is *decided* once the run reached its deadline, or reached it earlier; a beat
still open when the run stopped is left out of ``story.beats_reached`` (never a 0 for a deadline
not yet come). Standard library only (see the package's docstring).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from simulation.rundb.facts import first_aware, scenario_part
from simulation.rundb.metrics import crowd, people

__all__ = ["BeatResult", "beats", "story_beats"]


@dataclass(frozen=True)
class BeatResult:
    """One beat's outcome. Times as run.db writes them (``YYYY-MM-DD HH:MM``)."""

    id: str
    kind: str
    """``reach`` or ``gather``."""
    what: str
    needed: int
    by: str
    reached: bool | None
    """None: the run stopped before the deadline and had not reached it yet."""
    reached_at: str | None = None
    who: list[str] = field(default_factory=list)
    """Reach: the named people aware by the deadline (or the run's end); gather: the largest gathering's
    people, by id."""


def _when(value: Any) -> str:
    """A beat's time as run.db's ``sim_time`` (the scenario stores ``YYYY-MM-DDTHH:MM:SS``)."""
    return str(value).replace("T", " ")[:16]


def story_beats(con: Any, run_id: str) -> list[dict[str, Any]]:
    """The scenario's ``story.beats`` as the run was started (from ``resume_state``), as plain dicts."""
    story = scenario_part(con, run_id, "story")
    beats = story.get("beats") if isinstance(story, dict) else None
    return [b for b in beats or [] if isinstance(b, dict) and "id" in b and "by" in b]


def beats(con: Any, run_id: str) -> list[BeatResult]:
    """Every beat of the run's story, in the scenario's order, with its outcome."""
    found = story_beats(con, run_id)
    if not found:
        return []
    row = con.execute("select min(sim_time), max(sim_time) from agent_states where run_id = ?", [run_id]).fetchone()
    first, last = (row[0], row[1]) if row else (None, None)
    learned = first_aware(con, run_id) if any(b.get("fact") for b in found) else {}
    everyone = sorted(set(people(con, run_id)) - crowd(con, run_id))
    out = []
    for b in found:
        named = everyone if b.get("people") == "all" else [str(p) for p in b.get("people") or []]
        needed = int(b["count"]) if b.get("count") else len(named) or 2
        by = _when(b["by"])
        if b.get("fact"):
            times = sorted((le.sim_time, le.agent_id) for le in learned.get(str(b["fact"]), []) if le.agent_id in named)
            who = sorted(a for t, a in times if t <= by)
            reached_at = times[needed - 1][0] if len(times) >= needed else None
        else:
            who, reached_at = _gathering(con, run_id, str(b["place"]), named, needed,
                                         _when(b["after"]) if b.get("after") else first, by)
        reached = reached_at is not None and reached_at <= by
        decided = reached or (last is not None and last >= by)
        out.append(BeatResult(str(b["id"]), "reach" if b.get("fact") else "gather", str(b.get("what") or ""),
                              needed, by, reached if decided else None, reached_at if reached else None, who))
    return out


def _gathering(con: Any, run_id: str, place: str, named: list[str], needed: int, after: str | None,
               by: str) -> tuple[list[str], str | None]:
    """(the largest gathering's people inside the window, the first tick's time that had ``needed``)."""
    at: dict[str, set[str]] = {}
    try:
        rows = con.execute("select sim_time, agent_id from agent_states where run_id = ? and place = ? and "
                           "status != 'walking' and sim_time >= ? and sim_time <= ? order by tick",
                           [run_id, place, after or "", by]).fetchall()
    except sqlite3.OperationalError:
        return [], None
    for when, agent_id in rows:
        if not named or agent_id in named:
            at.setdefault(when, set()).add(agent_id)
    biggest = max(at.values(), key=len, default=set())
    first = next((when for when, who in sorted(at.items()) if len(who) >= needed), None)
    return sorted(biggest), first
