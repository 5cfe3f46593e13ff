"""Whether moods move with what people see: each happening's witnesses against those who missed it.

Why (issue 37): a mood is scored from the model's probabilities (``cognition/mood.py``), and a
number that moves is not yet a mood. It means something if a happening moves the valence of the
people who saw it and not that of the people who did not: a burst pipe at the bakery should lower
the valence of those who were there against everyone else's over the same hour, a market should
raise it. Comparing against the people who did not see it takes out what moves everyone (the
hour of the day, the model's drift over a conversation).

A happening is a place event or a prop's change (``events.kind`` ``place_event`` or ``prop``). Its
witnesses are the named people with a ``perceived`` memory of it (``memories.event_id``): the
engine's own record of who noticed it, people who arrived while it went on included. A witness's
shift is their valence one game hour after the tick they first noticed it minus their valence at
the tick before: a mood is asked at most once a game hour, so by then every witness has been
asked. The others are the named people in the town and awake at the happening's first tick who
never noticed it, over the hour from that tick. Only people who already had a mood before count:
a first mood moves from the engine's neutral start, not from how the person felt, and only those
to whom something happened are asked at all, so counting first moods would give witnesses a shift
by construction (the no-LLM control, whose every mood is the first label, would show one). A
happening whose hour had not passed when the run stopped, or that began at tick 0, is left out,
never counted as no shift.

Standard library only (see the package's docstring).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from typing import Any

from simulation.rundb.connect import column_names, table_names

__all__ = ["HAPPENINGS", "MoodShift", "mood_shifts"]

HAPPENINGS = ("place_event", "prop")
"""The event kinds everyone at a place notices (``memories.event_id`` points at them)."""


@dataclass(frozen=True)
class MoodShift:
    """One happening: valence shifts over the hour after it, of those who saw it and of the rest."""

    key: str
    """The metric name's middle: the happening's fact id, else ``<place>_<HHMM>`` of its first tick
    (``_2``, ``_3`` after a key already taken)."""
    event_id: int
    place: str
    tick: int
    text: str
    saw: dict[str, float]
    """Witness with a mood before -> valence an hour after they first noticed it, minus the valence before."""
    unseen: dict[str, float]
    """Named person awake at its first tick, with a mood then, who never noticed it -> their shift
    over the same hour."""
    first_moods: int = 0
    """Witnesses left out because they had no mood before they noticed it."""

    @property
    def saw_shift(self) -> float | None:
        return statistics.fmean(self.saw.values()) if self.saw else None

    @property
    def unseen_shift(self) -> float | None:
        return statistics.fmean(self.unseen.values()) if self.unseen else None

    @property
    def gap(self) -> float | None:
        """Witnesses' mean shift minus the others': below 0, the happening made its witnesses feel worse."""
        if self.saw_shift is None or self.unseen_shift is None:
            return None
        return self.saw_shift - self.unseen_shift


def _has_moods(con: Any, run_id: str) -> bool:
    if "agent_states" not in table_names(con) or "valence" not in column_names(con, "agent_states"):
        return False  # recorded before moods (run.db schema 14)
    return con.execute("select 1 from agent_states where run_id = ? and mood is not null limit 1",
                       [run_id]).fetchone() is not None


def mood_shifts(con: Any, run_id: str) -> list[MoodShift]:
    """Every decided happening of a run whose people had moods, in the order they began; ``[]`` for
    a run without moods (``cognition.moods`` off, or nobody was ever asked)."""
    if not _has_moods(con, run_id) or not {"memories", "events"} <= set(table_names(con)):
        return []
    minutes = con.execute("select tick_minutes from runs where run_id = ?", [run_id]).fetchone()
    hour = max(1, math.ceil(60 / ((minutes[0] if minutes else 10) or 10)))
    last = con.execute("select max(tick) from agent_states where run_id = ?", [run_id]).fetchone()[0]
    crowd = "crowd" in column_names(con, "agents")
    named = {a for a, c in con.execute(
        f"select agent_id, {'crowd' if crowd else '0'} from agents where run_id = ?", [run_id]) if not c}
    valence: dict[tuple[int, str], float | None] = {}
    awake: dict[int, set[str]] = {}
    for tick, agent_id, status, value in con.execute(
            "select tick, agent_id, status, valence from agent_states where run_id = ?", [run_id]):
        valence[(int(tick), agent_id)] = float(value) if value is not None else None
        if status != "sleeping":
            awake.setdefault(int(tick), set()).add(agent_id)
    shifts: list[MoodShift] = []
    keys: set[str] = set()
    for event_id, tick, sim_time, place, text, data in con.execute(
            f"select id, tick, sim_time, place, text, data from events where run_id = ? "
            f"and kind in ({', '.join('?' for _ in HAPPENINGS)}) order by tick, id", [run_id, *HAPPENINGS]):
        tick = int(tick)
        if tick == 0 or last is None or tick + hour > last:
            continue
        first: dict[str, int] = {}
        for agent_id, seen in con.execute(
                "select agent_id, min(tick) from memories where run_id = ? and event_id = ? and source = 'perceived' "
                "group by agent_id", [run_id, event_id]):
            if agent_id in named:
                first[agent_id] = int(seen)

        def shift(agent_id: str, at: int) -> float | None:
            before, after = valence.get((at - 1, agent_id)), valence.get((at + hour, agent_id))
            return None if before is None or after is None else after - before

        decided = {a: at for a, at in first.items() if at + hour <= last}
        saw = {a: s for a, at in decided.items() if (s := shift(a, at)) is not None}
        unseen = {a: s for a in sorted(awake.get(tick, set()) & named - set(first))
                  if (s := shift(a, tick)) is not None}
        fact = (json.loads(data) if data else {}).get("fact")
        base = key = fact or f"{place}_{sim_time[11:16].replace(':', '')}"
        n = 1
        while key in keys:  # the same fact shown twice, or two happenings at one place and time
            n += 1
            key = f"{base}_{n}"
        keys.add(key)
        shifts.append(MoodShift(key, int(event_id), place or "", tick, text or "", saw, unseen,
                                first_moods=len(decided) - len(saw)))
    return shifts
