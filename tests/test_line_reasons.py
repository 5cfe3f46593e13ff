"""bench/line_reasons.py counts a run's utterance answers by the check that refused them."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import line_reasons  # noqa: E402


def test_refusals_are_counted_by_reason_and_own_labels_among_the_usable(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    con = sqlite3.connect(run / "run.db")
    con.execute("create table agents (agent_id text, name text)")
    con.execute("create table llm_calls (purpose text, parse_error text, completion text, agent_id text, parse_ok int)")
    con.executemany("insert into agents values (?, ?)", [("w", "Walter Grey"), ("i", "Isabella Rodriguez")])
    say = lambda text: json.dumps({"say": text})  # noqa: E731
    con.executemany("insert into llm_calls values ('utterance', ?, ?, ?, ?)", [
        (None, say("Walter: Hello, Isabella."), "w", 1),
        (None, say("Isabella: hi"), "w", 1),  # someone else's label: not the speaker's own
        ("asks nothing", say("Nice day."), "i", 0),
        ("asks nothing", say("Lovely."), "i", 0),
        ("repeats an earlier line", say("Hello."), "w", 0),
    ])
    con.execute("insert into llm_calls values ('plan', 'bad', '{}', 'w', 0)")
    con.commit()
    con.close()
    answers, usable, labelled, refused = line_reasons.reasons([run])
    assert (answers, usable, labelled) == (5, 2, 1)
    assert refused == {"asks nothing": 2, "repeats an earlier line": 1}
