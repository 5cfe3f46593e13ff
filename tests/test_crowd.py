"""The background crowd: people who follow their routine and ask the LLM only when something
reaches them (someone talks to them, an event where they are), beside named people with full
cognition (docs/cognition.md, "The background crowd")."""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

from simulation import scenario
from simulation.cognition.converse import crowd_move
from simulation.cognition.importance import reached
from simulation.core import Aim, Move, Provenance, Source
from simulation.memory.stream import MemoryNode
from simulation.rundb.behaviour import behaviour
from simulation.testing import ScriptedBackend

CROWD = ("daniel_okafor", "fiona_brennan", "grace_okafor", "walter_hughes")
TICKS = 12
"""07:00 to 09:00: waking plans, the morning's meetings and conversations."""
ASKED_OF_NAMED_ONLY = {"plan", "recap", "reflect_questions", "reflect_insights"}


@pytest.fixture(scope="module")
def crowd_run(tmp_path_factory, flagship, embedder):
    from simulation import Simulation

    people = [rp.model_copy(update={"crowd": rp.persona.id in CROWD}) for rp in flagship.people]
    loaded = flagship.model_copy(update={"people": people})
    with Simulation.from_scenario(loaded, backend=ScriptedBackend(), out=tmp_path_factory.mktemp("crowd"),
                                  ticks=TICKS, seed=4) as sim:
        sim.run()
    return sim.run_dir


def rows(run_dir, sql, params=()):
    con = sqlite3.connect(run_dir / "run.db")
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def test_the_crowd_is_recorded(crowd_run):
    assert {a for a, c in rows(crowd_run, "select agent_id, crowd from agents") if c} == set(CROWD)


def test_the_crowd_plans_and_lives_its_day_without_asking(crowd_run):
    purposes = Counter(p for a, p in rows(crowd_run, "select agent_id, purpose from llm_calls "
                                                     "where purpose not like 'probe%'") if a in CROWD)
    assert not set(purposes) & ASKED_OF_NAMED_ONLY, purposes
    planned = {a for (a,) in rows(crowd_run, "select agent_id from plans where ok = 1")}
    acted = {a for (a,) in rows(crowd_run, "select distinct agent_id from events where kind = 'action'")}
    assert set(CROWD) <= planned and set(CROWD) <= acted, "they follow their usual day"
    for (text,) in rows(crowd_run, "select text from memories where kind = 'plan' and agent_id = ?", (CROWD[0],)):
        assert text.startswith("Plan for ")


def test_named_people_talk_to_the_crowd_and_the_crowd_answers(crowd_run):
    lines = rows(crowd_run, "select speaker_id, aim from utterances")
    by_crowd = [aim for speaker, aim in lines if speaker in CROWD]
    assert by_crowd, "someone talked to a member of the crowd, who answered"
    opened = rows(crowd_run, "select u.speaker_id from utterances u where u.turn = 0")
    assert not {s for (s,) in opened} & set(CROWD), "the crowd does not start conversations"
    recaps = rows(crowd_run, "select agent_id from memories where kind = 'conversation'")
    assert {a for (a,) in recaps} & set(CROWD), "the crowd keeps what was said (the gist, no question)"


def test_calls_per_person_hour_are_reported_for_both_kinds(crowd_run):
    con = sqlite3.connect(crowd_run / "run.db")
    run_id = con.execute("select run_id from runs").fetchone()[0]
    metrics = behaviour(con, run_id)
    con.close()
    crowd, named = metrics["llm.calls_per_agent_hour.crowd"], metrics["llm.calls_per_agent_hour.named"]
    assert crowd is not None and named is not None
    assert crowd < named
    print(f"calls per person-hour: crowd {crowd:.2f}, named {named:.2f}")


def test_the_crowd_moves_without_asking_except_to_accept_an_invitation():
    end, share, reply = Move(Aim.END), Move(Aim.SHARE, "the fire"), Move(Aim.REPLY)
    assert crowd_move([reply, share, end]) is end
    assert crowd_move([reply, share]) is share
    assert crowd_move([Move(Aim.ANSWER, "plans")]).aim == Aim.ANSWER
    assert crowd_move([Move(Aim.ACCEPT), Move(Aim.DECLINE)]) is None, "whether to go is theirs to decide"


def test_only_what_reached_them_is_worth_a_question():
    from datetime import datetime

    def node(provenance):
        t = datetime(2023, 2, 13, 8)
        return MemoryNode(1, "ann", "observation", "x", 0, t, t, provenance=provenance)

    assert reached(node(Provenance(Source.PERCEIVED, event_id=3)))
    assert reached(node(Provenance(Source.WHISPERED)))
    assert reached(node(Provenance(Source.SEEDED, fact="party")))
    assert not reached(node(Provenance(Source.PERCEIVED, from_agent="bob")))
    assert not reached(node(Provenance(Source.DID)))


def test_a_scenario_marks_people_and_a_population_as_crowd(tmp_path):
    from conftest import SMALL

    text = SMALL.read_text()
    assert "  - file: ../personas/walter_hughes.yaml\n" in text
    text = text.replace("  - file: ../personas/walter_hughes.yaml\n",
                        "  - file: ../personas/walter_hughes.yaml\n    crowd: true\n")
    path = SMALL.parent / f".crowd-{tmp_path.name}.yaml"
    try:
        path.write_text(text)
        loaded = scenario.load(path)
    finally:
        path.unlink()
    crowd = {rp.persona.id for rp in loaded.people if rp.crowd}
    assert crowd == {"walter_hughes"}


@pytest.mark.parametrize("fail_at", [6, 14])
def test_a_crowd_run_interrupted_and_resumed_equals_the_uninterrupted_one(crowd_run, flagship, tmp_path, fail_at):
    """Who is in the crowd is who they are (built from the scenario, never stored or re-listed): after
    ``agora resume`` a crowd member is still one, and the run's rows are the uninterrupted run's."""
    from test_resume import FailingBackend, assert_same_run

    from simulation import Simulation
    from simulation.errors import RunError

    people = [rp.model_copy(update={"crowd": rp.persona.id in CROWD}) for rp in flagship.people]
    loaded = flagship.model_copy(update={"people": people})
    with pytest.raises(RunError):
        with Simulation.from_scenario(loaded, backend=FailingBackend(fail_at), out=tmp_path, ticks=TICKS,
                                      seed=4) as sim:
            sim.run()
    assert 0 < sim.model.tick < TICKS
    with Simulation.resume(sim.run_dir, backend=ScriptedBackend()) as resumed:
        assert {p.id for p in resumed.model.mind.people() if p.crowd} == set(CROWD)
        resumed.run()
    assert_same_run(crowd_run, sim.run_dir)
