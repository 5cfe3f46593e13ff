"""Retrieval: scoring against hand-computed examples, recency the right way round, per-agent
filtering, one embedding call and one FAISS call per phase, last-access updates, the log."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from simulation.llm import batching
from simulation.memory import TownMemory
from simulation.memory.scoring import Weights, minmax, score
from simulation.scenario import MemorySettings, RetrievalWeights
from simulation.scenario.settings import REFERENCE_CODE_WEIGHTS

START = datetime(2023, 2, 13, 7, 0)


def test_score_matches_a_hand_computed_example():
    # three memories last accessed 0, 10 and 100 game hours ago
    hours = np.array([[0.0, 10.0, 100.0]])
    importance = np.array([[1.0, 10.0, 4.0]])
    relevance = np.array([[0.2, 0.5, 0.8]])
    valid = np.ones((1, 3), bool)
    s = score(relevance, importance, hours, np.array([[1, 2, 3]]), valid, Weights(), decay=0.995)
    # recency 0.995**h = 1, 0.951110, 0.605770 -> min-max 1, 0.875980, 0
    assert s.recency[0] == pytest.approx([1.0, 0.875980, 0.0], abs=1e-5)
    assert s.importance[0] == pytest.approx([0.0, 1.0, 1 / 3])
    assert s.relevance[0] == pytest.approx([0.0, 0.5, 1.0])
    assert s.score[0] == pytest.approx([1.0, 2.375980, 4 / 3], abs=1e-5)
    assert s.order[0].tolist() == [1, 2, 0]
    # weights scale each normalised component
    w = score(relevance, importance, hours, np.array([[1, 2, 3]]), valid, Weights(0.5, 2.0, 3.0))
    assert w.score[0] == pytest.approx([0.5, 0.5 * 0.875980 + 2 + 1.5, 2 / 3 + 3], abs=1e-5)


def test_recency_favours_the_recently_accessed_not_the_oldest():
    """The reference code ranked the oldest memories freshest; here fresh beats stale."""
    hours = np.array([[200.0, 1.0, 50.0]])  # hours since last access
    flat = np.zeros((1, 3))
    s = score(flat, flat, hours, np.array([[10, 11, 12]]), np.ones((1, 3), bool), Weights(1, 0, 0))
    assert s.order[0].tolist() == [1, 2, 0]
    assert s.recency[0, 1] == 1.0 and s.recency[0, 0] == 0.0


def test_minmax_handles_padding_and_flat_rows():
    values = np.array([[3.0, 3.0, 99.0], [1.0, 5.0, 3.0], [7.0, 0.0, 0.0]])
    valid = np.array([[True, True, False], [True, True, True], [True, False, False]])
    out = minmax(values, valid)
    assert out[0].tolist() == [0.5, 0.5, 0.0], "equal values score 0.5; padding scores 0"
    assert out[1].tolist() == [0.0, 1.0, 0.5]
    assert out[2].tolist() == [0.5, 0.0, 0.0]


def test_ties_go_to_the_lower_id():
    flat = np.zeros((1, 4))
    s = score(flat, flat, flat, np.array([[40, 7, 19, 8]]), np.ones((1, 4), bool))
    assert s.order[0].tolist() == [1, 3, 2, 0]


def test_each_query_of_a_batch_can_weigh_its_candidates_its_own_way():
    rng = np.random.default_rng(3)
    relevance, importance, hours = rng.random((2, 5)), rng.random((2, 5)) * 9, rng.random((2, 5)) * 30
    ids, valid = np.arange(10).reshape(2, 5), np.ones((2, 5), bool)
    mine = [Weights(1, 1, 1), Weights(0.5, 2, 3)]
    both = score(relevance, importance, hours, ids, valid, mine, k=5)
    for row, weights in enumerate(mine):
        alone = score(relevance[row:row + 1], importance[row:row + 1], hours[row:row + 1], ids[row:row + 1],
                      valid[row:row + 1], weights, k=5)
        assert both.score[row] == pytest.approx(alone.score[0])
        assert both.order[row].tolist() == alone.order[0].tolist()
    with pytest.raises(ValueError, match="1 weights for 2 queries"):
        score(relevance, importance, hours, ids, valid, mine[:1])


def _memory(embedder, **settings) -> TownMemory:
    return TownMemory(MemorySettings(**settings), epoch=START, embedder=embedder)


def test_recency_ordering_through_the_index(embedder):
    mem = _memory(embedder, retrieval_weights=RetrievalWeights(recency=1, importance=1, relevance=1))
    for hour in (0, 5, 10):  # the same text, importance and relevance; only the time differs
        mem.set_time(0, START + timedelta(hours=hour))
        mem.add("ann", "observation", "Ann waters the roses in the garden", importance=4)
    mem.set_time(0, START + timedelta(hours=12))
    got = mem.search("ann", "roses", k=3)
    assert [n.created.hour for n in got] == [17, 12, 7], "newest first: recency decays with hours since access"
    assert all(n.last_accessed == START + timedelta(hours=12) for n in got), "retrieval touches what it returns"


def test_retrieval_updates_last_access_and_that_changes_recency(embedder):
    mem = _memory(embedder, top_k=1, retrieval_weights=RetrievalWeights(recency=1, importance=0, relevance=0))
    old = mem.add("ann", "observation", "Ann bakes bread", importance=2)
    mem.set_time(1, START + timedelta(hours=1))
    new = mem.add("ann", "observation", "Ann reads a novel", importance=2)
    mem.set_time(2, START + timedelta(hours=2))
    assert mem.search("ann", "anything") == [new]
    # touch the old one (as a retrieval would), later: now it is the freshest
    mem.set_time(3, START + timedelta(hours=3))
    mem.touch([old])
    mem.set_time(4, START + timedelta(hours=4))
    assert mem.search("ann", "anything") == [old]
    assert mem.index.accessed[old.row] == pytest.approx(4.0), "the FAISS-side column follows the node"


def test_relevance_importance_and_per_agent_filtering(embedder):
    mem = _memory(embedder, top_k=2)
    a1 = mem.add("ann", "observation", "The Valentine's Day party is at Hobbs Cafe on Tuesday", importance=5)
    mem.add("ann", "observation", "Ann fixed the leaking tap in the kitchen", importance=5)
    b1 = mem.add("bob", "observation", "Bob heard about a Valentine's party", importance=5)
    mem.add("bob", "observation", "Bob mowed the lawn", importance=9)
    got_a = mem.search("ann", "Is there a party?", k=1)
    got_b = mem.search("bob", "Is there a party?", k=2)
    assert got_a == [a1]
    assert {n.agent_id for n in got_b} == {"bob"}, "an agent only ever retrieves its own memories"
    assert b1 in got_b


def test_a_phase_of_queries_is_one_embedding_call_and_one_faiss_call(embedder):
    mem = _memory(embedder, top_k=3)
    agents = [f"agent{i}" for i in range(6)]
    for i, agent in enumerate(agents):
        for j in range(5):
            mem.add(agent, "observation", f"{agent} memory {j} about topic {i * 5 + j}", importance=1 + j)
    mem.flush_rows()
    encodes, searches = embedder.encode_calls, mem.index.search_calls
    for agent in agents:  # new memories, not embedded yet: they join the phase's single embedding call
        mem.add(agent, "thought", f"{agent} wonders about the party tonight")

    async def phase():
        return await asyncio.gather(*(mem.retrieve(a, f"what does {a} think about the party {i}?", "test")
                                      for i, a in enumerate(agents)))

    results = batching.run(phase())
    assert mem.index.search_calls == searches + 1
    assert embedder.encode_calls == encodes + 1
    assert mem.stats.batches == 1 and mem.stats.queries == len(agents)
    for agent, got in zip(agents, results):
        assert len(got) == 3 and all(n.agent_id == agent for n in got)
        assert got[0].kind == "thought", "the new memory about the party is the most relevant and newest"


def test_excluded_ids_are_not_candidates(embedder):
    mem = _memory(embedder)
    nodes = [mem.add("ann", "observation", f"note {i}", importance=3) for i in range(4)]

    async def one():
        return await mem.retrieve("ann", "note", "test", exclude={nodes[0].id, nodes[2].id})

    assert {n.id for n in batching.run(one())} == {nodes[1].id, nodes[3].id}


def test_recent_retrieval_shows_the_newest_whatever_the_question(embedder):
    """``memory.retrieval: recent``, the "no retrieval" ablation: the k newest of the person's own
    memories, newest first, none embedded for the question, none touched, the excluded left out."""
    mem = _memory(embedder, top_k=2, retrieval="recent")
    party = mem.add("ann", "observation", "The Valentine's Day party is at Hobbs Cafe on Tuesday", importance=9)
    mem.set_time(1, START + timedelta(hours=1))
    tap = mem.add("ann", "observation", "Ann fixed the leaking tap in the kitchen", importance=1)
    mem.add("bob", "observation", "Bob mowed the lawn", importance=5)
    mem.set_time(2, START + timedelta(hours=2))
    bread = mem.add("ann", "observation", "Ann bakes bread", importance=1)
    encodes = embedder.encode_calls

    async def one(exclude=()):
        return await mem.retrieve("ann", "Is there a party?", "test", exclude=exclude)

    assert batching.run(one()) == [bread, tap], "the party is the most relevant and important, but oldest"
    assert batching.run(one(exclude={bread.id})) == [tap, party]
    assert embedder.encode_calls == encodes and tap.last_accessed == START + timedelta(hours=1)


def test_retrievals_are_logged_with_their_scores(make_run, scripted):
    from conftest import step_run

    run = step_run(make_run(scripted, ticks=3))
    rows = list(run.store.db.query("select * from retrievals order by id"))
    assert rows
    assert set(rows[0]) == {"id", "run_id", "tick", "sim_time", "agent_id", "purpose", "query", "results"}
    purposes = {r["purpose"] for r in rows}
    assert {"plan", "react"} <= purposes
    memories = {r["id"]: r for r in run.store.db.query("select id, agent_id, last_accessed from memories")}
    for row in rows:
        results = json.loads(row["results"])
        assert results and len(results) <= run.model.scenario.memory.top_k
        for r in results:
            assert set(r) == {"memory_id", "score", "recency", "importance", "relevance"}
            assert memories[r["memory_id"]]["agent_id"] == row["agent_id"]
            assert r["score"] == pytest.approx(r["recency"] + r["importance"] + r["relevance"], abs=2e-4)
            assert memories[r["memory_id"]]["last_accessed"] >= row["sim_time"], "run.db has the last access"
        assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_a_question_waits_for_the_phases_retrievals_so_the_phase_is_one_llm_batch(make_run, scripted):
    """One agent asks straight away, the others retrieve first: the LLM still sees one batch."""
    from simulation.cognition import prompts
    from simulation.cognition.context import context, situation
    from simulation.cognition.schemas import ProbeAnswer

    run = make_run(scripted, ticks=1)
    m = run.model
    first, *others = m.order[:4]

    async def question(agent, retrieve: bool):
        me = agent.state
        ctx = await context(me, m.mind, "the party", "probe") if retrieve else situation(me, m.mind)
        msgs = prompts.messages(me.system_prompt, "probe.j2", **ctx, question="Any news?", news=True)
        return await m.mind.ask(me, msgs, ProbeAnswer, default=ProbeAnswer(answer="-"), purpose="probe0",
                                max_tokens=20)

    async def phase():
        return await asyncio.gather(question(first, False), *(question(a, True) for a in others))

    answers = m.loop.run_until_complete(phase())
    assert all(a.ok for a in answers)
    assert len(scripted.batches) == 1 and len(scripted.batches[0]) == 4
    assert m.memory.stats.batches == 1 and m.memory.stats.queries == 3


def test_the_gpu_path_ranks_as_the_subset_search_does(monkeypatch):
    """Every query against every vector, then each query's candidates picked out: the path a GPU
    takes (``pairwise_distance_gpu``), run here with FAISS's CPU ``pairwise_distances``."""
    from simulation.memory.index import MemoryIndex, index_device

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    agents = [f"a{i % 7}" for i in range(300)]
    queries = rng.standard_normal((5, 16)).astype(np.float32)
    asked = ["a0", "a3", "a3", "a6", "nobody"]
    exclude = [frozenset(), frozenset({3, 10}), frozenset(), frozenset({6}), frozenset()]
    results = {}
    for device in ("cpu", "pairwise"):
        index = MemoryIndex(16, device=device)
        index.add(agents, list(range(300)), vectors, [5.0] * 300, [float(i % 11) for i in range(300)])
        results[device] = index.search(queries, asked, 12.0, k=8, exclude=exclude)
    for a, b in zip(results["cpu"], results["pairwise"], strict=True):
        assert list(a.ids) == list(b.ids)
        assert np.allclose(a.relevance, b.relevance, atol=1e-6)
    monkeypatch.setenv("AGORA_INDEX_DEVICE", "pairwise")
    assert index_device() == "pairwise"
    monkeypatch.setenv("AGORA_INDEX_DEVICE", "auto")
    assert index_device() == "cpu", "no GPU here"
    from simulation.errors import RunError

    monkeypatch.setenv("AGORA_INDEX_DEVICE", "gpu")
    with pytest.raises(RunError, match="GPU build"):
        index_device()
    monkeypatch.setenv("AGORA_INDEX_DEVICE", "moon")
    with pytest.raises(RunError, match="expected one of"):
        index_device()


def test_a_probe_ranks_relevance_first_so_news_heard_hours_ago_and_rated_low_comes_back(embedder):
    """Issue 33, step 8: the 1.5B rated the chat that carried the party 2 of 10, five hours went
    by, and the paper's weights (1, 1, 1) left it out of the probe's memories; the reference
    code's, set as ``memory.probe_weights``, bring it back, and only for the probe."""
    question = "Do you know of a Valentine's Day party? Where and when?"

    def stream() -> tuple[TownMemory, object]:  # Margaret's of seed 3, in short
        mem = _memory(embedder, top_k=4, probe_weights=RetrievalWeights(**REFERENCE_CODE_WEIGHTS))
        heard = mem.add("ann", "utterance", 'Dan said to Ann: "The Valentine\'s Day party is at Hobbs Cafe on '
                        'Tuesday at five"', importance=2)
        for hour, (text, importance) in enumerate([
                ("Ann is looking for Bea at the library", 5.5), ("Bea is shelving books at the library", 2),
                ("A farmers' market fills the park with stalls", 5.5), ("Plan for Monday: a walk, the library, "
                "lunch at home, tea at the cafe", 6.8), ("Ann is looking for Cy at the studio", 5.5),
                ("Ann collects her pills at the pharmacy", 2)], start=1):
            mem.set_time(hour, START + timedelta(hours=hour))
            mem.add("ann", "observation", text, importance=importance)
        mem.set_time(7, START + timedelta(hours=7))
        return mem, heard
    mem, heard = stream()
    assert heard not in mem.search("ann", question, purpose="converse")
    mem, heard = stream()
    assert heard in mem.search("ann", question, purpose="probe")


def test_familiarity_is_how_like_the_question_the_closest_memory_is(embedder):
    mem = _memory(embedder)
    assert mem.familiarity("ann", "Do you know of a party?") == -1.0, "nobody remembers anything yet"
    heard = ('Dan Oak said to Ann Lee: "Isabella said: I want to throw a Valentine\'s Day party at Hobbs Cafe on '
             'February 14, from 5pm to 7pm, and invite as many people as possible."')  # seed 3 of step 7
    mem.add("ann", "utterance", heard)
    mem.add("ann", "observation", "Ann waters the roses")
    mem.add("bob", "observation", "Bob reads a book of love poems for the library's February display")
    mem.add("bob", "observation", "Bob waters the roses")
    question = "Do you know of a Valentine's Day party? Where and when?"
    ann, bob = mem.familiarity("ann", question), mem.familiarity("bob", question)
    vectors = embedder.embed([question, heard])
    assert ann == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-3), "the cosine of the closest memory"
    assert ann > 0.46 > bob, "one who heard of it recognises the question; one with only poems does not"


def test_a_recognised_question_brings_back_only_the_memories_like_it_most_like_first(embedder):
    mem = _memory(embedder, top_k=2)
    question = "Do you know of a Valentine's Day party? Where and when?"
    told = mem.add("ann", "utterance", 'Dan Oak said to Ann Lee: "Isabella is throwing a Valentine\'s Day party at '
                   'Hobbs Cafe on February 14, from 5pm to 7pm."')
    again = mem.add("ann", "utterance", 'Ann Lee said to Cy Moss: "I want to throw a Valentine\'s Day party at Hobbs '
                    'Cafe on February 14, from 5pm to 7pm, and invite as many people as possible."')  # seed 1, step 8
    plan = mem.add("ann", "plan", "Plan for Monday: 07:00 coffee at the cafe; 09:00 work at the pharmacy")
    mem.add("ann", "observation", "Ann waters the roses")
    mem.add("bob", "observation", "Bob waters the roses")
    vectors = embedder.embed([question, told.text, again.text, plan.text])
    cos = {n.id: float(vectors[0] @ v) for n, v in zip((told, again, plan), vectors[1:])}
    assert min(cos[told.id], cos[again.id]) > 0.46 > cos[plan.id], "the premise: two lines carry the news"

    mem.set_time(1, START + timedelta(hours=1))
    got = mem.recognised("ann", question, 0.46, "probe")
    assert {n.id for n in got} == {told.id, again.id}, "the lines that carry it, not the plan or the roses"
    assert got == sorted(got, key=lambda n: -cos[n.id]), "the most like the question first"
    assert mem.recognised("ann", question, 0.46, "probe", k=1) == got[:1]
    assert mem.recognised("bob", question, 0.46, "probe") == [], "nothing familiar: nothing comes back"
    assert mem.recognised("cy", question, 0.46, "probe") == [], "no memories at all"
    assert all(n.last_accessed == START + timedelta(hours=1) for n in got), "touched as a retrieval is"
    assert plan.last_accessed == START, "what did not come back is not touched"


def test_the_backstory_similarity_is_how_like_the_question_what_the_town_knew_before_the_day_is(embedder):
    mem = _memory(embedder)
    question = "Do you know of a Valentine's Day party? Where and when?"
    assert mem.backstory_similarity(question) == 0.0, "no seeded memories: nothing to rise above but unrelated text"
    seeds = [f"Ann{i} waters the roses in the garden" for i in range(9)] + ["Bob has never had a Valentine's date"]
    for i, text in enumerate(seeds):
        mem.add("ann" if i % 2 else "bob", "seed", text)
    mem.add("ann", "utterance", 'Dan Oak said to Ann Lee: "I want to throw a Valentine\'s Day party at Hobbs Cafe."')
    vectors = embedder.embed([question] + seeds)
    cos = vectors[1:] @ vectors[0]
    assert mem.backstory_similarity(question) == pytest.approx(float(np.percentile(cos, 90)), abs=1e-3), \
        "the 90th percentile over everyone's seeded memories, not the news heard since"
    assert mem.backstory_similarity(question) < float(cos.max()), "one backstory line about Valentine's does not set it"


def test_a_memory_is_cut_into_sentences_a_frame_its_own_and_short_pieces_left_out():
    from simulation.memory.sentences import sentences

    line = ('Daniel Okafor said to Grace Okafor: "Hi Grace! I was thinking of throwing a Valentine\'s Day party '
            'at Hobbs Cafe. Coming?"')
    assert sentences(line) == ["Daniel Okafor said to Grace Okafor:",
                               "I was thinking of throwing a Valentine's Day party at Hobbs Cafe."], \
        "the frame is one, 'Hi Grace!' and 'Coming?' are too short to recognise news by"
    assert sentences("Ann waters the roses") == ["Ann waters the roses"]
    assert sentences("Yes.") == ["Yes."], "nothing long enough: the whole text"


def test_recognition_by_sentence_finds_the_news_a_long_line_dilutes(embedder):
    """A line whose one sentence names the party, among others, is less like the question whole than
    that sentence is; by sentence it is recognised, and the backstory is read the same way."""
    mem = _memory(embedder, top_k=2)
    question = "Do you know of a Valentine's Day party? Where and when?"
    told = mem.add("ann", "utterance", 'Dan Oak said to Ann Lee: "Good morning, Ann, the roses in the square look '
                   'lovely after all that rain this week. Isabella is throwing a Valentine\'s Day party at Hobbs '
                   'Cafe. My brother has been fixing the old fence behind the library since Saturday."')
    mem.add("ann", "observation", "Ann waters the roses")
    for i in range(10):
        mem.add("bob", "seed", f"Bob{i} mends the fence behind the library after the rain")
    q, whole, part = embedder.embed([question, told.text,
                                     "Isabella is throwing a Valentine's Day party at Hobbs Cafe."])
    assert float(part @ q) > float(whole @ q) + 0.05, "the premise: the rest of the line dilutes the news"
    mem.set_time(1, START + timedelta(hours=1))
    bar = (float(whole @ q) + float(part @ q)) / 2
    assert mem.recognised("ann", question, bar, "probe") == []
    assert mem.recognised("ann", question, bar, "probe", by_sentence=True) == [told]
    assert mem.familiarity("ann", question, by_sentence=True) == pytest.approx(float(part @ q), abs=1e-3)
    seeds = embedder.embed([f"Bob{i} mends the fence behind the library after the rain" for i in range(10)])
    assert mem.backstory_similarity(question, by_sentence=True) == pytest.approx(
        float(np.percentile(seeds @ q, 90)), abs=1e-3), "one-sentence seeds: the same as whole"
