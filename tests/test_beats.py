"""A story's beats (``scenario.story``, ``rundb.beats``): reached, missed or not decided yet, on the
tiny hand-written run (tests/rundb_support.py) whose facts and places are worked out on paper,
and on a scripted run of the small flagship."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import agora, step_run
from rundb_support import RUN_ID, make_traced_run_db

from simulation.provenance.rules import AWARE_SOURCES
from simulation.rundb import connect_ro
from simulation.rundb.beats import beats
from simulation.rundb.behaviour import behaviour
from simulation.scenario.story import Beat, Story


def tiny_story(tmp_path: Path, story_beats: list[dict]) -> Path:
    """The traced tiny run (party: ann aware at 07:00, bob 07:10, cat 07:20, dan 07:30; the run ends
    at 07:30) with ``story_beats``, and who was where:

    ann    at the cafe every tick
    bob    at the cafe at 07:00 and 07:10, then home
    cat    walking through the cafe at 07:10, at the cafe at 07:20
    dan    at home until 07:20, at the cafe at 07:30
    -> at the cafe, not walking: 07:00 ann+bob, 07:10 ann+bob, 07:20 ann+cat, 07:30 ann+dan
    """
    run = make_traced_run_db(tmp_path / "tiny")
    con = sqlite3.connect(run / "run.db")
    with con:
        scenario = json.loads(con.execute("select scenario from resume_state").fetchone()[0])
        scenario["scenario"]["story"] = Story(beats=[Beat(**b) for b in story_beats]).model_dump(mode="json")
        con.execute("update resume_state set scenario = ?", (json.dumps(scenario),))
        places = {"ann": ["cafe"] * 4, "bob": ["cafe", "cafe", "home", "home"],
                  "cat": ["home", "cafe", "cafe", "home"], "dan": ["home", "home", "home", "cafe"]}
        for agent, where in places.items():
            for tick, place in enumerate(where):
                status = "walking" if (agent, tick) == ("cat", 1) else "idle"
                con.execute("update agent_states set place = ?, status = ? where agent_id = ? and tick = ?",
                            (place, status, agent, tick))
    con.close()
    return run


BEATS = [
    {"id": "two_hear", "fact": "party", "people": ["bob", "cat", "dan"], "count": 2, "by": "2023-02-13 07:20"},
    {"id": "dan_hears_early", "fact": "party", "people": ["dan"], "by": "2023-02-13 07:20"},
    {"id": "dan_hears_later", "fact": "party", "people": ["dan", "zed"], "count": 1, "by": "2023-02-13 09:00"},
    {"id": "cider_tonight", "fact": "cider", "people": ["ann"], "by": "2023-02-13 20:00"},
    {"id": "trio", "place": "cafe", "count": 3, "by": "2023-02-13 07:30"},
    {"id": "ann_and_cat", "place": "cafe", "people": ["ann", "cat"], "after": "2023-02-13 07:10",
     "by": "2023-02-13 07:30"},
    {"id": "three_of_all", "fact": "party", "people": "all", "count": 3, "by": "2023-02-13 07:30"},
]


def test_each_beat_is_reached_missed_or_still_open(tmp_path):
    con = connect_ro(tiny_story(tmp_path, BEATS) / "run.db")
    found = {b.id: b for b in beats(con, RUN_ID)}
    metrics = behaviour(con, RUN_ID)
    con.close()
    assert list(found) == [b["id"] for b in BEATS]
    assert (found["two_hear"].reached, found["two_hear"].reached_at, found["two_hear"].who) == \
        (True, "2023-02-13 07:20", ["bob", "cat"])
    assert found["dan_hears_early"].reached is False, "dan learnt it at 07:30, after the deadline"
    assert found["dan_hears_later"].reached is True, "reached before its deadline: decided although the run stopped"
    assert found["cider_tonight"].reached is None, "nobody knows yet and the deadline has not come"
    assert found["trio"].reached is False and found["trio"].who == ["ann", "bob"], \
        "never three at once: cat walked through while bob was there"
    assert (found["ann_and_cat"].reached, found["ann_and_cat"].reached_at) == (True, "2023-02-13 07:20")
    assert (found["three_of_all"].reached, found["three_of_all"].who) == (True, ["ann", "bob", "cat", "dan"])
    assert metrics["story.beats"] == 6  # cider_tonight is not decided
    assert metrics["story.beats_reached"] == 4 / 6
    assert (metrics["story.two_hear.reached"], metrics["story.trio.reached"]) == (1.0, 0.0)
    assert "story.cider_tonight.reached" not in metrics


def test_a_run_without_beats_has_no_story_metrics(tmp_path):
    con = connect_ro(tiny_story(tmp_path, []) / "run.db")
    assert beats(con, RUN_ID) == []
    assert not [k for k in behaviour(con, RUN_ID) if k.startswith("story.")]
    con.close()
    con = connect_ro(tiny_story(tmp_path / "open", [BEATS[3]]) / "run.db")
    assert {k: v for k, v in behaviour(con, RUN_ID).items() if k.startswith("story.")} == {"story.nudges": 0.0}
    con.close()


def test_a_beat_is_one_kind_with_people_it_can_count():
    import pytest
    from pydantic import ValidationError

    assert Beat(id="g", place="cafe", by="2023-02-13 08:00").needed(25) == 2
    assert Beat(id="r", fact="party", people=["a", "b", "c"], by="2023-02-13 08:00").needed(25) == 3
    assert Beat(id="a", fact="party", people="all", by="2023-02-13 08:00").needed(25) == 25
    for bad, why in [({"fact": "party", "place": "cafe", "people": ["a"]}, "exactly one"),
                     ({"fact": "party"}, "needs 'people'"),
                     ({"fact": "party", "people": ["a"], "count": 2}, "more than the 1 people"),
                     ({"place": "cafe", "after": "2023-02-13 09:00"}, "is not before 'by'")]:
        with pytest.raises(ValidationError, match=why):
            Beat(id="x", by="2023-02-13 08:00", **bad)


def test_a_scripted_run_reaches_the_beat_the_whisper_starts(make_run, scripted, flagship, tmp_path):
    """The small flagship, scripted: Isabella is whispered the party at 07:00, so a beat that she
    knows by 07:10 is reached, and one that everyone knows within the first hour is decided by
    what the engine's record says (the same awareness the facts' figures count)."""
    sc = flagship.scenario.model_copy(deep=True)
    everyone = [p.persona.id for p in flagship.people]
    sc.story = Story(beats=[Beat(id="host", fact="party", people=["isabella_rodriguez"], by="2023-02-13 07:10"),
                            Beat(id="all", fact="party", people=everyone, by="2023-02-13 07:50"),
                            Beat(id="cafe", place="hobbs_cafe", people=["isabella_rodriguez", "daniel_okafor"],
                                 by="2023-02-13 07:50")])
    run = step_run(make_run(scripted, ticks=6, loaded=flagship.model_copy(update={"scenario": sc})))
    run.close()
    con = connect_ro(run.run_dir / "run.db")
    found = {b.id: b for b in beats(con, run.run_id)}
    marks = ", ".join("?" for _ in AWARE_SOURCES)
    aware = {a for a, in con.execute("select distinct agent_id from fact_memories where run_id = ? and "
                                     "fact_id = 'party' and sim_time <= '2023-02-13 07:50' and source in "
                                     f"({marks})", [run.run_id, *AWARE_SOURCES])}
    con.close()
    assert found["host"].reached is True
    assert found["all"].reached is (aware >= set(everyone))
    assert found["cafe"].reached is True, "Isabella opens the cafe and Daniel has his coffee there"
    shown = agora("behaviour", run.run_dir)
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "beat host (reach, 1 needed by 2023-02-13 07:10): reached at 2023-02-13 07:00" in said
