"""What a run.db recorded that re-making the run needs: its runs row and scenario as run, and
the whispers typed into it with the ticks they were delivered at (``agora verify`` re-makes a
run from these; ``agora fork`` re-makes its prefix)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from simulation.errors import InputError, Problem
from simulation.rundb.connect import table_names

__all__ = ["deliver_whispers", "recorded_run", "recorded_whispers"]


def recorded_run(con: sqlite3.Connection, run_dir: Path) -> tuple[dict[str, Any], str]:
    """A run.db's runs row and the scenario as it was run (``resume_state``: people resolved, LLM settings
    applied), or InputError naming the folder."""
    if "runs" not in table_names(con) or "resume_state" not in table_names(con):
        raise InputError(Problem(str(run_dir), "not a run that can be re-made: its run.db has no recorded "
                                 "scenario (made by an older Agora?)"))
    run = con.execute("select * from runs").fetchone()
    saved = con.execute("select scenario from resume_state").fetchone()
    if run is None or saved is None:
        raise InputError(Problem(str(run_dir), "run.db records no run"))
    return dict(run), saved[0]


def recorded_whispers(con: sqlite3.Connection) -> list[dict[str, Any]]:
    """The whispers typed into a run (its ``inbox``), with the tick each was delivered at."""
    if "inbox" not in table_names(con):
        return []
    return [dict(r) for r in con.execute("select id, agent_id, text, created_at, sender, delivered_tick "
                                         "from inbox order by id")]


def deliver_whispers(sim: Any, whispers: list[dict[str, Any]], tick: int | None) -> None:
    """Put the original's whispers delivered at ``tick`` in the re-run's inbox, with their ids."""
    rows = [{**w, "run_id": sim.run_id, "delivered_tick": None, "delivered_at": None}
            for w in whispers if w["delivered_tick"] == tick]
    if rows:
        sim.db["inbox"].insert_all(rows)
