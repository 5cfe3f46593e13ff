"""Opening one run.db for reading: read-only, safe while the run is writing, checked first.

Every reader opens run.db through a ``file:...?mode=ro`` URI, so nothing that only reads a run
(the summary, the viewer, an evaluation, a rewards pass collecting its turns) can change it by
mistake: a stray write fails instead. The model commits a whole tick per transaction in WAL
mode, so every read sees whole ticks and never blocks the writer.

``RunDB`` adds the checks a reader wants before its first query: anything that is not a
readable run of a layout the reader knows becomes a ``RunUnreadable`` with a sentence a person
can act on, never a traceback.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

CORE_TABLES = ("runs", "agents", "places", "ticks", "agent_states", "events", "memories", "conversations",
               "utterances", "llm_calls")
"""Tables every run.db layout has had since the first; later tables are optional to readers."""


class RunUnreadable(Exception):
    """run.db is missing, empty, corrupt, of an older layout, or not an Agora run."""


def db_path(run: Path | str) -> Path:
    """A run directory's run.db (a path to a ``.db`` file itself is taken as is)."""
    run = Path(run)
    return run if run.suffix == ".db" else run / "run.db"


def connect_ro(path: Path | str, timeout: float = 5.0) -> sqlite3.Connection:
    """A read-only connection whose rows are ``sqlite3.Row`` (by name or position).

    ``mode=ro`` refuses writes even by mistake and never creates a missing file. The
    connection may be used from another thread than the one that opened it (Streamlit reruns
    pages on worker threads); it is never shared between threads at once.
    """
    uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
    con = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
    con.row_factory = sqlite3.Row
    return con


def table_names(con: Any) -> set[str]:
    """The tables of a connection (``sqlite3.Connection`` or ``sqlite_utils.Database``)."""
    return {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}


def column_names(con: Any, table: str) -> set[str]:
    """The columns of ``table`` (empty when there is no such table)."""
    return {r[1] for r in con.execute(f"pragma table_info([{table}])")}


class RunDB:
    """One run.db, opened read-only and checked; queries always filter on its ``run_id``.

    Subclasses tighten what they accept through the class attributes: the oldest
    ``runs.schema_version`` they read and the tables they need.
    """

    MIN_SCHEMA = 1
    """Oldest ``runs.schema_version`` read (a run recorded before the column existed counts as 1)."""
    REQUIRED: tuple[str, ...] = CORE_TABLES
    READER = "this version of Agora"
    """Who refuses an older layout, in the message that says so."""

    def __init__(self, path: Path | str):
        self.path = db_path(path)
        if not self.path.exists():
            where = self.path.parent
            raise RunUnreadable(f"No run.db in {where}: the run has not started, or this is not a run directory."
                                if where.exists() else f"{where} does not exist.")
        if self.path.stat().st_size == 0:
            raise RunUnreadable(f"{self.path} is empty: the run has not written anything yet.")
        try:
            self.con = connect_ro(self.path)
        except sqlite3.Error as exc:
            raise RunUnreadable(f"Cannot open {self.path}: {exc}.") from None
        try:
            self._check()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise RunUnreadable(f"{self.path} is not a readable SQLite database (corrupt or another kind of "
                                f"file): {exc}.") from None
        except RunUnreadable:
            self.close()
            raise
        self._columns: dict[str, set[str]] = {}

    def _check(self) -> None:
        self.tables = table_names(self.con)
        if not self.tables:
            raise RunUnreadable(f"{self.path} is empty (no tables yet): the run has not written anything.")
        if "runs" not in self.tables:
            raise RunUnreadable(f"{self.path} is not an Agora run.db (it has no runs table).")
        row = self.con.execute("select * from runs order by started_at, rowid limit 1").fetchone()
        if row is None:
            raise RunUnreadable(f"{self.path} has no run recorded yet.")
        self.run: dict[str, Any] = dict(row)
        version = self.run.get("schema_version") or 1
        if version < self.MIN_SCHEMA:
            raise RunUnreadable(
                f"This run was recorded with run.db schema version {version}, an older layout; {self.READER} reads "
                f"version {self.MIN_SCHEMA} and later. Run the scenario again with this version of Agora."
            )
        missing = [t for t in self.REQUIRED if t not in self.tables]
        if missing:
            raise RunUnreadable(f"{self.path} lacks the table(s) {', '.join(missing)}: it is damaged or unfinished.")
        self.run_id: str = self.run["run_id"]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> RunDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def has(self, table: str, column: str | None = None) -> bool:
        """Whether the run has ``table`` (and ``column``): newer tables are optional."""
        if table not in self.tables:
            return False
        return column is None or column in self.columns(table)

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = column_names(self.con, table)
        return self._columns[table]

    def rows(self, sql: str, params: tuple | list = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.con.execute(sql, params)]

    def one(self, sql: str, params: tuple | list = ()) -> Any:
        """The first column of the first row (None when there is no row)."""
        row = self.con.execute(sql, params).fetchone()
        return None if row is None else row[0]
