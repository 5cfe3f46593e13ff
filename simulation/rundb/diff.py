"""Are two run.db files the same run? Every row of every table, compared without what measures the machine.

A run is deterministic (same scenario, seed, model and replay cache give the same rows), so two
run.db files of the same run differ only in what cannot be the same: their run ids, wall-clock
times and latencies, whether an answer came from the backend or the cache, and when things were
written. Everything else must match, table by table; ``first_difference`` says where it does not.
Used by ``agora verify`` and by the tests of determinism and resume.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SKIPPED_TABLES", "VOLATILE", "Difference", "comparable_columns", "first_difference", "table_rows"]

VOLATILE: dict[str, frozenset[str]] = {
    "*": frozenset({"run_id"}),
    "runs": frozenset({"scenario_path", "ticks_planned", "status", "message", "started_at", "finished_at",
                       "agora_version", "engine", "parent_run_id", "parent_dir", "fork_tick", "interventions"}),
    "ticks": frozenset({"wall_s", "llm_s", "cache_hits"}),
    "llm_calls": frozenset({"cache_hit", "latency_s"}),
    "inbox": frozenset({"created_at", "delivered_at"}),
    "behaviour": frozenset({"computed_at"}),
}
"""Columns that measure the machine or the moment, not the run (``*``: every table)."""

SKIPPED_TABLES = frozenset({"resume_state"})
"""Bookkeeping of how a run was stepped (its checkpoint, how often it was resumed), not what happened."""

PREFIX_TICK = {"conversations": "ended_tick", "inbox": "delivered_tick", "agents": "arrived_tick"}
"""How a table's rows are dated when only the ticks before a fork are compared (default ``tick``):
a conversation belongs to the prefix once it has ended, a whisper once it was delivered, a
person once they arrived (0 for the people a run starts with)."""
LATER = {"runs": frozenset({"ticks_done"}), "memories": frozenset({"last_accessed"}),
         "agents": frozenset({"left_tick"})}
"""Columns of a prefix's rows that later ticks update in place (how many ticks a run did, when a
memory was last retrieved, when someone left): left out when only the ticks before a fork are
compared. See also ``RATED_LATER``."""
RATED_LATER = ("memories", "importance")
"""Two kinds of memory made before a fork can be rated after it, so in a prefix comparison their
importance is not compared (every other memory's is):
- a line's memory is rated at its conversation's recap, the tick the conversation ends: for a
  conversation still open at the fork, after it (``ended_tick`` at or after the fork tick, or none);
- a memory waiting to be rated (``cognition.importance``: until its owner next thinks) when its
  owner left the town at or after the fork tick: in the run they left, it stays unrated (null)."""
AFTER_THE_END = frozenset({"probes", "behaviour", "embeddings"})
"""Left out of a prefix comparison: what a run writes at its end (probe answers, its metrics),
and the vectors of its texts (each memory's text is compared; its vector follows from it)."""


@dataclass(frozen=True)
class Difference:
    """Where two runs first part: a table, which row, which column, and both values."""

    table: str
    row: int
    """Index of the row in the table's order (by its compared columns)."""
    column: str | None
    """None when the tables differ in their number of rows or one lacks the table."""
    ours: Any
    theirs: Any

    def __str__(self) -> str:
        if self.column is None:
            return f"table {self.table}: {_shown(self.ours)} vs {_shown(self.theirs)}"
        return (f"table {self.table}, row {self.row + 1}, column {self.column}: "
                f"{_shown(self.ours)} vs {_shown(self.theirs)}")


def _shown(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tables(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("select name from sqlite_master where type = 'table' "
                                      "and name not like 'sqlite_%' order by name")]


def comparable_columns(con: sqlite3.Connection, table: str) -> list[str]:
    """The columns of ``table`` that must match between two runs of the same run."""
    volatile = VOLATILE["*"] | VOLATILE.get(table, frozenset())
    return [r[1] for r in con.execute(f"pragma table_info([{table}])") if r[1] not in volatile]


def table_rows(con: sqlite3.Connection, table: str, columns: list[str],
               before_tick: int | None = None) -> list[tuple[Any, ...]]:
    """The rows of ``table`` as tuples of ``columns``, in a stable order: by ``id`` where the table
    has one (ids are deterministic), else by all the columns; with ``before_tick``, only the rows
    dated before it (``PREFIX_TICK``; a table with no date is read whole)."""
    cols = ", ".join(f"[{c}]" for c in columns)
    order = "[id]" if "id" in columns else ", ".join(str(i + 1) for i in range(len(columns)))
    where, args = "", []
    if before_tick is not None:
        dated = PREFIX_TICK.get(table, "tick")
        if dated in {r[1] for r in con.execute(f"pragma table_info([{table}])")}:
            where, args = f" where [{dated}] < ?", [before_tick]
    return con.execute(f"select {cols} from [{table}]{where} order by {order}", args).fetchall()


def _rated_later(con: sqlite3.Connection, before_tick: int) -> set[Any]:
    """Ids of the memories that may be rated at or after ``before_tick`` (``RATED_LATER``)."""
    late: set[Any] = set()
    if "conversation_id" in {r[1] for r in con.execute("pragma table_info([memories])")}:
        late |= {r[0] for r in con.execute(
            "select m.id from memories m join conversations c on c.id = m.conversation_id "
            "where c.ended_tick is null or c.ended_tick >= ?", [before_tick])}
    if "left_tick" in {r[1] for r in con.execute("pragma table_info([agents])")}:
        late |= {r[0] for r in con.execute(
            "select m.id from memories m join agents g on g.agent_id = m.agent_id "
            "where g.left_tick >= ? and m.importance is null", [before_tick])}
    return late


def _unrated(rows: list[tuple[Any, ...]], columns: list[str], late: set[Any]) -> list[tuple[Any, ...]]:
    """``rows`` with the importance of the memories in ``late`` blanked (``RATED_LATER``)."""
    i, j = columns.index("id"), columns.index(RATED_LATER[1])
    return [row[:j] + (None,) + row[j + 1:] if row[i] in late else row for row in rows]


def first_difference(ours: Path, theirs: Path, tables: list[str] | None = None, *,
                     before_tick: int | None = None) -> Difference | None:
    """The first place where run.db ``ours`` and ``theirs`` differ, or None when they are the same run.

    ``tables``: only these (default: every table either file has, less ``SKIPPED_TABLES``).
    ``before_tick``: compare only what happened before that tick (a fork and its parent:
    ``table_rows``; ``AFTER_THE_END`` left out, and how many ticks each ran)."""
    a, b = sqlite3.connect(f"file:{ours}?mode=ro", uri=True), sqlite3.connect(f"file:{theirs}?mode=ro", uri=True)
    try:
        skipped = SKIPPED_TABLES | (AFTER_THE_END if before_tick is not None else frozenset())
        names = tables or sorted((set(_tables(a)) | set(_tables(b))) - skipped)
        for table in names:
            have_a, have_b = table in _tables(a), table in _tables(b)
            if not (have_a and have_b):
                return Difference(table, 0, None, "present" if have_a else "missing",
                                  "present" if have_b else "missing")
            columns = comparable_columns(a, table)
            other = comparable_columns(b, table)
            if before_tick is not None and table in LATER:
                columns, other = ([c for c in cols if c not in LATER[table]] for cols in (columns, other))
            if columns != other:
                return Difference(table, 0, None, f"columns {columns}", f"columns {other}")
            rows_a, rows_b = table_rows(a, table, columns, before_tick), table_rows(b, table, columns, before_tick)
            if before_tick is not None and table == RATED_LATER[0] and {"id", RATED_LATER[1]} <= set(columns):
                late = _rated_later(a, before_tick) | _rated_later(b, before_tick)
                rows_a, rows_b = (_unrated(rows, columns, late) for rows in (rows_a, rows_b))
            for i, (ra, rb) in enumerate(zip(rows_a, rows_b)):
                if ra != rb:
                    j = next(k for k in range(len(columns)) if ra[k] != rb[k])
                    return Difference(table, i, columns[j], ra[j], rb[j])
            if len(rows_a) != len(rows_b):
                return Difference(table, min(len(rows_a), len(rows_b)), None, f"{len(rows_a)} rows",
                                  f"{len(rows_b)} rows")
        return None
    finally:
        a.close()
        b.close()
