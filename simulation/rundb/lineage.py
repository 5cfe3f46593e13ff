"""evolve.db: the lineage and the numbers of a co-evolution loop (``agora evolve``), and its table.

``simulation.training.evolve`` writes it; its report and the viewer's Runs page read it back
through here, so both print the same per-round table. Three tables:

- ``rounds``: round, the model its held-out runs used, the parent model it was trained from,
  and the training runs (a JSON list) that trained it;
- ``runs``: round, role (``train`` or ``held-out``) and run directory;
- ``metrics``: round, held-out seed index, metric name and value (behaviour metrics and
  ``reward.<dimension>``).

Standard library only (the viewer imports it).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulation.rundb.connect import connect_ro, table_names
from simulation.rundb.intervals import estimate

__all__ = ["DB_NAME", "PROSOCIAL", "LineageUnreadable", "prosocial", "RoundResult", "create", "read", "record", "round_table"]

DB_NAME = "evolve.db"

PROSOCIAL = ("talk.invitations", "talk.aim.share", "relationships.density_end", "talk.conversations",
             "reward.informed", "reward.tie")
"""Measures read as prosocial: inviting, passing news on, ties, talking at all; and every
scenario fact's ``facts.<id>.told`` (``prosocial``), whatever the scenario calls its news."""


def prosocial(metric: str) -> bool:
    return metric in PROSOCIAL or (metric.startswith("facts.") and metric.endswith(".told"))

_SCHEMA = (
    "create table if not exists rounds (round integer primary key, model text not null, parent text, "
    "trained_on text)",
    "create table if not exists runs (round integer, role text, run_dir text, primary key (round, run_dir))",
    "create table if not exists metrics (round integer, seed_index integer, metric text, value float, "
    "primary key (round, seed_index, metric))",
)


class LineageUnreadable(Exception):
    """evolve.db is missing, damaged or not an evolve database."""


@dataclass
class RoundResult:
    round: int
    model: str
    """The GGUF (or model id) the round's held-out runs used."""
    parent: str | None
    trained_on: list[str] = field(default_factory=list)
    held_out_runs: list[str] = field(default_factory=list)
    metrics: dict[str, list[float | None]] = field(default_factory=dict)
    """Metric -> one value per held-out seed (behaviour metrics and ``reward.<dimension>``)."""


def create(con: sqlite3.Connection) -> None:
    """The three tables, if they do not exist yet."""
    with con:
        for statement in _SCHEMA:
            con.execute(statement)


def record(con: sqlite3.Connection, result: RoundResult) -> None:
    """One finished round, in one transaction (a round is recorded whole or not at all)."""
    with con:
        con.execute("insert or replace into rounds values (?, ?, ?, ?)",
                    (result.round, result.model, result.parent, json.dumps(result.trained_on)))
        con.executemany("insert or replace into runs values (?, ?, ?)",
                        [(result.round, "train", d) for d in result.trained_on]
                        + [(result.round, "held-out", d) for d in result.held_out_runs])
        con.executemany("insert or replace into metrics values (?, ?, ?, ?)",
                        [(result.round, i, name, v) for name, values in result.metrics.items()
                         for i, v in enumerate(values)])


def read(path: Path | str) -> list[RoundResult]:
    """Every recorded round of an evolve.db (or of the folder holding one), in order."""
    path = Path(path)
    path = path / DB_NAME if path.is_dir() else path
    if not path.is_file():
        raise LineageUnreadable(f"No {DB_NAME} in {path.parent}.")
    try:
        con = connect_ro(path)
        try:
            if not {"rounds", "runs", "metrics"} <= table_names(con):
                raise LineageUnreadable(f"{path} is not an evolve database (it has no rounds, runs and metrics).")
            results = {r["round"]: RoundResult(r["round"], r["model"], r["parent"], json.loads(r["trained_on"] or "[]"))
                       for r in con.execute("select * from rounds order by round")}
            for r in con.execute("select round, run_dir from runs where role = 'held-out' order by run_dir"):
                if r["round"] in results:
                    results[r["round"]].held_out_runs.append(r["run_dir"])
            for r in con.execute("select round, seed_index, metric, value from metrics order by round, seed_index"):
                if r["round"] not in results:
                    continue
                values = results[r["round"]].metrics.setdefault(r["metric"], [])
                values.extend([None] * (r["seed_index"] + 1 - len(values)))
                values[r["seed_index"]] = r["value"]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise LineageUnreadable(f"{path} cannot be read: {exc}") from exc
    return [results[k] for k in sorted(results)]


def round_table(results: list[RoundResult]) -> list[dict[str, Any]]:
    """Per metric: each round's mean and 95 % interval over the held-out seeds, the change from
    round 0, whether it moved (intervals apart), and for the last round whether a prosocial
    measure fell while the mean reward rose (``traded``)."""
    names = sorted({n for r in results for n in r.metrics})
    rows = []
    for name in names:
        ests = [estimate(r.metrics.get(name, []), name) for r in results]
        first, last = ests[0], ests[-1]
        moved = "overlap"
        if None not in (first.low, first.high, last.low, last.high):
            moved = "higher" if last.low > first.high else "lower" if last.high < first.low else "overlap"
        change = None if first.mean is None or last.mean is None else last.mean - first.mean
        rows.append({"metric": name, "rounds": ests, "change": change, "moved": moved,
                     "prosocial": prosocial(name)})
    reward = next((r for r in rows if r["metric"] == "reward.mean"), None)
    rose = reward is not None and (reward["change"] or 0) > 0
    for row in rows:
        row["traded"] = bool(row["prosocial"] and rose and (row["change"] or 0) < 0)
    return rows
