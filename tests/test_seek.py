"""Going to find someone to tell them news (cognition/seek.py): who is offered, that each pair is
asked about once, that a person who sets out walks to where the other usually is, that finding
them starts the conversation without a second question, and that ``cognition.seek: false`` asks
nothing."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from conftest import with_settings

from simulation.cognition.seek import TARGETS, targets, usual_place
from simulation.rundb.behaviour import behaviour
from simulation.testing import ScriptedBackend


def _run(make_run, ticks, **kw):
    run = make_run(ScriptedBackend(**kw), ticks=ticks)
    for _ in range(ticks):
        run.model.step()
    return run


def _rows(run, sql, params=()):
    return [dict(r) for r in run.store.db.query(sql, params)]


@pytest.fixture(scope="module")
def seeking(tmp_path_factory, flagship, embedder):
    """Nine game hours of the small flagship where everyone asked sets out (made once)."""
    from simulation import Simulation

    run = Simulation.from_scenario(flagship, backend=ScriptedBackend(seek=True), out=tmp_path_factory.mktemp("seek"),
                                   ticks=54, seed=3)
    for _ in range(54):
        run.model.step()
    return run


def test_a_person_who_sets_out_walks_to_where_the_other_usually_is(seeking):
    trips = _rows(seeking, "select tick, sim_time, agent_id, data from events where kind = 'seek' order by id")
    assert trips, "someone with news set out"
    people = seeking.model.people
    for trip in trips:
        data = json.loads(trip["data"])
        other = people[data["other"]].state
        when = datetime.strptime(trip["sim_time"][:16], "%Y-%m-%d %H:%M")
        assert data["place"] == usual_place(other, when.hour, seeking.model.mind.hub)
        call = _rows(seeking, "select purpose from llm_calls where id = ?", [data["llm_call_id"]])
        assert call == [{"purpose": "seek"}], "the trip is linked to the choice that made it"
        assert data["memory_id"] in people[trip["agent_id"]].state.news, "news the seeker holds"
        steps = _rows(seeking, "select items from schedules where agent_id = ? and tick = ? and level = 'steps'",
                      [trip["agent_id"], trip["tick"]])
        assert any(json.loads(s["items"])[0]["place"] == data["place"] for s in steps)


def test_each_person_and_piece_of_news_is_asked_about_once(seeking):
    for person in seeking.model.people.values():
        for other, news in person.state.offered.items():
            assert len(news) == len(set(news)), f"{person.state.id} was asked twice about {other}"
            assert other != person.state.id


def test_finding_them_starts_the_conversation_with_no_second_question(seeking):
    starts = {json.loads(r["data"])["llm_call_id"]: r for r in _rows(
        seeking, "select agent_id, data from events where kind = 'conversation_start'")}
    trips = [json.loads(r["data"]) | {"by": r["agent_id"]} for r in _rows(
        seeking, "select agent_id, data from events where kind = 'seek'")]
    found = [t for t in trips if t["llm_call_id"] in starts]
    assert found, "some seeker found whom they went to find"
    for t in found:
        start = starts[t["llm_call_id"]]
        assert start["agent_id"] == t["by"] and json.loads(start["data"])["with"] == t["other"]
    metrics = behaviour(seeking.store.db.conn, seeking.store.run_id)
    assert metrics["talk.seek_trips"] == len(trips)
    assert metrics["talk.seek_asked"] >= len(trips) and metrics["talk.seek_share"] == len(trips) / metrics["talk.seek_asked"]
    assert metrics["talk.seek_found"] >= len(found) / len(trips)
    assert metrics["llm.fallback_share.seek"] == 0


def test_someone_who_carries_on_is_not_asked_again_and_nobody_sets_out(make_run):
    run = _run(make_run, 36)  # the double carries on by default
    asked = _rows(run, "select id from llm_calls where purpose = 'seek'")
    assert asked and not _rows(run, "select id from events where kind = 'seek'")
    offered = sum(len(v) for p in run.model.people.values() for v in p.state.offered.values())
    assert offered == len(asked), "every question is about one (person, news) pair, each asked once"


def test_seek_false_asks_nothing(make_run, flagship):
    loaded = with_settings(flagship, cognition={"seek": False})
    run = make_run(ScriptedBackend(seek=True), ticks=24, loaded=loaded)
    for _ in range(24):
        run.model.step()
    assert not _rows(run, "select id from llm_calls where purpose = 'seek'")
    assert not _rows(run, "select id from events where kind = 'seek'")


def test_targets_are_known_awake_elsewhere_and_best_liked_first(seeking):
    mind = seeking.model.mind
    for agent in seeking.model.people.values():
        me = agent.state
        found = targets(me, mind)
        assert len(found) <= TARGETS
        for t in found:
            assert mind.tie(me.id, t.person) is not None and mind.person(t.person).awake_at(mind.now)
            assert t.place != me.place and mind.person(t.person).place != me.place
            assert t.news.id not in me.offered.get(t.person, [])
        assert [t.tie.sentiment for t in found] == sorted((t.tie.sentiment for t in found), reverse=True)
        if me.crowd:
            assert found == []
