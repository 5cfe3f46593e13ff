"""Reflection: the importance trigger, questions from recent memories, insights citing evidence ids."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from datetime import datetime

import pytest
from conftest import FLAGSHIP, MINIMAL, step_run, with_settings
from fake_mind import Asked, FakeMind

from simulation.agents import AgentState
from simulation.cognition import prompts
from simulation.cognition.reflect import (
    INSIGHTS_TOKENS, QUESTIONS_TOKENS, RECENT, most_that_fit, questions_messages,
    recent_for_questions, reflect, room,
)
from simulation.core import MemoryKind, Provenance, Purpose, Source
from simulation.llm import batching
from simulation.llm.backend import estimate_tokens
from simulation.testing import ScriptedBackend


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


# ---------------------------------------------------------------- prompts sized to the context window

MORNING = datetime(2023, 2, 13, 9, 0)
SEEN = Provenance(Source.PERCEIVED)


def fake_mind(window: int, tokens=estimate_tokens, **persona_state) -> FakeMind:
    from simulation.scenario import load

    rp = {rp.persona.id: rp for rp in load(MINIMAL).people}["ann"]
    ann = AgentState(id="ann", persona=rp.persona, home=rp.home, workplace=rp.workplace, place="cafe",
                     system_prompt=persona_state.pop("system_prompt", f"You are {rp.persona.name}. " * 20))
    mind = FakeMind({"ann": ann}, now=MORNING, tokens=tokens)
    mind.settings = dataclasses.replace(mind.settings, context_tokens=window)
    mind.notes.deciding = ["ann"]
    return mind


def remember(mind: FakeMind, n: int, text=lambda i: f"Ann notes thing number {i} at the cafe") -> None:
    for i in range(n):
        mind.remember("ann", MemoryKind.OBSERVATION, text(i), SEEN, importance=2)


def size(mind: FakeMind, messages, max_tokens: int) -> int:
    """What a question takes of the window: its prompt, its answer and the client's retry."""
    return mind.tokens(messages) + room(max_tokens)


def test_most_that_fit_is_the_largest_count_that_fits_asking_few_times():
    for n in (0, 1, 2, 7, 100):
        for limit in range(-1, n + 2):
            asked = []

            def fit(k):
                asked.append(k)
                return k <= limit

            assert most_that_fit(n, fit) == min(limit, n)
            assert len(asked) <= 2 + math.log2(n + 1)
    assert most_that_fit(5, lambda k: k <= 0, least=1) == 0, "nothing in least..n fits"


def test_the_questions_prompt_keeps_the_newest_memories_that_fit_the_window_exactly():
    mind = fake_mind(window=900)
    remember(mind, 150)
    me = mind.person("ann")
    nodes = mind.memories("ann").nodes
    chosen, messages = recent_for_questions(me, mind, nodes)
    k = len(chosen)
    assert 0 < k < RECENT, "a small window holds some of the 100 most recent, not all"
    assert chosen == nodes[-k:], "the newest, oldest first"
    assert messages == questions_messages(me, [n.text for n in chosen])
    assert messages[0]["content"] == me.system_prompt, "the real system prompt is counted"
    assert size(mind, messages, QUESTIONS_TOKENS) <= 900, "it fits"
    one_more = questions_messages(me, [n.text for n in nodes[-k - 1:]])
    assert size(mind, one_more, QUESTIONS_TOKENS) > 900, "and one memory more would not"
    assert mind.counted <= 2 + math.log2(RECENT + 1), "a binary search, not a count per memory"

    big = fake_mind(window=100_000)
    remember(big, 150)
    chosen, _ = recent_for_questions(big.person("ann"), big, big.memories("ann").nodes)
    assert chosen == big.memories("ann").nodes[-RECENT:], "at most the 100 most recent"
    assert big.counted == 1, "all fit: one count"


def test_every_reflection_question_asked_fits_the_window():
    """The insight questions too: their statements (best first) are cut to what fits."""
    window = 1200
    mind = fake_mind(window=window)
    remember(mind, 40, lambda i: f"Ann remembers a long story number {i}: " + "the bakery, the party, the rain. " * 12)
    mind.answers["questions"] = lambda schema, default: {"questions": ["What?", "Why?", "Who?"]}
    mind.answers["insights"] = lambda schema, default: {"insights": [{"insight": "Things matter.", "evidence": [1]}]}
    made = batching.run(reflect(mind.person("ann"), mind))
    asked = {a.purpose: a.messages for a in mind.asked}
    assert set(asked) == {"questions", "insights"} and made
    for a in mind.asked:
        max_tokens = QUESTIONS_TOKENS if a.purpose == "questions" else INSIGHTS_TOKENS
        assert size(mind, a.messages, max_tokens) <= window, a.purpose
    statements = re.findall(r"^\d+\. ", "".join(m["content"] for m in asked["insights"]), re.MULTILINE)
    assert 0 < len(statements) < 5, "of the five retrieved (FakeMind: the newest five), those that fit"


def test_a_persona_too_big_for_the_window_skips_reflecting_and_says_so():
    mind = fake_mind(window=700, system_prompt="You are Ann, who likes long walks. " * 60)
    remember(mind, 20)
    made = batching.run(reflect(mind.person("ann"), mind))
    assert made == [] and mind.asked == [], "no request the backend would refuse"
    (who, kind, text), = mind.recorded
    assert (who, kind) == ("ann", "reflection_skipped") and "context window of 700" in text
    assert mind.memories("ann").since_reflection == 0, "the counter restarts all the same"


def test_insight_questions_that_cannot_fit_one_statement_are_not_asked():
    mind = fake_mind(window=900)
    remember(mind, 3)
    mind.answers["questions"] = lambda schema, default: {"questions": ["What?", "Why?", "Who?"]}
    me = mind.person("ann")
    # questions fit; an insight question with any statement does not
    mind.tokens = lambda m: estimate_tokens(m) + (10_000 if any("Statements about" in x["content"] for x in m) else 0)
    made = batching.run(reflect(me, mind))
    assert made == [] and [a.purpose for a in mind.asked] == ["questions"]
    assert [r[1] for r in mind.recorded] == ["reflection_skipped"] * 3


# ---------------------------------------------------------------- counting tokens through the backends


class Counted:
    """A backend double that counts one token per character."""

    name = "counted"
    model_id = "c"

    def generate(self, requests, on_done=None):
        return []

    def count_tokens(self, messages):
        return sum(len(m["content"]) for m in messages)

    def close(self):
        pass


def test_the_client_counts_with_the_backend_through_its_wrappers(tmp_path):
    from simulation.llm.cache import CachedBackend, ReplayCache
    from simulation.llm.client import LLMClient
    from simulation.llm.lazy import LazyBackend

    messages = [{"role": "system", "content": "abc"}, {"role": "user", "content": "defg"}]
    assert LLMClient(Counted(), run_seed=1).count_tokens(messages) == 7
    started = []
    lazy = LazyBackend("counted", "c", lambda: started.append(1) or Counted())
    cached = CachedBackend(lazy, ReplayCache(tmp_path / "c.sqlite"))
    assert LLMClient(cached, run_seed=1).count_tokens(messages) == 7
    assert started == [1] and not lazy.started, "started to count (no counter without it), asked nothing"
    cached.close()
    assert LLMClient(ScriptedBackend(), run_seed=1).count_tokens(messages) == estimate_tokens(messages), \
        "a backend without a tokenizer: the estimate"
    assert estimate_tokens(messages) == math.ceil((3 + 4 + 3 * 16) / 3)


def test_a_lazy_backend_counts_alike_before_and_after_it_starts_and_starts_only_if_it_must():
    from simulation.llm.lazy import LazyBackend
    from simulation.llm.llamacpp import LlamaCppBackend, bundled_model_path, model_fingerprint
    from simulation.errors import RunError

    messages = [{"role": "system", "content": "You are Ann. " * 30}, {"role": "user", "content": "Hello? é 😀"}]
    started = []
    lazy = LazyBackend("llamacpp", model_fingerprint(bundled_model_path()),
                       lambda: started.append(LlamaCppBackend()) or started[-1])
    before = lazy.count_tokens(messages)
    assert not started, "the bundled model's tokenizer is read without starting the backend"
    real = LlamaCppBackend()
    try:
        assert before == real.count_tokens(messages) == len(real.chat.pieces(messages)[0])
    finally:
        real.close()

    from simulation.llm.lazy import counter_for
    from simulation.llm.settings import LlamaCppSettings

    named = LlamaCppSettings(model=str(bundled_model_path()))
    assert counter_for("llamacpp", lazy.model_id, named, None)(messages) == before, "a GGUF named in the settings"
    assert counter_for("llamacpp", "another.gguf@123456", named, None) is None, "not the file the run used"

    def refuse():
        raise RunError("cannot reach the LLM server")

    servers = LazyBackend("openai", "smollm2", refuse)
    assert servers.count_tokens(messages) == estimate_tokens(messages), "servers: the estimate, no start"
    gone = LazyBackend("llamacpp", "other.gguf@000000", refuse)
    assert gone.count_tokens(messages) == estimate_tokens(messages), "cannot start: the estimate"


# ---------------------------------------------------------------- the 25-person flagship on the real model

ACTIVITIES = ["drinking coffee", "reading the paper", "serving customers", "walking the dog", "buying bread",
              "looking around", "eating lunch", "working at the counter", "writing in a notebook", "chatting"]
LINES = ["Good morning! Lovely weather for February, isn't it?",
         "Have you heard? There is a Valentine's Day party at Hobbs Cafe tomorrow at 5pm.",
         "I have been so busy with work this week, I barely had time to sleep.",
         "Would you like to come along to the party with me?",
         "The council meeting ran late again, everyone argued about the new park benches."]


def flagship_memories(name: str, people: list[str], places: list[str], n: int = 100, seed: int = 0) -> list[str]:
    """Memories as a day in the flagship leaves them: what people were seen doing, lines said and
    heard, conversation recaps, thoughts, and a day's plan (the longest, about 300 characters)."""
    rnd = random.Random(seed)
    first = name.split()[0]
    out = []
    for i in range(n):
        other, place = rnd.choice(people), rnd.choice(places)
        out.append([
            "Plan for Monday: " + "; ".join(f"{h:02d}:00 {rnd.choice(ACTIVITIES)} at {rnd.choice(places)}"
                                            for h in range(7, 22, 2)),
            f"{other} is {rnd.choice(ACTIVITIES)} at {place}",
            f"{other} is {rnd.choice(ACTIVITIES)} at {place}",
            f"{other} is {rnd.choice(ACTIVITIES)} at {place}",
            f"{other} is {rnd.choice(ACTIVITIES)} at {place}",
            f'{other} said to {name}: "{rnd.choice(LINES)}"',
            f'{other} said to {name}: "{rnd.choice(LINES)}"',
            f'{name} said to {other}: "{rnd.choice(LINES)}"',
            f"Talked with {other} at {place}: We talked about the Valentine's Day party and our plans for the week.",
            f"{first} wonders whether {other.split()[0]} will come to the party at Hobbs Cafe.",
        ][i % 10])
    return out


def flagship_person(person_id: str) -> tuple[AgentState, list[str], dict[str, str], list[str]]:
    """A person of the 25-person flagship with the system prompt a run gives them (as
    ``TownModel`` renders it: the public places and their own home), everyone else's names, the
    town's places (id: name) and the public places' names."""
    from simulation.scenario import load

    loaded = load(FLAGSHIP)
    places = {p.id: p for p in loaded.scenario.town.places}
    rp = next(rp for rp in loaded.people if rp.persona.id == person_id)
    own = {rp.home, rp.start_place, rp.workplace}
    shown = [(pid, f"{p.name} ({p.kind})") for pid, p in places.items() if p.kind != "home" or pid in own]
    me = AgentState(id=rp.persona.id, persona=rp.persona, home=rp.home, workplace=rp.workplace,
                    place=rp.start_place, system_prompt=prompts.render(
                        "system.j2", p=rp.persona, home=f"{places[rp.home].name} ({rp.home})", places=shown))
    others = [p.persona.name for p in loaded.people if p.persona.id != person_id]
    return (me, others, {pid: p.name for pid, p in places.items()},
            [p.name for p in places.values() if p.kind != "home"])


@dataclasses.dataclass
class ModelMind(FakeMind):
    """FakeMind whose questions go to a real LLM client (retrieval stays the newest five)."""

    client: object = None

    async def ask(self, me, messages, schema, *, default, purpose, max_tokens, check=None):
        self.asked.append(Asked(me.id, str(purpose), messages))
        return await self.client.ask(messages, schema, default=default, purpose=str(purpose), agent_id=me.id,
                                     tick=self.tick, max_tokens=max_tokens, check=check)

    def count_tokens(self, me, messages):
        self.counted += 1
        return self.client.count_tokens(messages, me.id)


@pytest.mark.slow
def test_a_flagship_persona_with_100_memories_reflects_on_the_bundled_model():
    """Isabella has the longest persona of the 25 (about 745 tokens with its town): her questions
    prompt over 100 memories once overflowed the 2,048-token window and every reflection fell back.
    Now the questions are answered and insights made, and no request came near the window."""
    from simulation.llm.client import LLMClient
    from simulation.llm.llamacpp import LlamaCppBackend

    me, others, places, public = flagship_person("isabella_rodriguez")
    backend = LlamaCppBackend()
    calls = []
    client = LLMClient(backend, run_seed=7, max_tokens=256, on_call=lambda r: calls.append(r) or len(calls))
    try:
        mind = ModelMind({me.id: me}, now=MORNING, places=places, client=client)
        mind.notes.deciding = [me.id]
        for text in flagship_memories(me.persona.name, others, public):
            mind.remember(me.id, MemoryKind.OBSERVATION, text, SEEN, importance=3)
        nodes = mind.memories(me.id).nodes
        window = mind.settings.context_tokens
        assert window == 2048
        # The old character budget ((window - 700) x 4 characters of the newest memories) let in a
        # prompt that alone was longer than the window.
        budget, before = (window - 700) * 4, []
        for node in reversed(nodes):
            budget -= len(node.text) + 4
            if budget < 0:
                break
            before.insert(0, node.text)
        assert backend.count_tokens(questions_messages(me, before)) + QUESTIONS_TOKENS > window
        chosen, messages = recent_for_questions(me, mind, nodes)
        assert 10 < len(chosen) < RECENT and chosen == nodes[-len(chosen):]
        assert backend.count_tokens(messages) + room(QUESTIONS_TOKENS) <= window

        made = batching.run(reflect(me, mind))
        counts = [backend.count_tokens(c.request.messages) for c in calls]
    finally:
        backend.close()
    for call, counted in zip(calls, counts):
        assert call.completion.error is None, call.completion.error
        assert call.completion.prompt_tokens == counted, "counted as the backend evaluated it"
        assert counted + call.request.max_tokens <= window
    purposes = [c.request.purpose for c in calls]
    questions = [c for c in calls if c.request.purpose == Purpose.QUESTIONS]
    assert questions and questions[-1].parse_ok and not questions[-1].fallback, "the questions were answered"
    assert purposes.count(Purpose.INSIGHTS) >= 3, "one insight question per question (and any retries)"
    assert made and all(n.kind == "reflection" and n.evidence for n in made), "insights were made"
