"""run.db: the one record of a run (SQLite in WAL mode, written through sqlite-utils).

The model buffers everything a tick produces in a ``TickBuffer`` and commits it in one
transaction, so readers (the viewer, pandas, Datasette) only ever see whole ticks, and a
crash loses at most the tick in flight. Row ids are assigned here, deterministically, so
rows can cite each other (a memory's evidence, an utterance's LLM call) before commit.
The table layout is documented in docs/run-db.md.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlite_utils

from simulation.errors import InputError, Problem, RunError

SCHEMA_VERSION = 14

# table -> (columns, primary key). Every table carries run_id.
TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "runs": (
        {"run_id": str, "scenario": str, "scenario_path": str, "scenario_yaml": str, "description": str,
         "seed": int, "backend": str, "model": str, "tick_minutes": int, "start_time": str,
         "ticks_planned": int, "ticks_done": int, "status": str, "message": str,
         "started_at": str, "finished_at": str, "agora_version": str, "schema_version": int,
         # which engine code made it (``version.engine_fingerprint``) and the scenario text's sha256
         # (schema 9): what the behaviour benchmark checks before it reuses a run
         "engine": str, "scenario_sha256": str,
         # a fork (schema 11): the run it branched from, its folder, the first tick it made itself,
         # and the interventions applied there (JSON list; ``simulation.run.fork``)
         "parent_run_id": str, "parent_dir": str, "fork_tick": int, "interventions": str},
        "run_id",
    ),
    "agents": (
        {"run_id": str, "agent_id": str, "name": str, "age": int, "occupation": str, "home": str,
         "start_place": str, "source": str, "persona": str, "crowd": int,
         # the model group whose backend answered the person (schema 12; null: the llm block's own)
         "llm_group": str,
         # when they were in the town (schema 13): the tick they arrived at (0: the run starts with
         # them) and the tick they left at (null: they never left); an arrival's row is written then
         "arrived_tick": int, "left_tick": int},
        ("run_id", "agent_id"),
    ),
    "llm_groups": (
        # each model group someone named (schema 12): the backend and model id that answered it, and
        # the group's settings (JSON); the llm block's own are the runs row's backend and model
        {"run_id": str, "llm_group": str, "backend": str, "model": str, "settings": str},
        ("run_id", "llm_group"),
    ),
    "places": (
        {"run_id": str, "place_id": str, "name": str, "kind": str, "description": str,
         "objects": str, "x": float, "y": float},
        ("run_id", "place_id"),
    ),
    "paths": ({"run_id": str, "a": str, "b": str, "minutes": int}, ("run_id", "a", "b")),
    "ticks": (
        {"run_id": str, "tick": int, "sim_time": str, "wall_s": float, "llm_calls": int, "llm_s": float,
         "prompt_tokens": int, "completion_tokens": int, "parse_failures": int, "fallbacks": int,
         "cache_hits": int, "batches": int, "deciding_agents": int},
        ("run_id", "tick"),
    ),
    "agent_states": (
        {"run_id": str, "tick": int, "sim_time": str, "agent_id": str, "place": str, "status": str,
         "action": str, "destination": str, "conversation_id": int, "mood": str, "valence": float,
         "arousal": float},
        ("run_id", "tick", "agent_id"),
    ),
    "events": (
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "agent_id": str, "place": str,
         "kind": str, "text": str, "data": str},
        "id",
    ),
    "memories": (
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "agent_id": str, "kind": str,
         "text": str, "importance": float, "evidence": str, "last_accessed": str, "depth": int,
         # provenance (docs/provenance.md): how it came to its owner, and who and what was behind it
         "source": str, "from_agent": str, "utterance_id": int, "event_id": int, "conversation_id": int},
        "id",
    ),
    "fact_memories": (
        # one row per memory that carries one of the scenario's facts: declared (a whisper, place
        # event or seed that names the fact) or detected in what was said, seen or written down
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "memory_id": int, "agent_id": str,
         "fact_id": str, "source": str, "from_agent": str, "utterance_id": int, "conversation_id": int,
         "declared": int, "similarity": float, "details": str, "kept": int, "lost": int, "changed": int},
        "id",
    ),
    "embeddings": (
        # the float16 vector of each distinct text, under the first memory that had it (schema 8;
        # float32 of every memory before): what the FAISS index holds, so resume rebuilds it exactly
        {"run_id": str, "memory_id": int, "vector": bytes},
        ("run_id", "memory_id"),
    ),
    "retrievals": (
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "agent_id": str, "purpose": str, "query": str,
         "results": str},
        "id",
    ),
    "plans": (
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "agent_id": str, "day": str,
         "items": str, "ok": int},
        "id",
    ),
    "schedules": (
        # a plan step decomposed: into hour blocks (level "hours") or 5-30 minute actions ("steps")
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "agent_id": str, "level": str, "parent": str,
         "items": str, "ok": int},
        "id",
    ),
    "relationships": (
        # one row per (agent, other) whose relationship changed at a tick: the state after the change
        {"run_id": str, "tick": int, "sim_time": str, "agent_id": str, "other_id": str, "conversations": int,
         "sentiment": float, "view": str},
        ("run_id", "tick", "agent_id", "other_id"),
    ),
    "conversations": (
        {"id": int, "run_id": str, "place": str, "participants": str, "started_tick": int,
         "started_at": str, "ended_tick": int, "ended_at": str, "turns": int, "end_reason": str},
        "id",
    ),
    "utterances": (
        # aim: what the line was for (greet, share, invite, ask, answer, reply, accept, decline, end)
        # and topic: what about, as the prompt showed it (core.move)
        {"id": int, "run_id": str, "conversation_id": int, "tick": int, "sim_time": str, "turn": int,
         "speaker_id": str, "listener_id": str, "text": str, "llm_call_id": int, "aim": str, "topic": str},
        "id",
    ),
    "invitations": (
        # one row per invitation made in a conversation; answer: accepted, declined or null (none given)
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "conversation_id": int, "utterance_id": int,
         "inviter_id": str, "guest_id": str, "fact_id": str, "place": str, "starts_at": str, "ends_at": str,
         "answer": str, "answer_utterance_id": int},
        "id",
    ),
    "llm_calls": (
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "agent_id": str, "purpose": str,
         "backend": str, "model": str, "attempt": int, "seed": int, "temperature": float,
         "max_tokens": int, "messages": str, "json_schema": str, "options": str, "script": str,
         "completion": str, "finish_reason": str, "parse_ok": int, "parse_error": str, "fallback": int, "cache_hit": int,
         "prompt_tokens": int, "completion_tokens": int, "latency_s": float},
        "id",
    ),
    "inbox": (
        # Written by the viewer (the only table it writes), read by the model at the next tick.
        {"id": int, "run_id": str, "agent_id": str, "text": str, "created_at": str, "sender": str,
         "delivered_tick": int, "delivered_at": str},
        "id",
    ),
    "resume_state": (
        # What ``agora resume`` needs beyond the rows above, rewritten with every tick's commit:
        # the scenario as run (settings included) and the engine's state after the last committed tick.
        {"run_id": str, "tick": int, "scenario": str, "state": str, "resumes": int, "updated_at": str},
        "run_id",
    ),
    "probes": (
        {"id": int, "run_id": str, "tick": int, "sim_time": str, "agent_id": str, "question": str,
         "answer": str, "ok": int, "llm_call_id": int,
         # for a probe about a fact: the answer scored against the fact's details (docs/provenance.md)
         "fact_id": str, "aware": int, "verdict": str, "details": str},
        "id",
    ),
    "behaviour": (
        # the run's behaviour metrics (docs/behaviour.md), written when it ends or by `agora behaviour`
        {"run_id": str, "metric": str, "value": float, "computed_at": str},
        ("run_id", "metric"),
    ),
}

INDEXES = [
    ("events", ["tick"]), ("events", ["agent_id"]), ("memories", ["agent_id"]),
    ("utterances", ["conversation_id"]), ("llm_calls", ["tick"]), ("agent_states", ["agent_id"]),
    ("retrievals", ["agent_id"]), ("retrievals", ["tick"]), ("relationships", ["agent_id"]),
    ("schedules", ["agent_id"]), ("fact_memories", ["fact_id"]), ("memories", ["source"]),
]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sim_iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class TickBuffer:
    """Rows produced during one tick, waiting for the tick's single commit."""

    def __init__(self, store: RunStore):
        self._store = store
        self.rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.upserts: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)
        self.updates: list[tuple[str, Any, dict[str, Any]]] = []

    def add(self, table: str, row: dict[str, Any]) -> int | None:
        """Queue a row; tables with an integer ``id`` get the next id, which is returned."""
        row = {"run_id": self._store.run_id, **_checked(table, row)}
        new_id = None
        if TABLES[table][1] == "id":
            new_id = self._store.next_id(table)
            row["id"] = new_id
        self.rows[table].append(row)
        return new_id

    def upsert(self, table: str, row: dict[str, Any]) -> None:
        """Queue an insert-or-update keyed by ``id``; updates of one row within a tick merge (later values win)."""
        row = {"run_id": self._store.run_id, **_checked(table, row)}
        self.upserts[table].setdefault(row["id"], {}).update(row)

    def update(self, table: str, row_id: Any, values: dict[str, Any]) -> None:
        """Queue new values for some columns of a row already written or queued (applied after the
        tick's inserts, in order; the row's other columns are kept, unlike an upsert's)."""
        self.updates.append((table, row_id, _checked(table, values)))


def _checked(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` if every column is one of ``table``'s (``TABLES``, the one layout); a column the layout
    lacks is a bug in the part that made the row, found at once rather than as a failed commit."""
    columns = TABLES[table][0]
    unknown = [c for c in row if c not in columns]
    if unknown:
        raise RunError(f"run.db table {table!r} has no column {', '.join(map(repr, unknown))}")
    return row


class RunStore:
    """Owns run.db for one run directory."""

    def __init__(self, path: Path, run_id: str):
        self.path = Path(path)
        self.run_id = run_id
        try:
            self.db = sqlite_utils.Database(self.path)
            self.db.enable_wal()
        except Exception as exc:  # sqlite3.DatabaseError, OSError
            raise RunError(f"cannot open {self.path}: {exc}") from None
        self._next: dict[str, int] = {}

    # ----------------------------------------------------------------- creation

    def start(self, run: dict[str, Any], scenario: str) -> None:
        """A new run's ``runs`` row and its resume state (the scenario as run, no tick yet), together."""
        with self.db.atomic():
            self.db["runs"].insert({"run_id": self.run_id, **_checked("runs", run)})
            self.db["resume_state"].insert({"run_id": self.run_id, "tick": -1, "scenario": scenario, "state": None,
                                            "resumes": 0, "updated_at": now_iso()})

    def resumed(self, **run: Any) -> None:
        """A resumed run: its ``runs`` row updated (``run``) and its resume count raised, together."""
        with self.db.atomic():
            self.db["runs"].update(self.run_id, _checked("runs", run))
            self.db.execute("update resume_state set resumes = coalesce(resumes, 0) + 1 where run_id = ?",
                            [self.run_id])

    def whispers_waiting(self) -> list[tuple[int, str, str]]:
        """(inbox id, person, text) of the whispers the viewer wrote that no tick has delivered yet
        (the viewer's one table: it inserts, the run marks them delivered through a tick's buffer)."""
        return [(int(r[0]), r[1], r[2]) for r in self.db.execute(
            "select id, agent_id, text from inbox where delivered_tick is null order by id").fetchall()]

    @classmethod
    def create(cls, run_dir: Path, run_id: str) -> RunStore:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"cannot create run directory {run_dir}: {exc.strerror or exc}") from None
        path = run_dir / "run.db"
        if path.exists():
            raise RunError(f"{path} already exists; choose another --out")
        store = cls(path, run_id)
        with store.db.atomic():
            for name, (columns, pk) in TABLES.items():
                store.db[name].create(columns, pk=pk, not_null={"run_id"})
            for table, cols in INDEXES:
                store.db[table].create_index(cols)
        return store

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        """An existing run's store (for resuming it). Bad paths are bad input."""
        path = Path(run_dir) / "run.db"
        if not Path(run_dir).is_dir():
            raise InputError(Problem(str(run_dir), "run directory not found"))
        if not path.is_file():
            raise InputError(Problem(str(run_dir), "not a run directory: it has no run.db"))
        try:
            store = cls(path, "")
        except RunError as exc:
            raise InputError(Problem(str(path), f"not a readable run.db: {exc}")) from None
        try:
            row = store.db.execute("select run_id from runs").fetchone()
        except Exception as exc:  # sqlite3.DatabaseError: not a database, or no runs table
            store.close()
            raise InputError(Problem(str(path), f"not a readable run.db: {exc}")) from None
        if row is None:
            store.close()
            raise InputError(Problem(str(path), "run.db holds no run"))
        store.run_id = row[0]
        store._upgrade()
        return store

    def _upgrade(self) -> None:
        """Bring an older run.db's layout up to this version's before it is resumed: missing tables
        are created and missing columns added (empty for the rows already there, e.g. the
        provenance of memories recorded before schema 4)."""
        try:
            with self.db.atomic():
                for name, (columns, pk) in TABLES.items():
                    table = self.db[name]
                    if not table.exists():
                        table.create(columns, pk=pk, not_null={"run_id"})
                        continue
                    have = set(table.columns_dict)
                    for column, kind in columns.items():
                        if column not in have:
                            table.add_column(column, kind)
                for table, cols in INDEXES:
                    self.db[table].create_index(cols, if_not_exists=True)
                self.db["runs"].update(self.run_id, {"schema_version": SCHEMA_VERSION})
        except Exception as exc:
            raise RunError(f"cannot upgrade {self.path} to run.db schema {SCHEMA_VERSION}: {exc}") from None

    def next_id(self, table: str) -> int:
        if table not in self._next:
            row = self.db.execute(f"select max(id) from [{table}]").fetchone()
            self._next[table] = (row[0] or 0) + 1
        value = self._next[table]
        self._next[table] = value + 1
        return value

    def buffer(self) -> TickBuffer:
        return TickBuffer(self)

    # ----------------------------------------------------------------- writing

    def commit(self, buffer: TickBuffer, run_update: dict[str, Any] | None = None,
               state: tuple[int, str] | None = None) -> None:
        """Write everything in ``buffer``, an update of the runs row and the resume state (tick, JSON)
        in one transaction: a crash at any point leaves run.db at the end of a whole tick."""
        try:
            with self.db.atomic():
                for table, rows in buffer.rows.items():
                    self.db[table].insert_all(rows)
                for table, by_id in buffer.upserts.items():
                    self.db[table].upsert_all(list(by_id.values()), pk="id")
                for table, row_id, values in buffer.updates:
                    self.db[table].update(row_id, values)
                if state is not None:
                    self.db["resume_state"].update(self.run_id, {"tick": state[0], "state": state[1],
                                                                 "updated_at": now_iso()})
                if run_update:
                    self.db["runs"].update(self.run_id, run_update)
        except Exception as exc:
            raise RunError(f"cannot write {self.path}: {exc}") from None
        buffer.rows.clear()
        buffer.upserts.clear()
        buffer.updates.clear()

    def replace_behaviour(self, metrics: dict[str, float | None]) -> None:
        """The run's ``behaviour`` rows, replaced as a whole (metrics without a value are left out)."""
        stamp = now_iso()
        try:
            with self.db.atomic():
                self.db.execute("delete from behaviour where run_id = ?", [self.run_id])
                self.db["behaviour"].insert_all(
                    [{"run_id": self.run_id, "metric": k, "value": float(v), "computed_at": stamp}
                     for k, v in sorted(metrics.items()) if v is not None])
        except Exception as exc:
            raise RunError(f"cannot write {self.path}: {exc}") from None

    def update_run(self, **fields: Any) -> None:
        with self.db.atomic():
            self.db["runs"].update(self.run_id, fields)

    def close(self) -> None:
        self.db.close()
