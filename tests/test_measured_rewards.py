"""The reward dimensions read from run.db rather than judged (``rewards.measured``), worked by hand.

A four-line conversation (2) between Ana and Ben in which Ben tells Ana the party (her first time
hearing it) and Ana tells Ben the market, which Ben already knew from a seed; its recap leaves Ana
warmer toward Ben (0.2 -> 0.5) and Ben unchanged. An earlier one-line conversation (1) made Ben's
view of Ana (0 -> 0.4): it belongs to that talk's line, not to the later one's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from simulation.record.store import TABLES
from simulation.rewards.measured import DIMENSIONS, measured


@pytest.fixture
def con(tmp_path: Path) -> sqlite3.Connection:
    db = sqlite_utils.Database(tmp_path / "run.db")
    for table in ("utterances", "fact_memories", "relationships", "conversations"):
        columns, pk = TABLES[table]
        db[table].create(columns, pk=pk)
    run = "r1"
    db["conversations"].insert_all([
        {"id": 1, "run_id": run, "participants": '["ana", "ben"]', "started_tick": 2, "ended_tick": 3},
        {"id": 2, "run_id": run, "participants": '["ana", "ben"]', "started_tick": 5, "ended_tick": 6},
    ])
    db["utterances"].insert_all([
        {"id": 10, "run_id": run, "conversation_id": 1, "tick": 2, "speaker_id": "ana", "listener_id": "ben"},
        {"id": 20, "run_id": run, "conversation_id": 2, "tick": 5, "speaker_id": "ben", "listener_id": "ana"},
        {"id": 21, "run_id": run, "conversation_id": 2, "tick": 5, "speaker_id": "ana", "listener_id": "ben"},
        {"id": 22, "run_id": run, "conversation_id": 2, "tick": 6, "speaker_id": "ben", "listener_id": "ana"},
        {"id": 23, "run_id": run, "conversation_id": 2, "tick": 6, "speaker_id": "ana", "listener_id": "ben"},
    ])
    db["fact_memories"].insert_all([
        {"id": 1, "run_id": run, "tick": 0, "agent_id": "ben", "fact_id": "market", "source": "seeded"},
        {"id": 2, "run_id": run, "tick": 5, "agent_id": "ana", "fact_id": "party", "source": "heard",
         "from_agent": "ben", "utterance_id": 20},
        {"id": 3, "run_id": run, "tick": 5, "agent_id": "ben", "fact_id": "market", "source": "heard",
         "from_agent": "ana", "utterance_id": 21},
        {"id": 4, "run_id": run, "tick": 6, "agent_id": "ana", "fact_id": "party", "source": "heard",
         "from_agent": "ben", "utterance_id": 22},  # told again: not news any more
        {"id": 5, "run_id": run, "tick": 6, "agent_id": "ben", "fact_id": "party", "source": "reflected",
         "utterance_id": 23},  # not a told source
    ])
    db["relationships"].insert_all([
        {"run_id": run, "tick": 0, "agent_id": "ana", "other_id": "ben", "sentiment": 0.2},
        {"run_id": run, "tick": 3, "agent_id": "ben", "other_id": "ana", "sentiment": 0.4},
        {"run_id": run, "tick": 6, "agent_id": "ana", "other_id": "ben", "sentiment": 0.5},
    ])
    db.conn.commit()
    return db.conn


def test_informed_counts_only_a_listeners_first_hearing(con: sqlite3.Connection) -> None:
    got = measured(con, "r1")
    assert {uid: d["informed"] for (_, uid), d in got.items()} == {10: 0, 20: 1, 21: 0, 22: 0, 23: 0}


def test_tie_is_the_listeners_change_over_the_lines_conversation(con: sqlite3.Connection) -> None:
    got = measured(con, "r1")
    assert got[("utterances", 20)]["tie"] == pytest.approx(0.3), "Ana, listening to Ben, warmed 0.2 -> 0.5"
    assert got[("utterances", 22)]["tie"] == pytest.approx(0.3), "every line of the talk carries its change"
    assert got[("utterances", 21)]["tie"] == 0.0, "Ben's view of Ana did not move in this talk"
    assert got[("utterances", 10)]["tie"] == pytest.approx(0.4), "Ben's first view of Ana came from talk 1"
    assert all(set(d) == set(DIMENSIONS) for d in got.values())


def test_a_run_without_the_tables_has_no_measured_dimensions(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "empty.db")
    assert measured(con, "r1") == {}
