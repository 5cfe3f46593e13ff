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
    moods = {}
    for on in (True, False):
        sc = flagship.scenario.model_copy(deep=True)
        sc.cognition = sc.cognition.model_copy(update={"moods": on})
        run = step_run(make_run(scripted, ticks=6, loaded=flagship.model_copy(update={"scenario": sc})))
        run.close()
        con = connect_ro(run.run_dir / "run.db")
        moods[on] = con.execute("select tick, agent_id, mood, valence, arousal from agent_states where mood is not "
                                "null order by tick, agent_id").fetchall()
        con.close()
    assert moods[False] == []
    assert moods[True], "someone heard or saw something in the first hour"
    assert {m for _, _, m, _, _ in moods[True]} <= set(MOODS)
    assert all(-1 <= v <= 1 and -1 <= a <= 1 for _, _, _, v, a in moods[True])
