"""Reward dimensions read from what a line did, not from a judge: news passed on, and the tie it left.

A judge's rubric says how a line reads; two things a line *does* are on record in run.db, and
need no model to score, so no judge's taste or a small model's noise can move them:

- ``informed``: how many of the scenario's facts the listener first learnt from this line
  (``fact_memories`` rows of a told source whose ``utterance_id`` is the line and which are the
  listener's first awareness of that fact). Information shared, from provenance.
- ``tie``: how the listener's sentiment toward the speaker (-1 to 1) changed over the line's
  conversation: the listener's ``relationships`` row at the conversation's last tick against the
  last one before it began (0 where the recap left it unchanged). Every line of a conversation
  carries its conversation's change: a tie is made by the talk, not by one line of it.

Both are keyed by the line (``("utterances", id)``); actions have neither. They are exported as
named dimensions beside the rubric's, and the co-evolution loop tracks them as prosocial
measures. They are not mixed into the reward: a trainer that wants them reads the column.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict

from simulation.provenance.rules import AWARE_SOURCES, TOLD_SOURCES
from simulation.rundb import table_names
from simulation.rundb.connect import column_names

__all__ = ["DIMENSIONS", "measured"]

DIMENSIONS = ("informed", "tie")


def measured(con: sqlite3.Connection, run_id: str) -> dict[tuple[str, int], dict[str, float]]:
    """``("utterances", id)`` -> ``{"informed": n, "tie": change}`` for every line of the run
    (an empty dict when the run has no utterances table)."""
    tables = table_names(con)
    if "utterances" not in tables or "listener_id" not in column_names(con, "utterances"):
        return {}
    lines = con.execute("select id, speaker_id, listener_id, conversation_id from utterances where run_id = ?",
                        (run_id,)).fetchall()
    informed = _informed(con, run_id) if "fact_memories" in tables else {}
    ties = _ties(con, run_id) if {"relationships", "conversations"} <= tables else {}
    return {("utterances", int(uid)): {"informed": float(informed.get(int(uid), 0)),
                                       "tie": ties.get((conv, listener, speaker), 0.0)}
            for uid, speaker, listener, conv in lines}


def _informed(con: sqlite3.Connection, run_id: str) -> dict[int, int]:
    """Line id -> facts its listener first learnt from it."""
    marks = ", ".join("?" for _ in AWARE_SOURCES)
    first: dict[tuple[str, str], int] = {}
    for row_id, agent, fact in con.execute(
            f"select id, agent_id, fact_id from fact_memories where run_id = ? and source in ({marks}) "
            "order by tick, id", (run_id, *AWARE_SOURCES)):
        first.setdefault((agent, fact), int(row_id))
    firsts = set(first.values())
    told = ", ".join("?" for _ in TOLD_SOURCES)
    out: dict[int, int] = defaultdict(int)
    for row_id, utterance in con.execute(
            f"select id, utterance_id from fact_memories where run_id = ? and source in ({told}) "
            "and utterance_id is not null", (run_id, *TOLD_SOURCES)):
        if int(row_id) in firsts:
            out[int(utterance)] += 1
    return dict(out)


def _ties(con: sqlite3.Connection, run_id: str) -> dict[tuple[int, str, str], float]:
    """(conversation, listener, speaker) -> the listener's sentiment change toward the speaker."""
    history: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for tick, agent, other, sentiment in con.execute(
            "select tick, agent_id, other_id, sentiment from relationships where run_id = ? order by tick",
            (run_id,)):
        history[(agent, other)].append((int(tick), float(sentiment or 0.0)))

    def at(pair: tuple[str, str], tick: int, before: bool) -> float:
        value = 0.0
        for t, s in history.get(pair, []):
            if t < tick or (not before and t == tick):
                value = s
        return value

    out: dict[tuple[int, str, str], float] = {}
    for conv, participants, started, ended in con.execute(
            "select id, participants, started_tick, ended_tick from conversations where run_id = ?", (run_id,)):
        people = _participants(participants)
        end = ended if ended is not None else started
        for a in people:
            for b in people:
                if a != b:
                    out[(int(conv), a, b)] = round(at((a, b), int(end), False) - at((a, b), int(started), True), 6)
    return out


def _participants(text: str | None) -> list[str]:
    import json

    try:
        value = json.loads(text or "[]")
    except ValueError:
        value = [p.strip() for p in (text or "").split(",") if p.strip()]
    return [str(p) for p in value] if isinstance(value, list) else []
