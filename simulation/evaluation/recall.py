"""Remembering after a run: a run agent's memory stream read back from run.db, and retrieval over
it as the run did it (recency, importance and relevance, ``memory.scoring``).

Why: Generative Agents interviewed their agents at the end of the simulation with the memory
stream in reach, so an answer about "who is Maria?" or "what will you do at noon?" drew on what
the agent had lived through, not on the persona alone. An evaluation reads run.db only (it never
needs the run's process or index), and run.db holds everything retrieval needs: every memory with
its importance and last access, and the embedding of every distinct text (``embeddings``: float16
since run.db schema 8, float32 before), so the question is the only text embedded here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from simulation.memory.scoring import score
from simulation.rundb import connect_ro, table_names

TOP_K = 8
"""Memories shown with a question (the run's default ``memory.top_k``)."""
DECAY = 0.995


@dataclass(frozen=True)
class Stream:
    """One agent's memories at the end of a run, with what retrieval scores them by."""

    ids: np.ndarray
    texts: list[str]
    times: list[str]
    importance: np.ndarray
    hours_since_access: np.ndarray
    vectors: np.ndarray | None
    """One row per memory (None when the run recorded no embeddings: recency and importance only)."""

    def __len__(self) -> int:
        return len(self.texts)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("T", " ")[:19])


def stream(run_db: Path, run_id: str, agent_id: str, dim: int) -> Stream:
    """``agent_id``'s memories in ``run_db`` (seeds included), in the order they were made; ``dim``:
    the embedder's vector size (a stored vector of 2 x dim bytes is float16, of 4 x dim float32)."""
    con = connect_ro(run_db)
    try:
        rows = con.execute("select id, text, importance, sim_time, coalesce(last_accessed, sim_time) from memories "
                           "where run_id = ? and agent_id = ? order by id", (run_id, agent_id)).fetchall()
        end = con.execute("select max(sim_time) from ticks where run_id = ?", (run_id,)).fetchone()[0] \
            if "ticks" in table_names(con) else None
        vectors = _vectors(con, run_id, [r[1] for r in rows], dim) if "embeddings" in table_names(con) else None
    finally:
        con.close()
    now = _time(end) if end else max((_time(r[4]) for r in rows), default=datetime.min)
    hours = np.array([max(0.0, (now - _time(r[4])).total_seconds() / 3600) for r in rows], dtype=np.float64)
    return Stream(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows], [r[3] for r in rows],
                  np.array([r[2] if r[2] is not None else 5.0 for r in rows], dtype=np.float64), hours, vectors)


def _vectors(con: sqlite3.Connection, run_id: str, texts: list[str], dim: int) -> np.ndarray | None:
    """The stored vector of each text (stored once, under the first memory that had the text)."""
    first: dict[str, int] = {}
    for memory_id, text in con.execute("select id, text from memories where run_id = ? order by id", (run_id,)):
        first.setdefault(text, memory_id)
    wanted = {first[t] for t in texts if t in first}
    kinds = {2 * dim: np.float16, 4 * dim: np.float32}
    stored: dict[int, np.ndarray] = {}
    for memory_id, blob in con.execute("select memory_id, vector from embeddings where run_id = ?", (run_id,)):
        if memory_id in wanted and len(blob) in kinds:
            stored[memory_id] = np.frombuffer(blob, dtype=kinds[len(blob)]).astype(np.float32)
    if not texts or any(first.get(t) not in stored for t in texts):
        return None  # a text without its vector (another embedder, an old run): rank without relevance
    return np.stack([stored[first[t]] for t in texts])


def recall(memories: Stream, query_vector: np.ndarray | None, k: int = TOP_K) -> list[str]:
    """The ``k`` memories Generative Agents' retrieval ranks first for a query, oldest first, each
    with its game time ("(Mon 09:20) ...")."""
    n = len(memories)
    if n == 0:
        return []
    if memories.vectors is not None and query_vector is not None:
        relevance = memories.vectors @ query_vector.astype(np.float32)
    else:
        relevance = np.zeros(n)
    scored = score(relevance[None, :], memories.importance[None, :], memories.hours_since_access[None, :],
                   memories.ids[None, :], np.ones((1, n), dtype=bool), decay=DECAY, k=k)
    chosen = sorted(int(c) for c in scored.top(0, k))
    return [f"({_time(memories.times[c]):%a %H:%M}) {memories.texts[c]}" for c in chosen]


__all__ = ["DECAY", "Stream", "TOP_K", "recall", "stream"]
