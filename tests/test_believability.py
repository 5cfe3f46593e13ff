"""The believability interview (Generative Agents, section 6.1): 25 questions in five categories per
agent, each answered from the memories Generative Agents' retrieval ranks first in the agent's own
run (read back from run.db), about the people the agent actually talked with."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from datetime import datetime

import numpy as np
import pytest

from simulation.evaluation import believability, engine, report
from simulation.evaluation.recall import Stream, recall, stream
from simulation.evaluation.session import EvalOptions
from simulation.evaluation.targets import resolve
from simulation.llm.types import LLMRequest
from simulation.testing import AnsweringBackend


class Recorder(AnsweringBackend):
    """Answers every interview question with its own purpose, and keeps the prompts."""

    name = "recorder"
    model_id = "recorder-v1"

    def __init__(self) -> None:
        self.asked: list[LLMRequest] = []

    def answer(self, req: LLMRequest) -> str:
        self.asked.append(req)
        return json.dumps({"answer": f"My answer to {req.purpose}."})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, flagship, embedder):
    from simulation import Simulation
    from simulation.testing import ScriptedBackend

    run = Simulation.from_scenario(flagship, backend=ScriptedBackend(), out=tmp_path_factory.mktemp("bel"), ticks=18,
                                   seed=2)
    for _ in range(18):
        run.model.step()
    run.close()
    return run.run_dir


def test_every_agent_answers_25_questions_from_its_own_run(run_dir):
    targets = resolve([run_dir])
    backend = Recorder()
    result = engine.evaluate(targets, backend, backend, EvalOptions(suites=("believability",)))
    assert len(backend.asked) == 25 * len(targets)
    purposes = Counter(r.purpose.rsplit("_", 1)[0] for r in backend.asked)
    assert set(purposes) == {f"bel_{c}" for c in believability.CATEGORIES}
    assert set(purposes.values()) == {5 * len(targets)}
    con = sqlite3.connect(run_dir / "run.db")
    own = {t.agent_id: {r[0] for r in con.execute("select text from memories where agent_id = ?", [t.agent_id])}
           for t in targets}
    for req in backend.asked:
        user = req.messages[-1]["content"]
        if "<memories>" not in user:
            continue
        shown = [line.split(") ", 1)[1] for line in user.split("<memories>")[1].split("</memories>")[0].splitlines()
                 if line.startswith("- (")]
        assert shown and len(shown) <= 8
        assert set(shown) <= own[req.agent_id.split("/")[1]], "only the agent's own memories"
    look = report.Lookup(result.metrics)
    key = targets[0].key
    assert look.value("believability", "failed", key) == 0
    qa = look.get("believability", "answered_memory", key).details["qa"]
    assert [x["answer"] for x in qa] == [f"My answer to bel_memory_{i}." for i in range(5)]
    assert "## Believability interview" in report.markdown(result, {})


def test_the_people_asked_about_come_from_the_persona_so_every_condition_hears_one_question(run_dir):
    con = sqlite3.connect(run_dir / "run.db")
    names = {a: json.loads(p)["name"] for a, p in con.execute("select agent_id, persona from agents")}
    for t in resolve([run_dir]):
        ids = list(t.persona.relationships)
        assert believability.others(t) == (names.get(ids[0]), names.get(ids[1] if len(ids) > 1 else ids[0]))


def test_the_stream_reads_the_stored_vectors_back(run_dir, embedder):
    targets = resolve([run_dir])
    t = targets[0]
    s = stream(t.run_db, t.run_id, t.agent_id, embedder.dimension())
    assert s.vectors is not None and len(s) == s.vectors.shape[0] > 0
    again = embedder.embed(s.texts[:5])
    assert np.allclose((s.vectors[:5] * again).sum(axis=1), 1.0, atol=2e-3), "float16 round trip of each text"


def test_retrieval_weighs_relevance_recency_and_importance():
    texts = ["an old, dull memory about the harbour", "breakfast", "lunch", "a fresh and vital memory"]
    vectors = np.eye(4, dtype=np.float32)
    s = Stream(np.arange(4), texts, ["2023-02-13 07:00", "2023-02-13 08:00", "2023-02-13 09:00", "2023-02-13 10:00"],
               np.array([1.0, 2.0, 2.0, 9.0]), np.array([30.0, 20.0, 10.0, 0.0]), vectors)
    about_the_harbour = np.array([1, 0, 0, 0], dtype=np.float32)
    top2 = recall(s, about_the_harbour, k=2)
    assert [m.split(") ", 1)[1] for m in top2] == [texts[0], texts[3]], "relevant first; fresh and vital next"
    assert top2[0].startswith(f"({datetime(2023, 2, 13, 7):%a %H:%M})")
    no_vectors = Stream(s.ids, texts, s.times, s.importance, s.hours_since_access, None)
    assert [m.split(") ", 1)[1] for m in recall(no_vectors, about_the_harbour, k=1)] == [texts[3]]


def test_a_persona_file_answers_from_its_seed_memories_alone():
    from pathlib import Path

    targets = resolve([Path(__file__).resolve().parents[1] / "personas" / "walter_hughes.yaml"])
    backend = Recorder()
    engine.evaluate(targets, backend, backend, EvalOptions(suites=("believability",)))
    assert len(backend.asked) == 25
    assert all("<memories>" not in r.messages[-1]["content"] for r in backend.asked)
    assert any("Who is" in r.messages[-1]["content"] for r in backend.asked)
