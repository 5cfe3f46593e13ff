"""The social graph: seeded from personas, updated by both sides' recaps, recorded per tick in run.db."""

from __future__ import annotations

import json

import pytest
from conftest import step_run

from simulation.llm.types import asked
from simulation.testing import ScriptedBackend
from simulation.world.relationships import SocialGraph, density_by_tick


def test_graph_counts_conversations_and_keeps_each_sides_view():
    g = SocialGraph(["ann", "bob", "cat"])
    g.seed("ann", "bob", "My cousin.")
    g.seed("ann", "nobody", "Not in this town.")  # people outside the run are ignored
    assert g.density() == pytest.approx(1 / 3)
    assert [r["other_id"] for r in g.changed_rows()] == ["bob"]
    assert g.changed_rows() == [], "rows are handed out once"
    g.after_conversation("ann", "bob", 0.4, "Funny, and knows about the party.")
    g.after_conversation("bob", "ann", 7.0, "")  # out of range: clamped; empty view: keep the old one (none)
    g.after_conversation("ann", "bob", -0.2, "Got grumpy today.")
    ann, bob = g.tie("ann", "bob"), g.tie("bob", "ann")
    assert (ann.conversations, ann.sentiment, ann.view) == (2, -0.2, "Got grumpy today.")
    assert (bob.conversations, bob.sentiment) == (1, 1.0)
    rows = g.changed_rows()
    assert {(r["agent_id"], r["other_id"], r["conversations"]) for r in rows} == {("ann", "bob", 2), ("bob", "ann", 1)}
    g.after_conversation("cat", "bob", 0.0, "New neighbour.")
    assert g.density() == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def talkative_run(tmp_path_factory, flagship, embedder):
    from simulation import Simulation

    run = Simulation.from_scenario(flagship, backend=ScriptedBackend(end_after=3), out=tmp_path_factory.mktemp("runs"), ticks=24)
    return step_run(run)


def test_relationship_rows_follow_conversations(talkative_run):
    db = talkative_run.store.db
    rows = list(db.query("select * from relationships order by tick, agent_id, other_id"))
    assert set(rows[0]) == {"run_id", "tick", "sim_time", "agent_id", "other_id", "conversations", "sentiment", "view"}
    seeded = [r for r in rows if r["tick"] == 0 and r["conversations"] == 0]
    people = talkative_run.model.people
    expected = {(a, o) for a, p in people.items() for o in p.state.persona.relationships if o in people}
    assert {(r["agent_id"], r["other_id"]) for r in seeded} == expected
    convs = list(db.query("select * from conversations where ended_tick is not null"))
    assert convs
    for conv in convs:
        a, b = json.loads(conv["participants"])
        for me, other in ((a, b), (b, a)):
            after = db.execute("select conversations, sentiment, view from relationships where agent_id = ? and "
                               "other_id = ? and tick = ?", [me, other, conv["ended_tick"]]).fetchone()
            assert after is not None, "each side's view changes at the tick the conversation ended"
            assert after[0] >= 1 and -1 <= after[1] <= 1 and after[2]
            summary = db.execute("select importance from memories where agent_id = ? and kind = 'conversation' "
                                 "and tick = ?", [me, conv["ended_tick"]]).fetchone()
            assert summary is not None and summary[0] == 6, "the recap's rating"
    rated = db.execute("select distinct importance from memories where kind = 'utterance' "
                       "and importance is not null").fetchall()
    assert rated == [(6.0,)], "utterances take their conversation's importance at the recap"


def test_graph_state_matches_run_db_and_density_never_falls(talkative_run):
    db, m = talkative_run.store.db, talkative_run.model
    latest = {(r["agent_id"], r["other_id"]): r for r in db.query("select * from relationships order by tick")}
    assert set(latest) == set(m.social.graph.edges)
    for (a, b), row in latest.items():
        tie = m.social.tie(a, b)
        assert (row["conversations"], row["view"]) == (tie.conversations, tie.view)
    series = density_by_tick(db, talkative_run.run_id)
    assert len(series) == talkative_run.ticks
    values = [d for _, _, d in series]
    assert values == sorted(values)
    assert values[-1] == pytest.approx(m.social.density())


def test_utterances_are_conditioned_on_memories_of_the_partner_and_the_view(talkative_run):
    db = talkative_run.store.db
    rows = list(db.query("select * from retrievals where purpose = 'utterance'"))
    assert rows
    partners = {p.state.persona.name for p in talkative_run.model.people.values()}
    assert all(any(r["query"].startswith(name) for name in partners) for r in rows)
    call = db.execute("select messages from llm_calls where purpose = 'utterance' and tick > 0 "
                      "order by id desc limit 1").fetchone()[0]
    prompt = asked(json.loads(call))
    assert ("The conversation so far:" in prompt or "Nothing has been said yet" in prompt) and "remembers:" in prompt
