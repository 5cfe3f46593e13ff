"""The viewer's handle on one run.db: ``simulation.rundb``'s read-only, checked ``RunDB``, plus
query results as pandas frames for the pages.

Opening and checking run.db is written once, in ``simulation.rundb.connect`` (the CLI summary,
`agora eval` and `agora rewards` read through it too); the viewer only adds what it needs on
top: the oldest layout it can show and frames for its tables and charts. Nothing it does can
change a run (``mode=ro``); whispers, its one write, go through ``ui.inbox``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from simulation.rundb.connect import CORE_TABLES, RunUnreadable, connect_ro, db_path
from simulation.rundb.connect import RunDB as _RunReader

__all__ = ["MIN_SCHEMA", "REQUIRED", "RunDB", "RunUnreadable", "connect_ro", "db_path"]

MIN_SCHEMA = 2
"""Oldest ``runs.schema_version`` the viewer reads (2 added the inbox and cache hits)."""

REQUIRED = CORE_TABLES


class RunDB(_RunReader):
    """One run.db, opened read-only and checked; queries always filter on its ``run_id``."""

    MIN_SCHEMA = MIN_SCHEMA
    REQUIRED = REQUIRED
    READER = "the viewer"

    def __enter__(self) -> RunDB:
        return self

    def frame(self, sql: str, params: tuple | list = ()) -> pd.DataFrame:
        cur = self.con.execute(sql, params)
        rows: list[Any] = [tuple(r) for r in cur.fetchall()]
        return pd.DataFrame.from_records(rows, columns=[c[0] for c in cur.description])
