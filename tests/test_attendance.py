"""Attendance (``rundb.attendance``): who was at a happening's place during its window, who was
invited or aware and came, and who planned it, on the tiny hand-written run (tests/rundb_support.py)
with a party moved into its half hour, and on a scripted run of the small flagship."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import agora, step_run
from rundb_support import FACTS, RUN_ID, TIMES, make_traced_run_db

from simulation.rundb import connect_ro
from simulation.rundb.attendance import attendance, happenings
from simulation.rundb.behaviour import behaviour

WINDOW = "07:10-07:30"
"""Ticks 1 and 2 of the tiny run (07:10 and 07:20); the run ends at 07:30, so the window is passed."""


def party_in(window: str, day: str = "2023-02-13") -> list[dict]:
    party = json.loads(json.dumps(FACTS[0]))
    party["details"][1]["value"] = day
    party["details"][2]["value"] = window
    return [party, FACTS[1]]


def tiny_party(tmp_path: Path, window: str = WINDOW, day: str = "2023-02-13") -> Path:
    """The traced tiny run with the party at the cafe in ``window``, and who was where:

    ann    at the cafe every tick                         -> came
    bob    at the cafe at 07:00, at home from 07:10      -> left before the window: did not come
    cat    walking through the cafe at 07:10 and 07:20   -> walking: did not come
    dan    at home, then at the cafe at 07:20            -> came
    invitations: ann -> bob (declined), ann -> dan (accepted); aware at 07:10: ann (07:00), bob (07:10)
    plans for 2023-02-13: ann at 07:00 (aware) puts the cafe at 7; bob at 07:00 (not aware yet);
    dan at 07:30 (aware since 07:30) puts the cafe at 9, outside the window
    """
    run = make_traced_run_db(tmp_path / "tiny")
    con = sqlite3.connect(run / "run.db")
    with con:
        scenario = json.loads(con.execute("select scenario from resume_state").fetchone()[0])
        scenario["scenario"]["facts"] = party_in(window, day)
        con.execute("update resume_state set scenario = ?", (json.dumps(scenario),))
        places = {"bob": ["cafe", "home", "home", "home"], "cat": ["home", "cafe", "cafe", "home"],
                  "dan": ["home", "home", "cafe", "cafe"]}
        for agent, where in places.items():
            for tick, place in enumerate(where):
                status = "walking" if agent == "cat" and place == "cafe" else "idle"
                con.execute("update agent_states set place = ?, status = ? where agent_id = ? and tick = ?",
                            (place, status, agent, tick))
        con.execute("create table invitations (id integer primary key, run_id text, tick integer, sim_time text, "
                    "conversation_id integer, utterance_id integer, inviter_id text, guest_id text, fact_id text, "
                    "place text, starts_at text, ends_at text, answer text, answer_utterance_id integer)")
        con.executemany("insert into invitations (run_id, tick, sim_time, inviter_id, guest_id, fact_id, place, answer) "
                        "values (?, 1, ?, 'ann', ?, 'party', 'cafe', ?)",
                        [(RUN_ID, TIMES[1], "bob", "declined"), (RUN_ID, TIMES[1], "dan", "accepted")])
        con.execute("create table plans (id integer primary key, run_id text, tick integer, sim_time text, "
                    "agent_id text, day text, items text, ok integer)")
        plans = [(0, "ann", 7, "cafe"), (0, "bob", 7, "cafe"), (3, "dan", 9, "cafe")]
        con.executemany("insert into plans (run_id, tick, sim_time, agent_id, day, items, ok) values (?, ?, ?, ?, "
                        "'2023-02-13', ?, 1)", [(RUN_ID, t, TIMES[t], a, json.dumps([{"hour": h, "place": p,
                                                                                       "activity": "x"}]))
                                                for t, a, h, p in plans])
    con.close()
    return run


def test_a_fact_with_a_place_a_day_and_a_time_range_is_a_happening(tmp_path):
    con = connect_ro(tiny_party(tmp_path) / "run.db")
    found = happenings(con, RUN_ID)
    con.close()
    assert list(found) == ["party"]  # cider has no details; a single time ("17:00") is no window either
    assert (found["party"].place, found["party"].starts, found["party"].ends) == \
        ("cafe", "2023-02-13 07:10", "2023-02-13 07:30")


def test_who_came_who_was_invited_aware_and_who_planned(tmp_path):
    con = connect_ro(tiny_party(tmp_path) / "run.db")
    a = attendance(con, RUN_ID)["party"]
    b = behaviour(con, RUN_ID)
    con.close()
    assert a.attended == ["ann", "dan"]  # bob left before the window, cat only walked through
    assert a.invited == ["bob", "dan"] and a.invited_came == ["dan"]
    assert a.aware == ["ann", "bob"] and a.aware_came == ["ann"]
    assert a.planners == ["ann", "dan"] and a.planned == ["ann"]
    assert (b["facts.party.attended"], b["facts.party.invited"], b["facts.party.attended_invited"]) == (2, 2, 1)
    assert (b["facts.party.aware_at_start"], b["facts.party.attended_aware"]) == (2, 1)
    assert b["facts.party.planned"] == 1 and b["facts.party.planned_share"] == 0.5


def test_a_window_the_run_did_not_reach_gives_no_attendance(tmp_path):
    con = connect_ro(tiny_party(tmp_path, window="17:00-19:00", day="2023-02-14") / "run.db")
    assert attendance(con, RUN_ID) == {}
    b = behaviour(con, RUN_ID)
    con.close()
    assert not [k for k in b if k.startswith("facts.party.attend") or k.startswith("facts.party.plan")]


def test_a_scripted_run_counts_who_was_at_the_party(make_run, scripted, flagship, tmp_path):
    """The small flagship with Isabella's party moved to 08:10-08:50 at Hobbs Cafe on the first
    morning: whoever the engine put there (not walking) while it went on came, nobody else. Daniel
    has his coffee there until 08:00 and goes to the pharmacy: he left before it began."""
    sc = flagship.scenario.model_copy(deep=True)
    party = next(f for f in sc.facts if f.id == "party")
    for d in party.details:
        if d.kind == "date":
            d.value = "2023-02-13"
        elif d.kind == "time":
            d.value = "08:10-08:50"
    run = step_run(make_run(scripted, ticks=12, loaded=flagship.model_copy(update={"scenario": sc})))
    run.close()
    con = connect_ro(run.run_dir / "run.db")
    a = attendance(con, run.run_id)["party"]
    at: dict[str, list[tuple[str, str, str]]] = {}
    for agent, when, place, status in con.execute(
            "select agent_id, sim_time, place, status from agent_states where run_id = ? order by tick", [run.run_id]):
        at.setdefault(agent, []).append((when, place, status))
    con.close()
    came = sorted(p for p, rows in at.items()
                  if any("2023-02-13 08:10" <= w < "2023-02-13 08:50" and pl == "hobbs_cafe" and s != "walking"
                         for w, pl, s in rows))
    left = [p for p, rows in at.items() if p not in came and any(pl == "hobbs_cafe" for _, pl, _ in rows)]
    assert a.attended == came and "isabella_rodriguez" in came
    assert "daniel_okafor" in left, "at Hobbs Cafe until 08:00, he does not count"
    assert "isabella_rodriguez" in a.aware
    shown = agora("behaviour", run.run_dir)
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "party at hobbs_cafe, 2023-02-13 08:10-08:50: came " in said and "Isabella Rodriguez" in said


def test_the_audit_lists_everyone_the_turnout_counts(tmp_path):
    import csv
    from types import SimpleNamespace

    from simulation.benchmark.audit import write_audit

    run = tiny_party(tmp_path)
    files = write_audit(SimpleNamespace(runs=[SimpleNamespace(seed=1, run_dir=run, run_id=RUN_ID)]), tmp_path)
    assert files[-1].name == "attendance.csv"
    rows = {r["agent_id"]: r for r in csv.DictReader(files[-1].open(encoding="utf-8"))}
    assert sorted(rows) == ["ann", "bob", "dan"]  # cat neither came, nor was invited, aware or planning
    assert [rows["dan"][k] for k in ("came", "invited", "aware_at_start", "planned_day_knowing", "planned")] == \
        ["1", "1", "0", "1", "0"]
    assert rows["ann"]["name"] == "Ann Archer" and rows["ann"]["planned"] == "1"
