"""The rewards tables of run.db (written through sqlite-utils, read with parameterised SQL).

- ``rewards``: one row per (turn, role, agent): scores, reward, advantage, running total;
- ``reward_calls``: every attempt of every judge, critic and scorer request (messages, completion,
  parse result, tokens), so each reward can be traced to the exact prompt and answer behind it,
  and the critic's and scorer's turns can be exported like the agents' own;
- ``reward_passes``: one row per ``agora rewards`` pass: models, options, counts.

A pass replaces the run's earlier rows in one transaction, so the tables always hold one
coherent labelling (the viewer and the export read them as they are). The layout is documented
in docs/run-db.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import sqlite_utils

from simulation.errors import RunError
from simulation.rewards.engine import RewardResult, options_json

REWARD_COLUMNS: dict[str, type] = {
    "id": int, "run_id": str, "agent_id": str, "tick": int, "sim_time": str, "role": str, "kind": str,
    "source_table": str, "source_id": int, "group_key": str, "llm_call_id": int, "reward_call_id": int,
    "scores": str, "assessment": str, "scene": str, "reward": float, "advantage": float, "total": float,
    "judge_model": str, "pass_id": str,
}
CALL_COLUMNS: dict[str, type] = {
    "id": int, "run_id": str, "pass_id": str, "role": str, "target": str, "purpose": str, "backend": str,
    "model": str, "attempt": int, "seed": int, "temperature": float, "max_tokens": int, "messages": str,
    "json_schema": str, "options": str, "completion": str, "finish_reason": str, "parse_ok": int,
    "parse_error": str, "fallback": int, "cache_hit": int, "prompt_tokens": int, "completion_tokens": int, "latency_s": float,
}
PASS_COLUMNS: dict[str, type] = {
    "pass_id": str, "run_id": str, "created_at": str, "judge_backend": str, "judge_model": str,
    "peer_backend": str, "peer_model": str, "options": str, "turns": int, "usable": int, "dropped": int,
    "exportable": int, "critiqued": int, "scorer_dropped": int, "critic_dropped": int, "calls": int,
    "prompt_tokens": int, "completion_tokens": int, "wall_s": float,
}
TABLES = {"rewards": (REWARD_COLUMNS, "id"), "reward_calls": (CALL_COLUMNS, "id"),
          "reward_passes": (PASS_COLUMNS, "pass_id")}


def _ensure(db: sqlite_utils.Database) -> None:
    existing = set(db.table_names())
    for name, (columns, pk) in TABLES.items():
        if name not in existing:
            db[name].create(columns, pk=pk, not_null={"run_id"})
        else:
            db[name].add_missing_columns([{c: t() for c, t in columns.items()}])  # an earlier layout: add what it lacks
    if "rewards" not in existing:
        db["rewards"].create_index(["agent_id", "tick"])
        db["rewards"].create_index(["source_table", "source_id"])


def write(db_path: Path, result: RewardResult) -> int:
    """Replace the run's rewards, calls and pass row with ``result``'s; returns the rewards rows written."""
    counts = result.counts()
    rows = [{**r.model_dump(), "scores": json.dumps(r.scores), "pass_id": result.pass_id} for r in result.rows]
    calls = [{**c, "run_id": result.run_id, "pass_id": result.pass_id} for c in result.calls]
    peer = result.peer or {}
    summary = {
        "pass_id": result.pass_id, "run_id": result.run_id, "created_at": result.created_at,
        "judge_backend": result.judge["backend"], "judge_model": result.judge["model"],
        "peer_backend": peer.get("backend"), "peer_model": peer.get("model"), "options": options_json(result.options),
        "wall_s": round(result.wall_s, 3), **{k: counts.get(k) for k in PASS_COLUMNS if k in counts},
    }
    db = sqlite_utils.Database(db_path)
    try:
        with db.atomic():
            _ensure(db)
            for table in TABLES:
                db.execute(f"delete from [{table}] where run_id = ?", [result.run_id])
            db["rewards"].insert_all(rows)
            db["reward_calls"].insert_all(calls, alter=True)
            db["reward_passes"].insert(summary)
    except Exception as exc:  # sqlite3.OperationalError: read-only file, locked, disk full
        raise RunError(f"cannot write rewards into {db_path}: {exc}") from None
    finally:
        db.close()
    return len(rows)
