"""The memory stream in run.db: embeddings, importance, last access, and rebuilding the index from run.db."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import step_run

from simulation.memory import TownMemory
from simulation.testing import ScriptedBackend


def test_embeddings_are_unit_vectors_cached_by_text(embedder):
    texts = ["Isabella plans a Valentine's Day party at Hobbs Cafe", "a party at the cafe on Valentine's Day",
             "Walter sharpens the chisels in his shed"]
    before = embedder.encode_calls
    v = embedder.embed(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.linalg.norm(v, axis=1) == pytest.approx(1.0, abs=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2, "similar sentences are closer than unrelated ones"
    calls = embedder.encode_calls
    assert calls <= before + 1
    again = embedder.embed(list(reversed(texts)))
    assert embedder.encode_calls == calls, "texts seen before cost no model call"
    assert np.array_equal(again[::-1], v)


def test_a_vector_does_not_depend_on_its_batch(embedder):
    """Bit for bit what the text gets alone, whatever it is batched with (padding would change the
    last bits; a resumed run in a fresh process must see the vectors the first process saw)."""
    from simulation.memory.embeddings import Embedder

    texts = ["Isabella is idle", "Klaus Mueller is talking with Maria about the Valentine's party at Hobbs Cafe",
             "A short one", "Tom is reading the newspaper at the Willows Market counter, slowly, as every day",
             "Isabella is serving coffee"]
    fresh = Embedder(embedder.folder)
    fresh._model = embedder._load()
    together = fresh.embed(texts)
    for i, text in enumerate(texts):
        fresh._cache.clear()
        assert np.array_equal(fresh.embed([text])[0], together[i]), text
    fresh._cache.clear()
    assert np.array_equal(fresh.embed(texts[::-1])[::-1], together)
    # texts of one length go to the model together: a BLAS may compute another number of rows
    # with other kernels (float32 results an ulp apart), which the float64 model rounds away
    same = [f"{name} is serving coffee at the counter" for name in ("Ann", "Bob", "Tom", "Sam", "Max", "Eve")]
    fresh._cache.clear()
    batched = fresh.embed(same)
    assert fresh.encode_calls and len({len(fresh._load().tokenizer(t)["input_ids"]) for t in same}) == 1
    for i, text in enumerate(same):
        fresh._cache.clear()
        assert np.array_equal(fresh.embed([text])[0], batched[i]), text


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory, flagship, embedder):
    from simulation import Simulation

    run = Simulation.from_scenario(flagship, backend=ScriptedBackend(), out=tmp_path_factory.mktemp("runs"), ticks=18)
    return step_run(run)


def test_every_memory_has_its_vector_and_current_state_in_run_db(scripted_run):
    run = scripted_run
    db, live = run.store.db, run.model.memory
    rows = {r["id"]: r for r in db.query("select * from memories")}
    assert set(rows) == set(live.nodes)
    vectors = {r["memory_id"]: r["vector"] for r in db.query("select * from embeddings")}
    first = {}
    for node_id in sorted(rows):
        first.setdefault(rows[node_id]["text"], node_id)
    assert set(vectors) == set(first.values()), "each distinct text's vector once, under its first memory"
    assert len(vectors) < len(rows), "texts repeat (people seen doing the same thing)"
    for node_id, node in live.nodes.items():
        row = rows[node_id]
        assert row["importance"] == node.importance
        assert row["last_accessed"] == node.last_accessed.strftime("%Y-%m-%d %H:%M")
        assert row["depth"] == node.depth
        stored = np.frombuffer(vectors[first[row["text"]]], dtype=np.float16).astype(np.float32)
        assert np.array_equal(stored, live.index.vectors(np.array([node.row]))[0])
    touched = [r for r in rows.values() if r["last_accessed"] > r["sim_time"]]
    assert touched, "retrieved memories have a later last access than their creation"


def test_seeing_someone_idle_is_rated_1_without_a_call(make_run, scripted):
    from simulation.core import Status
    from simulation.cognition.perceive import perceive

    run = make_run(scripted, ticks=1)
    m = run.model
    ann, bob = m.people["isabella_rodriguez"], m.people["theo_lindqvist"]
    for agent in (ann, bob):
        agent.state.status, agent.state.action = Status.IDLE, None
        agent.move_to("hobbs_cafe")
    perceive(ann.state, m.mind, [ann.state, bob.state], [])
    stream = m.memory.stream(ann.agent_id)
    seen = stream.nodes[-1]
    assert "looking around" in seen.text and seen.importance == 1
    assert seen not in stream.unrated


def test_the_llm_rates_the_rest(scripted_run):
    db = scripted_run.store.db
    assert db.execute("select count(*) from llm_calls where purpose = 'importance'").fetchone()[0] > 0
    # the scripted rater gives the party 8 and everything else 3
    assert db.execute("select importance from memories where kind = 'thought'").fetchone()[0] == 8
    prompts = [json.loads(r["messages"])[-1]["content"] for r in db.query(
        "select messages from llm_calls where purpose = 'importance'")]
    assert not any("looking around" in p for p in prompts), "trivial events are never sent to the LLM"
    usual = db.execute("select count(*) from memories where kind = 'observation' and importance = 2").fetchone()[0]
    assert usual > 0, "doing one's usual thing is mundane (importance 2) without a question"


def test_importance_questions_of_a_tick_share_one_batch(make_run):
    backend = ScriptedBackend()
    run = make_run(backend, ticks=6)
    for _ in range(6):
        before = len(backend.batches)
        run.model.step()
        batches = [b for b in backend.batches[before:] if any(r.purpose == "importance" for r in b)]
        assert len(batches) <= 1
        if batches:
            assert {r.purpose for r in batches[0]} == {"importance"}, "rated before anyone decides"


def test_rebuilding_from_run_db_gives_the_same_memory_and_retrievals(scripted_run, embedder):
    run = scripted_run
    live = run.model.memory
    sc = run.model.scenario
    rebuilt = TownMemory.from_db(run.store.db, run.run_id, sc.memory, epoch=sc.clock.start, embedder=embedder)
    assert set(rebuilt.nodes) == set(live.nodes)
    for node_id, node in live.nodes.items():
        other = rebuilt.nodes[node_id]
        assert (other.agent_id, other.kind, other.text, other.importance, other.evidence, other.depth,
                other.created, other.last_accessed) == (node.agent_id, node.kind, node.text, node.importance,
                                                        node.evidence, node.depth, node.created, node.last_accessed)
    assert len(rebuilt.index) == len(live.index)
    for agent_id, stream in live.streams.items():
        assert rebuilt.streams[agent_id].since_reflection == pytest.approx(stream.since_reflection)
    now = run.model.now
    for agent_id in ("isabella_rodriguez", "walter_hughes"):
        for query in ("the party at Hobbs Cafe", "what to do this morning"):
            live.set_time(run.model.tick, now)
            rebuilt.set_time(run.model.tick, now)
            assert [n.id for n in rebuilt.search(agent_id, query)] == [n.id for n in live.search(agent_id, query)]


def test_rebuild_re_embeds_memories_whose_vectors_are_missing(scripted_run, embedder, tmp_path):
    import sqlite_utils

    copy = tmp_path / "copy.db"
    scripted_run.store.db.execute("vacuum into ?", [str(copy)])
    db = sqlite_utils.Database(copy)
    db.execute("delete from embeddings where memory_id % 2 = 0")
    db.conn.commit()
    sc = scripted_run.model.scenario
    rebuilt = TownMemory.from_db(db, scripted_run.run_id, sc.memory, epoch=sc.clock.start, embedder=embedder)
    live = scripted_run.model.memory
    rows = np.array([n.row for n in sorted(live.nodes.values(), key=lambda n: n.id)])
    assert np.array_equal(rebuilt.index.vectors(rows), live.index.vectors(rows)), \
        "a memory re-embedded in another batch gets the vector it got first"


def test_stored_vectors_are_float16_and_older_float32_rows_still_read():
    from simulation.memory.town import stored_precision, stored_vector

    v = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    rounded = stored_precision(v[None])[0]
    assert np.array_equal(stored_vector(v.astype(np.float16).tobytes(), 384), rounded)
    assert np.array_equal(stored_vector(v.tobytes(), 384), v), "run.db files before schema 8 kept float32"
    assert np.array_equal(stored_precision(rounded[None])[0], rounded), "rounding twice changes nothing"
    assert abs(float(rounded @ v) - 1.0) < 1e-3
