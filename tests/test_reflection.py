"""Reflection: the importance trigger, questions from recent memories, insights citing evidence ids."""

from __future__ import annotations

import json

import pytest
from conftest import step_run, with_settings
from scripted import ScriptedBackend

from simulation.core import Provenance, Source


@pytest.fixture(scope="module")
def reflective_run(tmp_path_factory, flagship, embedder):
    """Low threshold: agents reflect several times in two game hours."""
    from simulation import Simulation

    loaded = with_settings(flagship, memory={"reflection_threshold": 25})
    run = Simulation.from_scenario(loaded, backend=ScriptedBackend(), out=tmp_path_factory.mktemp("runs"), ticks=12)
    return step_run(run)


def test_reflections_cite_evidence_of_their_own_agent_with_depth(reflective_run):
    db = reflective_run.store.db
    memories = {r["id"]: r for r in db.query("select * from memories")}
    reflections = [r for r in memories.values() if r["kind"] == "reflection"]
    assert reflections
    for r in reflections:
        evidence = json.loads(r["evidence"])
        assert evidence and all(memories[i]["agent_id"] == r["agent_id"] for i in evidence)
        assert all(i < r["id"] for i in evidence), "evidence is what the agent already remembered"
        assert r["depth"] == 1 + max(memories[i]["depth"] for i in evidence)
        assert r["importance"] is None or 1 <= r["importance"] <= 10


def test_evidence_comes_from_the_retrieval_for_its_question(reflective_run):
    db = reflective_run.store.db
    reflections = list(db.query("select * from memories where kind = 'reflection' order by id"))
    for r in reflections:
        retrieved = set()
        for row in db.query("select results from retrievals where purpose = 'reflection' and agent_id = ? "
                            "and tick = ?", [r["agent_id"], r["tick"]]):
            retrieved |= {x["memory_id"] for x in json.loads(row["results"])}
        assert set(json.loads(r["evidence"])) <= retrieved


def test_one_reflection_is_three_questions_then_one_insight_batch(reflective_run):
    db = reflective_run.store.db
    questions = list(db.query("select agent_id, tick, completion from llm_calls where purpose = 'questions'"))
    assert questions
    for q in questions:
        assert len(json.loads(q["completion"])["questions"]) == 3
        insights = db.execute("select count(*) from llm_calls where purpose = 'insights' and agent_id = ? and "
                              "tick = ?", [q["agent_id"], q["tick"]]).fetchone()[0]
        assert insights == 3, "one insight question per salient question"
        queries = db.execute("select count(*) from retrievals where purpose = 'reflection' and agent_id = ? and "
                             "tick = ?", [q["agent_id"], q["tick"]]).fetchone()[0]
        assert queries == 3
    events = db.execute("select count(*) from events where kind = 'reflection'").fetchone()[0]
    assert events >= 1


def test_the_trigger_is_the_importance_since_the_last_reflection(make_run, flagship, monkeypatch):
    from simulation.cognition import reflect as reflection

    seen = []
    real = reflection.reflect

    async def recording(me, mind):
        before = mind.memories(me.id).since_reflection
        made = await real(me, mind)
        seen.append((me.id, before, mind.memories(me.id).since_reflection, made))
        return made

    monkeypatch.setattr(reflection, "reflect", recording)
    run = step_run(make_run(ScriptedBackend(), ticks=12, loaded=with_settings(flagship, memory={
        "reflection_threshold": 40})))
    assert seen, "agents reached the threshold and reflected"
    for _, before, after, made in seen:
        assert before >= 40
        assert after == 0, "reflecting restarts the count; its own insights do not count"
        assert made and all(n.kind == "reflection" for n in made)
    for agent in run.model.order:  # the count is the rated importance since the agent's last reflection
        stream = run.model.memory.stream(agent.agent_id)
        nodes = stream.nodes
        last = max((i for i, n in enumerate(nodes) if n.kind == "reflection"), default=-1)
        after = sum(n.importance for n in nodes[last + 1:]
                    if n.importance is not None and n.kind not in ("reflection", "summary"))
        assert stream.since_reflection == pytest.approx(after)


def test_no_reflection_below_the_threshold(make_run, flagship):
    backend = ScriptedBackend()
    run = step_run(make_run(backend, ticks=6, loaded=with_settings(flagship, memory={"reflection_threshold": 5000})))
    assert not [r for b in backend.batches for r in b if r.purpose in ("questions", "insights")]
    assert run.store.db.execute("select count(*) from memories where kind = 'reflection'").fetchone()[0] == 0


def test_questions_come_from_at_most_the_100_most_recent_memories_that_fit(make_run, scripted):
    from simulation.cognition.reflect import recent_for_questions

    run = make_run(scripted, ticks=1)
    agent = run.model.people["isabella_rodriguez"]
    for i in range(150):
        run.model.memory.add(agent.agent_id, "observation", f"Isabella notes thing number {i}",
                             Provenance(Source.PERCEIVED), importance=2)
    chosen = recent_for_questions(run.model.memory.stream(agent.agent_id).nodes, run.model.scenario.llm.context_tokens)
    assert 0 < len(chosen) <= 100
    assert chosen[-1].text == "Isabella notes thing number 149", "the newest are kept"
    assert [n.id for n in chosen] == sorted(n.id for n in chosen)
    assert sum(len(n.text) for n in chosen) <= run.model.scenario.llm.context_tokens * 4
