"""Moods (``cognition.mood``, ``cognition.moods``): scored from the model's probabilities over a fixed
set of labels after something happens to a person, at most once a game hour, shown in their later
prompts and stored per tick."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta

import pytest
from conftest import MINIMAL, step_run
from fake_mind import FakeMind

from simulation.agents import AgentState
from simulation.cognition.context import context
from simulation.cognition.mood import MOODS, Moods
from simulation.core import MemoryKind, Provenance, Source, Status
from simulation.rundb import connect_ro

MORNING = datetime(2023, 2, 13, 9, 0)
ANXIOUS = [0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.7, 0.0]  # sad 0.3, anxious 0.7, in MOODS' order


@pytest.fixture(scope="module")
def personas():
    from simulation.scenario import load

    return {rp.persona.id: rp for rp in load(MINIMAL).people}


def _mind(personas, moods: bool = True) -> FakeMind:
    people = {pid: AgentState(id=pid, persona=rp.persona, home=rp.home, place="cafe", status=Status.IDLE,
                              system_prompt=f"You are {rp.persona.name}.") for pid, rp in personas.items()}
    mind = FakeMind(people, now=MORNING, answers={"mood": lambda options, default: ANXIOUS})
    mind.settings = dataclasses.replace(mind.settings, moods=moods)
    return mind


def _happens(mind: FakeMind, who: str, text: str, source: Source = Source.HEARD, event: int | None = None) -> None:
    mind.remember(who, MemoryKind.UTTERANCE, text, Provenance(source, event_id=event), importance=3)


def test_what_happens_moves_the_mood_by_the_models_probabilities(personas):
    mind = _mind(personas)
    _happens(mind, "ann", 'Bob Brown said to Ann Archer: "The bakery is closing down."')
    assert mind.run(Moods()) == ["ann"], "bob had nothing happen to him"
    ann = mind.person("ann")
    assert ann.mood == "anxious"
    assert ann.valence == pytest.approx(0.7 * MOODS["anxious"][0] + 0.3 * MOODS["sad"][0])
    assert ann.arousal == pytest.approx(0.7 * MOODS["anxious"][1] + 0.3 * MOODS["sad"][1])
    asked = mind.asked[-1].messages[-1]["content"] + mind.asked[-1].messages[-2]["content"]
    assert "The bakery is closing down." in asked and "6. sad" in asked and "How does Ann feel now?" in asked


def test_at_most_once_an_hour_and_only_for_what_happened_to_them(personas):
    mind = _mind(personas)
    _happens(mind, "ann", "At Cafe: a fire alarm goes off.", Source.PERCEIVED, event=7)
    mind.run(Moods())
    _happens(mind, "ann", "At Cafe: the alarm stops.", Source.PERCEIVED, event=8)
    mind.now = MORNING + timedelta(minutes=30)
    assert mind.run(Moods()) == [], "asked half an hour ago"
    _happens(mind, "bob", "Bob Brown started serving coffee.", Source.DID)
    _happens(mind, "bob", "Ann Archer is busy with baking at Cafe", Source.PERCEIVED)
    mind.now = MORNING + timedelta(hours=1)
    assert mind.run(Moods()) == ["ann"], "bob only did something himself and saw someone at work"


def test_off_nobody_is_asked_and_no_prompt_says_a_mood(personas):
    mind = _mind(personas, moods=False)
    _happens(mind, "ann", 'Bob Brown said to Ann Archer: "Hello."')
    assert mind.run(Moods()) == []
    ann = mind.person("ann")
    ann.mood = "happy"
    assert asyncio.run(context(ann, mind, "", "react"))["mood"] == ""


def test_a_later_prompt_says_how_she_feels(personas):
    from simulation.cognition import prompts

    mind = _mind(personas)
    _happens(mind, "ann", 'Bob Brown said to Ann Archer: "The bakery is closing down."')
    mind.run(Moods())
    ann = mind.person("ann")
    ctx = asyncio.run(context(ann, mind, "", "react"))
    text = prompts.render("react.j2", **ctx, event="", other=None, options=["carry on", "stop"])
    assert "Ann feels anxious." in text


def test_a_scripted_run_stores_moods_per_tick_only_when_asked_for(make_run, scripted, flagship):
    """With moods, the run goes to 09:10, an hour past the market that opens in Johnson Park at
    08:00, so its witnesses' shift is measured (``rundb.moods``)."""
    from simulation.rundb.behaviour import behaviour
    from simulation.rundb.moods import mood_shifts

    moods = {}
    for on in (True, False):
        sc = flagship.scenario.model_copy(deep=True)
        sc.cognition = sc.cognition.model_copy(update={"moods": on})
        run = step_run(make_run(scripted, ticks=14 if on else 6, loaded=flagship.model_copy(update={"scenario": sc})))
        run.close()
        con = connect_ro(run.run_dir / "run.db")
        moods[on] = con.execute("select tick, agent_id, mood, valence, arousal from agent_states where mood is not "
                                "null order by tick, agent_id").fetchall()
        if on:
            run_id = con.execute("select run_id from runs").fetchone()[0]
            shifts, metrics = mood_shifts(con, run_id), behaviour(con, run_id)
            noticed = con.execute(
                "select m.agent_id, s.place from memories m join agent_states s on s.agent_id = m.agent_id "
                "and s.tick = m.tick where m.event_id = ? and m.source = 'perceived'", [shifts[0].event_id]).fetchall()
        con.close()
    assert moods[False] == []
    assert moods[True], "someone heard or saw something in the first hour"
    assert {m for _, _, m, _, _ in moods[True]} <= set(MOODS)
    assert all(-1 <= v <= 1 and -1 <= a <= 1 for _, _, _, v, a in moods[True])
    assert [m.key for m in shifts] == ["market"] and shifts[0].unseen
    assert noticed and {place for _, place in noticed} == {"johnson_park"}, \
        "whoever noticed the market was in Johnson Park when they did"
    assert len(shifts[0].saw) + shifts[0].first_moods == len({a for a, _ in noticed})
    assert metrics["moods.happenings"] == 1 and metrics["moods.market.saw"] == len(shifts[0].saw)
    assert metrics["moods.market.unseen_shift"] == pytest.approx(shifts[0].unseen_shift)


def _shifts_run(tmp_path, moods: bool = True):
    """A hand-written run.db at 30-minute ticks (a game hour is two ticks), ticks 0-5, with a burst
    pipe at the bakery at tick 2 and who felt what:

    ann   at the bakery, noticed it at tick 2:       valence 0.2 at tick 1, -0.5 at tick 4 -> -0.7
    bob   walked in at tick 3 and noticed it then:   0.1 at tick 2, -0.3 at tick 5 -> -0.4
    cat   awake elsewhere, never noticed it:         0.1 at tick 1, 0.2 at tick 4 -> +0.1
    dan   asleep at tick 2: not one of the others
    eve   the background crowd, noticed it: nobody's mood is asked
    fay   noticed it at tick 2 with no mood before: a first mood, not a shift
    gus   awake elsewhere with no mood yet: not one of the others either
    a market at tick 0 (no mood before it) and a prop at tick 5 (its hour not passed): left out
    """
    import sqlite3

    con = sqlite3.connect(tmp_path / "run.db")
    con.executescript("""
        create table runs (run_id text, tick_minutes integer);
        create table agents (run_id text, agent_id text, crowd integer);
        create table agent_states (run_id text, tick integer, agent_id text, status text, mood text, valence real);
        create table events (id integer primary key, run_id text, tick integer, sim_time text, agent_id text,
                             place text, kind text, text text, data text);
        create table memories (id integer primary key, run_id text, tick integer, agent_id text, source text,
                               event_id integer);
    """)
    con.execute("insert into runs values ('r', 30)")
    con.executemany("insert into agents values ('r', ?, ?)", [("ann", 0), ("bob", 0), ("cat", 0), ("dan", 0),
                                                               ("eve", 1), ("fay", 0), ("gus", 0)])
    felt = {"ann": [None, 0.2, 0.2, 0.2, -0.5, -0.5], "bob": [None, 0.1, 0.1, -0.1, -0.1, -0.3],
            "cat": [0.1, 0.1, 0.1, 0.2, 0.2, 0.2], "dan": [0.3] * 6, "eve": [None] * 6,
            "fay": [None, None, None, -0.6, -0.6, -0.6], "gus": [None] * 6}
    for who, values in felt.items():
        for tick, v in enumerate(values):
            status = "sleeping" if who == "dan" and tick == 2 else "idle"
            mood = ("calm" if v is not None else None) if moods else None
            con.execute("insert into agent_states values ('r', ?, ?, ?, ?, ?)",
                        (tick, who, status, mood, v if moods else None))
    con.executemany("insert into events values (?, 'r', ?, ?, null, ?, ?, ?, ?)", [
        (1, 0, "2023-02-13 07:00", "park", "place_event", "A market.", '{"fact": "market"}'),
        (2, 2, "2023-02-13 08:00", "bakery", "place_event", "A pipe bursts.", '{"minutes": 60}'),
        (3, 5, "2023-02-13 09:30", "bakery", "prop", "The oven is broken.", None)])
    con.executemany("insert into memories (run_id, tick, agent_id, source, event_id) values ('r', ?, ?, ?, ?)", [
        (2, "ann", "perceived", 2), (3, "ann", "perceived", 2), (3, "bob", "perceived", 2), (2, "fay", "perceived", 2),
        (2, "eve", "perceived", 2), (2, "cat", "heard", 2), (0, "ann", "perceived", 1), (5, "ann", "perceived", 3)])
    con.commit()
    return con


def test_a_happening_moves_the_valence_of_those_who_saw_it_against_the_others(tmp_path):
    from simulation.rundb.moods import mood_shifts

    shifts = mood_shifts(_shifts_run(tmp_path), "r")
    assert [m.key for m in shifts] == ["bakery_0800"], "tick 0 and a happening whose hour had not passed are out"
    pipe = shifts[0]
    assert pipe.saw == pytest.approx({"ann": -0.7, "bob": -0.4}), "each from the tick they first noticed it"
    assert pipe.first_moods == 1, "fay's first mood is not a shift"
    assert pipe.unseen == pytest.approx({"cat": 0.1}), \
        "hearing of it is not seeing it; the asleep, the crowd and those with no mood yet are out"
    assert pipe.gap == pytest.approx(-0.65)


def test_a_run_without_moods_has_no_mood_shifts(tmp_path):
    from simulation.rundb.moods import mood_shifts

    assert mood_shifts(_shifts_run(tmp_path, moods=False), "r") == []
