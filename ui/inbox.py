"""The viewer's one write: a whisper into run.db's ``inbox`` table.

The running model reads undelivered inbox rows at the start of its next tick, turns each
into a ``thought`` memory plus a ``whisper`` event (``data.inbox_id``) and sets
``delivered_tick``. Ids are assigned here as max(id) + 1 inside one ``BEGIN IMMEDIATE``
transaction, so two viewers sending at once cannot take the same id, and the row appears
whole or not at all while the model writes its ticks (WAL).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from ui.db import db_path

MAX_CHARS = 1000


class WhisperRefused(ValueError):
    """A whisper that cannot be sent (empty, too long, unknown person, no inbox)."""


def send_whisper(run: Path, agent_id: str, text: str, sender: str = "viewer") -> int:
    """Queue ``text`` for ``agent_id``; returns the inbox id."""
    text = text.strip()
    if not text:
        raise WhisperRefused("Write something to whisper.")
    if len(text) > MAX_CHARS:
        raise WhisperRefused(f"A whisper is at most {MAX_CHARS} characters (this one has {len(text)}).")
    uri = f"file:{quote(str(db_path(run).resolve()))}?mode=rw"  # rw: never creates a missing file
    try:
        con = sqlite3.connect(uri, uri=True, timeout=10.0, isolation_level=None)
    except sqlite3.Error as exc:
        raise WhisperRefused(f"Cannot open {db_path(run)} for writing: {exc}.") from None
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
            if "inbox" not in tables:
                raise WhisperRefused("This run.db has no inbox table (recorded before whispers existed).")
            run_id = con.execute("select run_id from runs limit 1").fetchone()[0]
            known = con.execute("select 1 from agents where run_id = ? and agent_id = ?", (run_id, agent_id)).fetchone()
            if known is None:
                raise WhisperRefused(f"No person {agent_id!r} in this run.")
            new_id = (con.execute("select max(id) from inbox").fetchone()[0] or 0) + 1
            con.execute(
                "insert into inbox (id, run_id, agent_id, text, created_at, sender, delivered_tick, delivered_at) "
                "values (?, ?, ?, ?, ?, ?, null, null)",
                (new_id, run_id, agent_id, text, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 sender.strip() or "viewer"),
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return new_id
    finally:
        con.close()
