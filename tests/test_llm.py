"""The LLM layer: batching client, retries and fallbacks, seeds, and the real llama.cpp backend."""

from __future__ import annotations

import asyncio
import json

import pytest
from typing import Literal

from pydantic import BaseModel, Field

from simulation.errors import RunError
from simulation.llm import batching
from simulation.llm.client import LLMClient, parse_answer
from simulation.llm.seeds import derive_seed
from simulation.llm.types import LLMRequest, RawCompletion


class Echo(BaseModel):
    n: int


class Act(BaseModel):
    action: str = Field(max_length=80)
    place: Literal["home", "cafe", "park"]
    minutes: int  # llama.cpp grammars do not bound integers; the engine clamps its own


class CountingBackend:
    """Answers {"n": <index in batch>}, or garbage for the first ``bad`` calls."""

    name = "counting"
    model_id = "counting"

    def __init__(self, bad: int = 0, error: Exception | None = None):
        self.batches: list[int] = []
        self.bad = bad
        self.error = error
        self.seen: list[LLMRequest] = []

    def generate(self, requests, on_done=None):
        if self.error:
            raise self.error
        self.batches.append(len(requests))
        out = []
        for i, r in enumerate(requests):
            self.seen.append(r)
            text = "{oops" if self.bad > 0 else json.dumps({"n": i})
            self.bad -= 1
            out.append(RawCompletion(text=text, prompt_tokens=3, completion_tokens=2, latency_s=0.01,
                                     finish_reason="stop"))
        return out

    def close(self):
        pass


def ask(client, agent, **kw):
    return client.ask([{"role": "user", "content": agent}], Echo, default=Echo(n=-1), purpose="t",
                      agent_id=agent, tick=0, **kw)


def test_concurrent_asks_form_one_batch():
    backend = CountingBackend()
    client = LLMClient(backend, run_seed=1)

    async def main():
        return await asyncio.gather(*(ask(client, f"a{i}") for i in range(7)))

    answers = batching.run(main())
    assert backend.batches == [7]
    assert sorted(a.value.n for a in answers) == list(range(7))
    assert client.stats.calls == 7 and client.stats.batches == 1


def test_sequential_steps_of_one_agent_form_successive_batches():
    backend = CountingBackend()
    client = LLMClient(backend, run_seed=1)

    async def agent(name):
        await ask(client, name)
        await ask(client, name + "-again")

    async def main():
        await asyncio.gather(agent("a"), agent("b"), agent("c"))

    batching.run(main())
    assert backend.batches == [3, 3]


def test_bad_answer_retried_once_with_new_seed_then_default():
    backend = CountingBackend(bad=2)
    records = []
    client = LLMClient(backend, run_seed=1, on_call=lambda r: records.append(r) or len(records))
    answer = batching.run(ask(client, "a"))
    assert not answer.ok and answer.value.n == -1
    assert [r.attempt for r in records] == [0, 1]
    assert records[0].request.seed != records[1].request.seed
    assert records[-1].fallback and not records[0].fallback
    assert answer.call_id == 2
    assert client.stats.parse_failures == 2 and client.stats.fallbacks == 1


def test_retry_recovers():
    backend = CountingBackend(bad=1)
    client = LLMClient(backend, run_seed=1)
    answer = batching.run(ask(client, "a"))
    assert answer.ok and answer.value.n == 0
    assert client.stats.calls == 2 and client.stats.fallbacks == 0


def test_backend_failure_reaches_every_waiting_agent():
    client = LLMClient(CountingBackend(error=RunError("server gone")), run_seed=1)

    async def main():
        return await asyncio.gather(*(ask(client, f"a{i}") for i in range(3)), return_exceptions=True)

    results = batching.run(main())
    assert all(isinstance(r, RunError) for r in results)


def test_wrong_number_of_answers_is_a_run_error_not_a_hang():
    class Short(CountingBackend):
        def generate(self, requests, on_done=None):
            return super().generate(requests)[:-1]

    client = LLMClient(Short(), run_seed=1)

    async def main():
        return await asyncio.wait_for(
            asyncio.gather(*(ask(client, f"a{i}") for i in range(3)), return_exceptions=True), timeout=10)

    results = batching.run(main())
    assert all(isinstance(r, RunError) and "2 answers for 3 requests" in str(r) for r in results)


def test_retry_shows_the_rejected_answer_and_why():
    backend = CountingBackend(bad=1)
    client = LLMClient(backend, run_seed=1)
    batching.run(ask(client, "a"))
    first, retry = backend.seen
    assert len(retry.messages) == len(first.messages) + 2
    assert retry.messages[-2] == {"role": "assistant", "content": "{oops"}
    assert "not JSON" in retry.messages[-1]["content"]


def test_check_rejects_a_well_formed_answer():
    backend = CountingBackend()
    client = LLMClient(backend, run_seed=1)
    answer = batching.run(ask(client, "a", check=lambda v: "zero is not allowed" if v.n == 0 else None))
    assert not answer.ok and client.stats.parse_failures == 2
    assert answer.rejected is not None and answer.rejected.n == 0, "the last well-formed answer, for the caller"
    broken = batching.run(ask(LLMClient(CountingBackend(bad=2), run_seed=1), "b"))
    assert not broken.ok and broken.rejected is None, "nothing well-formed came back"


def test_max_tokens_setting_caps_every_request():
    backend = CountingBackend()
    client = LLMClient(backend, run_seed=1, max_tokens=50)
    batching.run(ask(client, "a", max_tokens=200))
    batching.run(ask(client, "b", max_tokens=20))
    assert [r.max_tokens for r in backend.seen] == [50, 20]


def test_truncated_answer_is_a_parse_failure():
    class Cut(CountingBackend):
        def generate(self, requests, on_done=None):
            return [RawCompletion(text='{"n": 1', finish_reason="length") for _ in requests]

    client = LLMClient(Cut(), run_seed=1)
    answer = batching.run(ask(client, "a"))
    assert not answer.ok


def test_seeds_depend_on_who_when_and_why_not_on_batch():
    assert derive_seed(7, "isabella", 3, "plan", 0) == derive_seed(7, "isabella", 3, "plan", 0)
    seeds = {derive_seed(7, a, t, p, 0) for a in ("x", "y") for t in (1, 2) for p in ("plan", "react")}
    assert len(seeds) == 8
    assert derive_seed(7, "x", 1, "plan", 0) != derive_seed(8, "x", 1, "plan", 0)
    assert 0 <= derive_seed(7, "x") < 2**31


def test_parse_answer_reports_the_field():
    value, err = parse_answer('{"action": "x", "place": "zzz", "minutes": 5}', Act)
    assert value is None and err.startswith("place:")
    value, err = parse_answer('{"action": "x", "place": "cafe", "minutes": 5}', Act)
    assert err is None and value.place == "cafe"
    value, err = parse_answer('{"action": "x", "place": "cafe"', Act)
    assert value is None and err.startswith("not JSON")


def test_request_key_changes_with_every_field():
    base = LLMRequest(messages=[{"role": "user", "content": "hi"}], json_schema={"type": "object"}, seed=1)
    key = base.key("m")
    assert base.key("m") == key
    for change in ({"seed": 2}, {"temperature": 0.1}, {"max_tokens": 5}, {"json_schema": None},
                   {"messages": [{"role": "user", "content": "ho"}]}):
        assert base.model_copy(update=change).key("m") != key
    assert base.key("other-model") != key


# ---------------------------------------------------------------- the real bundled model


@pytest.fixture(scope="module")
def llama():
    from simulation.llm.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend()
    yield backend
    backend.close()


def _requests(n_agents=3, n_each=2):
    schema = Act.model_json_schema()
    return [
        LLMRequest(
            messages=[
                {"role": "system", "content": f"You are person {a}, a baker who likes long walks. Answer with JSON only."},
                {"role": "user", "content": f"It is {8 + h}:00. What do you do next?"},
            ],
            json_schema=schema, max_tokens=96, temperature=0.7, seed=100 * a + h,  # room for the longest answer
        )
        for a in range(n_agents) for h in range(n_each)
    ]


@pytest.fixture(scope="module")
def answered(llama):
    """The requests answered together, once: both tests below read them."""
    return llama.generate(_requests())


@pytest.mark.slow
def test_bundled_model_answers_under_the_schema(answered):
    assert all(o.error is None for o in answered)
    for o in answered:
        value, err = parse_answer(o.text, Act)
        assert err is None, (o.text, err)
        assert o.prompt_tokens > 0 and o.completion_tokens > 0


@pytest.mark.slow
def test_answers_do_not_depend_on_what_ran_before(llama, answered):
    """The same request gives the same answer whether its persona prefix was cached, restored
    from a saved state, or evaluated cold, and whatever was evaluated just before it."""
    from simulation.llm.llamacpp import LlamaCppBackend

    reqs = _requests()
    together = [o.text for o in answered]
    alone_reversed = [llama.generate([r])[0].text for r in reversed(reqs)][::-1]
    assert together == alone_reversed
    assert llama.prefix_restores > 0 and llama.prefix_hits > 0
    singles = []
    for r in reqs:
        llama.prefix.clear()  # nothing saved, nothing trusted in the KV cache: evaluated cold
        singles.append(llama.generate([r])[0].text)
    assert singles == together


@pytest.mark.slow
def test_a_batch_is_generated_together_and_answers_as_if_each_were_alone(llama, answered):
    """A batch's answers are decoded together (one decode step per token of the batch, so fewer
    steps than tokens), in separate sequences, and are the same bits as those of a backend that
    generates one answer at a time."""
    from simulation.llm.llamacpp import LlamaCppBackend

    steps = llama.seqs.steps
    again = llama.generate(_requests())
    assert [o.text for o in again] == [o.text for o in answered]
    generated = sum(o.completion_tokens for o in again)
    assert llama.seqs.steps - steps <= max(o.completion_tokens for o in again) < generated
    one = LlamaCppBackend(sequences=1)
    try:
        assert one.seqs is not llama.seqs and one.seqs.n_seq == 1
        assert [o.text for o in one.generate(_requests())] == [o.text for o in answered]
    finally:
        one.close()


@pytest.mark.slow
def test_answers_are_llama_cpp_pythons_own_completions_token_for_token(llama):
    """The backend's own decoding and sampling (a multi-sequence context, the grammar judged on the
    highest logits first, ``simulation.llm.llamacpp.sampling``) answer exactly what llama-cpp-python's
    ``create_completion`` answers for the same prompt evaluated in the same canonical pieces:
    with and without a schema, sampled and greedy."""
    reqs = [*_requests(n_agents=4, n_each=2),
            *(r.model_copy(update={"json_schema": None, "max_tokens": 24}) for r in _requests(2, 1)),
            *(r.model_copy(update={"temperature": 0.0}) for r in _requests(2, 1))]
    llm = llama._llm
    expected = []
    for req in reqs:
        tokens, bounds = llama.chat.pieces(req.messages)
        llm.reset()
        start = 0
        for end in bounds:
            llm.eval(tokens[start:end])
            start = end
        out = llm.create_completion(prompt=tokens, max_tokens=req.max_tokens, temperature=req.temperature,
                                    seed=req.seed,
                                    grammar=llama._grammar(req.json_schema) if req.json_schema else None)
        expected.append(out["choices"][0]["text"])  # type: ignore[index]
    assert [o.text for o in llama.generate(reqs)] == expected


@pytest.mark.slow
def test_a_stable_preamble_of_several_messages_is_evaluated_once_and_answers_alike(llama):
    """A question whose earlier messages are stable (a persona, then rated examples as earlier
    turns, as the importance question is asked) and whose last message changes: from the second
    request on only the last message is evaluated, and every answer and score is the same as
    when the whole prompt is evaluated cold."""
    from simulation.llm.llamacpp.prefix_cache import TokenCounts

    preamble = [{"role": "system", "content": "You are Ann, a baker who likes long walks. " * 8},
                {"role": "user", "content": "How much does this matter, 1 to 10?\n<memory>Ann washed up.</memory>"},
                {"role": "assistant", "content": "1"},
                {"role": "user", "content": "<memory>Ann's friend was hurt in a crash.</memory>"},
                {"role": "assistant", "content": "9"}]
    memories = ["Ann baked bread.", "Ann's shop burned down.", "Ann got engaged.", "Ann tied her shoes."]
    scored = [LLMRequest(messages=[*preamble, {"role": "user", "content": f"<memory>{m}</memory>"}],
                         options=[str(i) for i in range(1, 11)]) for m in memories]
    said = [r.model_copy(update={"options": None, "max_tokens": 8, "seed": 3}) for r in scored]
    llama.prefix.clear()
    llama.tokens = TokenCounts()
    warm = [o.text for o in llama.generate(scored)] + [o.text for o in llama.generate(said)]
    first_prompt = llama.chat.pieces(scored[0].messages)[0]
    last_piece = len(first_prompt) - llama.chat.pieces(scored[0].messages)[1][-1]
    assert llama.tokens.requests == 8 and llama.tokens.evaluated <= len(first_prompt) + 7 * (last_piece + 8), \
        "after the first request, only the last message (and its few changed tokens) is evaluated"
    cold = []
    for r in [*scored, *said]:
        llama.prefix.clear()
        cold.append(llama.generate([r])[0].text)
    assert cold == warm


@pytest.mark.slow
def test_prompt_too_long_is_an_error_answer_not_a_crash(llama):
    req = LLMRequest(messages=[{"role": "user", "content": "word " * 5000}], max_tokens=16)
    out = llama.generate([req])[0]
    assert out.error and "context window" in out.error


def test_unloadable_model_file_is_a_clear_run_error(tmp_path):
    from simulation.llm.llamacpp import LlamaCppBackend

    fake = tmp_path / "fake.gguf"
    fake.write_text("this is not a model")
    with pytest.raises(RunError, match="cannot load model"):
        LlamaCppBackend(fake)
    with pytest.raises(RunError, match="not found"):
        LlamaCppBackend(tmp_path / "missing.gguf")


@pytest.mark.heavy
def test_two_backends_on_one_model_file_share_one_loaded_model_and_answer_alike():
    from simulation.llm.llamacpp import LlamaCppBackend

    req = LLMRequest(messages=[{"role": "system", "content": "You are Ann."}, {"role": "user", "content": "Hi?"}],
                     json_schema={"type": "object", "properties": {"say": {"type": "string", "maxLength": 40}},
                                  "required": ["say"]}, max_tokens=24, seed=5)
    a = LlamaCppBackend(threads=1)
    b = LlamaCppBackend(threads=1)
    try:
        assert a._llm is b._llm, "loaded once per process"
        first = a.generate([req])[0].text
        other = b.generate([req.model_copy(update={"seed": 6})])[0].text
        again = a.generate([req])[0].text
        assert first == again, "the other user's requests do not disturb this one's answers"
        assert other
    finally:
        a.close()
        assert b._llm is not None
        b.close()
