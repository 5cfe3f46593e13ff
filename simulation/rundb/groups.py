"""Which model answered whom in a run: its model groups as run.db recorded them.

A run whose scenario has ``llm.groups`` records each group some person named in ``llm_groups``
(the backend and model id that answered it, and the group's settings) and each person's group
in ``agents.llm_group`` (run.db schema 12). Resume and ``agora verify`` read the model ids back
(a replay needs them before any backend starts), the behaviour report splits its LLM numbers
by group. A run.db older than schema 12 has neither: every person asked the ``runs`` row's model,
which its layout says (checked, never caught as an error). Standard library only.
"""

from __future__ import annotations

from typing import Any

from simulation.rundb.connect import column_names, table_names

__all__ = ["UNGROUPED", "group_of", "recorded_models"]

UNGROUPED = "default"
"""The group the behaviour report puts the people who name none in (``llm.settings.DEFAULT_GROUP``,
which no model group may be called; a test keeps the two equal)."""


def recorded_models(con: Any, run_id: str | None = None) -> dict[str | None, tuple[str, str]]:
    """(backend, model id) per model group the run recorded, and under None the ``llm:`` block's own
    (the ``runs`` row's). ``con``: a ``sqlite3.Connection`` or ``sqlite_utils.Database``; ``run_id``:
    which run (default: the file's one run)."""
    where, args = ("where run_id = ?", [run_id]) if run_id is not None else ("", [])
    out: dict[str | None, tuple[str, str]] = {}
    row = con.execute(f"select backend, model from runs {where} limit 1", args).fetchone()
    if row is not None and row[0] is not None:
        out[None] = (row[0], row[1])
    if "llm_groups" in table_names(con):
        for group, backend, model in con.execute(f"select llm_group, backend, model from llm_groups {where} "
                                                 "order by llm_group", args):
            out[group] = (backend, model)
    return out


def group_of(con: Any, run_id: str) -> dict[str, str]:
    """Person -> model group, for the people of the run who named one (none in a run.db before schema 12)."""
    if "llm_group" not in column_names(con, "agents"):
        return {}
    return dict(con.execute("select agent_id, llm_group from agents where run_id = ? and llm_group is not null",
                            [run_id]).fetchall())
