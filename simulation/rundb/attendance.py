"""Who came to a happening, and who planned to: Generative Agents' "5 of the 12 invited came".

A fact is a *happening* when its details give a place (``kind: place``), a day (``kind: date``)
and a time range (``kind: time``, ``"17:00-19:00"``): Isabella's party at Hobbs Cafe on
February 14 from 17:00 to 19:00. For each happening whose window the run reached:

* **attended**: the named people at its place, not walking, at the end of some tick inside the
  window (``agent_states``; the host counts);
* **invited**: the people invited to it (``invitations`` rows for the fact, made by a move or by a
  line that carried the invitation, whatever the answer), and of them, who came;
* **aware**: the people aware of it when the window began (``facts.first_aware``), and of them,
  who came;
* **planned**: of the people aware of it by the time they planned the happening's day, those whose
  plan for that day has an hour inside the window at its place (``plans``). Only runs that reach
  the happening's day have plans for it.

A window the run did not reach to its end gives no attendance: the behaviour report leaves the
metrics out (never a 0 for a party that has not happened yet). Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from simulation.rundb.connect import column_names, table_names
from simulation.rundb.facts import facts, first_aware
from simulation.rundb.metrics import crowd, people

__all__ = ["Attendance", "Happening", "attendance", "happenings"]

_RANGE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


@dataclass(frozen=True)
class Happening:
    """Where and when a fact happens: ``starts`` and ``ends`` as run.db writes times
    (``YYYY-MM-DD HH:MM``, so they compare as text)."""

    fact_id: str
    place: str
    starts: str
    ends: str

    @property
    def day(self) -> str:
        return self.starts[:10]

    def hours(self) -> range:
        """The clock hours a plan item can start in and fall inside the window."""
        return range(int(self.starts[11:13]), int(self.ends[11:13]) + (self.ends[14:16] != "00"))


@dataclass(frozen=True)
class Attendance:
    """One happening's turnout, by person id (names from ``people``)."""

    happening: Happening
    attended: list[str]
    invited: list[str]
    aware: list[str]
    """Aware when the window began."""
    planners: list[str]
    """Aware by the time they planned the happening's day and had a plan for it."""
    planned: list[str]

    @property
    def invited_came(self) -> list[str]:
        return [p for p in self.invited if p in self.attended]

    @property
    def aware_came(self) -> list[str]:
        return [p for p in self.aware if p in self.attended]


def happenings(con: Any, run_id: str) -> dict[str, Happening]:
    """fact id -> its happening, for the facts whose details name a place, a day and a time range."""
    out: dict[str, Happening] = {}
    for fid, info in facts(con, run_id).items():
        kinds = {str(d.get("kind")): str(d.get("value", "")) for d in info.details if isinstance(d, dict)}
        times = _RANGE.match(kinds.get("time", ""))
        if not ("place" in kinds and re.fullmatch(r"\d{4}-\d{2}-\d{2}", kinds.get("date", "")) and times):
            continue
        h1, m1, h2, m2 = (int(g) for g in times.groups())
        day = kinds["date"]
        out[fid] = Happening(fid, kinds["place"], f"{day} {h1:02d}:{m1:02d}", f"{day} {h2:02d}:{m2:02d}")
    return out


def attendance(con: Any, run_id: str) -> dict[str, Attendance]:
    """fact id -> turnout, for each happening whose window ended within the run."""
    found = happenings(con, run_id)
    last = con.execute("select max(sim_time) from agent_states where run_id = ?", [run_id]).fetchone()[0]
    reached = {f: h for f, h in found.items() if last is not None and last >= h.ends}
    if not reached:
        return {}
    who = people(con, run_id)
    named = set(who) - crowd(con, run_id)
    learned = first_aware(con, run_id)
    out: dict[str, Attendance] = {}
    for fid, h in reached.items():
        attended = sorted({a for a, in con.execute(
            "select distinct agent_id from agent_states where run_id = ? and place = ? and sim_time >= ? "
            "and sim_time < ? and status != 'walking'", [run_id, h.place, h.starts, h.ends])} & named)
        invited: list[str] = []
        if "invitations" in table_names(con) and "fact_id" in column_names(con, "invitations"):
            invited = sorted({g for g, in con.execute(
                "select distinct guest_id from invitations where run_id = ? and fact_id = ?", [run_id, fid])} & named)
        since = {le.agent_id: le.sim_time for le in learned.get(fid, []) if le.agent_id in named}
        aware = sorted(a for a, t in since.items() if t <= h.starts)
        planners, planned = _planned(con, run_id, h, since)
        out[fid] = Attendance(h, attended, invited, aware, planners, planned)
    return out


def _planned(con: Any, run_id: str, h: Happening, since: dict[str, str]) -> tuple[list[str], list[str]]:
    """(people aware when they planned the happening's day, those of them whose plan put an hour
    inside the window at its place): the last plan each made for that day counts."""
    if "plans" not in table_names(con):
        return [], []
    last: dict[str, tuple[str, str]] = {}
    for agent_id, sim_time, items in con.execute(
            "select agent_id, sim_time, items from plans where run_id = ? and day = ? order by tick, id",
            [run_id, h.day]):
        if agent_id in since and since[agent_id] <= sim_time:
            last[agent_id] = (sim_time, items)
    hours = h.hours()
    planned = []
    for agent_id, (_, items) in last.items():
        entries = json.loads(items, strict=False) if items else []
        if any(isinstance(e, dict) and e.get("place") == h.place and _hour(e.get("hour")) in hours for e in entries):
            planned.append(agent_id)
    return sorted(last), sorted(planned)


def _hour(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
