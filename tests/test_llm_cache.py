"""The replay cache: a rerun costs zero backend calls and returns identical answers; any key change misses."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import BaseModel

from simulation.errors import RunError
from simulation.llm import batching
from simulation.llm.cache import CachedBackend, ReplayCache, default_cache_path
from simulation.llm.client import LLMClient
from simulation.llm.types import LLMRequest, RawCompletion


class Recorder:
    """Answers with a counter, so a replayed answer is recognisable as the first one."""

    name = "recorder"
    model_id = "rec-1"

    def __init__(self, fail: set[int] | None = None):
        self.calls = 0
        self.batches: list[int] = []
        self.fail = fail or set()

    def generate(self, requests, on_done=None):
        self.batches.append(len(requests))
        out = []
        for i, r in enumerate(requests):
            self.calls += 1
            if self.calls in self.fail:
                c = RawCompletion(text="", error="boom")
            else:
                c = RawCompletion(text=json.dumps({"n": self.calls, "seed": r.seed}), prompt_tokens=7,
                                  completion_tokens=4, latency_s=0.5, finish_reason="stop")
            out.append(c)
            if on_done:
                on_done(i, c)
        return out

    def close(self):
        pass


def req(i: int, **kw) -> LLMRequest:
    base = dict(messages=[{"role": "user", "content": f"q{i}"}], json_schema={"type": "object"}, seed=i,
                max_tokens=32, temperature=0.7, purpose="p", agent_id="a", tick=0)
    return LLMRequest(**{**base, **kw})


@pytest.fixture
def cache(tmp_path):
    c = ReplayCache(tmp_path / "llm.sqlite")
    yield c
    c.close()


def test_second_run_makes_zero_backend_calls_and_returns_identical_answers(cache):
    inner = Recorder()
    backend = CachedBackend(inner, cache)
    first = backend.generate([req(i) for i in range(5)])
    assert inner.calls == 5 and not any(c.cache_hit for c in first)
    again = backend.generate([req(i) for i in range(5)])
    assert inner.calls == 5, "no backend call on replay"
    assert [c.text for c in again] == [c.text for c in first]
    assert all(c.cache_hit and c.latency_s == 0 for c in again)
    assert [(c.prompt_tokens, c.completion_tokens) for c in again] == [(7, 4)] * 5, "accounting keeps the tokens"
    assert (backend.hits, backend.misses) == (5, 5)


def test_only_the_misses_of_a_batch_reach_the_backend_as_one_batch(cache):
    inner = Recorder()
    backend = CachedBackend(inner, cache)
    backend.generate([req(0), req(1)])
    seen: list[tuple[int, bool]] = []
    out = backend.generate([req(0), req(5), req(1), req(6)], on_done=lambda i, c: seen.append((i, c.cache_hit)))
    assert inner.batches == [2, 2]
    assert [c.cache_hit for c in out] == [True, False, True, False]
    assert sorted(seen) == [(0, True), (1, False), (2, True), (3, False)], "progress sees every answer"


@pytest.mark.parametrize("change", [
    {"messages": [{"role": "user", "content": "q0 "}]},
    {"json_schema": {"type": "object", "properties": {}}},
    {"json_schema": None},
    {"max_tokens": 33},
    {"temperature": 0.71},
    {"seed": 99},
])
def test_changing_any_key_field_misses(cache, change):
    inner = Recorder()
    backend = CachedBackend(inner, cache)
    backend.generate([req(0)])
    [out] = backend.generate([req(0, **change)])
    assert not out.cache_hit and inner.calls == 2


def test_bookkeeping_fields_are_not_part_of_the_key(cache):
    inner = Recorder()
    backend = CachedBackend(inner, cache)
    backend.generate([req(0)])
    [out] = backend.generate([req(0, purpose="other", agent_id="b", tick=7)])
    assert out.cache_hit


def test_another_model_or_backend_misses(cache):
    backend = CachedBackend(Recorder(), cache)
    backend.generate([req(0)])
    other = Recorder()
    other.model_id = "rec-2"
    [out] = CachedBackend(other, cache).generate([req(0)])
    assert not out.cache_hit and other.calls == 1
    renamed = Recorder()
    renamed.name = "elsewhere"
    [out] = CachedBackend(renamed, cache).generate([req(0)])
    assert not out.cache_hit


def test_errors_are_not_cached(cache):
    inner = Recorder(fail={1})
    backend = CachedBackend(inner, cache)
    [bad] = backend.generate([req(0)])
    assert bad.error == "boom"
    [good] = backend.generate([req(0)])
    assert good.error is None and not good.cache_hit and inner.calls == 2


def test_refresh_writes_but_never_reads(cache):
    inner = Recorder()
    CachedBackend(inner, cache).generate([req(0)])
    refresh = CachedBackend(inner, cache, mode="refresh")
    [out] = refresh.generate([req(0)])
    assert not out.cache_hit and inner.calls == 2
    [replayed] = CachedBackend(inner, cache).generate([req(0)])
    assert replayed.cache_hit and json.loads(replayed.text)["n"] == 2, "refresh overwrote the entry"


def test_cache_survives_reopening(tmp_path):
    path = tmp_path / "c.sqlite"
    first = CachedBackend(Recorder(), ReplayCache(path))
    a = first.generate([req(0)])
    first.close()
    inner = Recorder()
    [b] = CachedBackend(inner, ReplayCache(path)).generate([req(0)])
    assert b.cache_hit and b.text == a[0].text and inner.calls == 0


def test_client_accounts_cache_hits(cache):
    class N(BaseModel):
        n: int
        seed: int

    backend = CachedBackend(Recorder(), cache)
    records = []

    def run_once() -> list:
        client = LLMClient(backend, run_seed=4, on_call=lambda r: records.append(r) or None)

        async def asks() -> list:
            return await asyncio.gather(*(
                client.ask([{"role": "user", "content": f"q{i}"}], N, default=N(n=0, seed=0), purpose="p",
                           agent_id=f"a{i}", tick=0) for i in range(3)))

        return batching.run(asks()), client.stats

    first, s1 = run_once()
    second, s2 = run_once()
    assert [a.value for a in first] == [a.value for a in second]
    assert (s1.cache_hits, s2.cache_hits) == (0, 3)
    assert [r.cache_hit for r in records] == [False] * 3 + [True] * 3


def test_unwritable_cache_is_a_clear_run_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RunError, match="replay cache"):
        ReplayCache(blocker / "sub" / "llm.sqlite")


def test_corrupt_cache_file_is_a_clear_run_error(tmp_path):
    path = tmp_path / "llm.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RunError, match="replay cache"):
        ReplayCache(path)


def test_default_path_honours_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("AGORA_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_path() == tmp_path / "c" / "llm.sqlite"
    monkeypatch.delenv("AGORA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_path() == tmp_path / "x" / "agora" / "llm.sqlite"


def test_factory_wraps_the_backend_unless_cache_is_off(tmp_path):
    from simulation.llm.factory import BackendChoice, build_backend
    from simulation.llm.registry import default_settings

    settings = BackendChoice(cache_path=str(tmp_path / "c.sqlite")).apply(default_settings())
    backend = build_backend(settings, Path("."))
    try:
        assert isinstance(backend, CachedBackend) and backend.cache.path == tmp_path / "c.sqlite"
        assert backend.model_id.startswith("SmolLM2-135M-Instruct.Q8_0.gguf@")
    finally:
        backend.close()
    raw = build_backend(BackendChoice(cache="off").apply(default_settings()), Path("."))
    try:
        assert not isinstance(raw, CachedBackend)
    finally:
        raw.close()


def test_bad_command_line_llm_options_name_the_option():
    from simulation.errors import InputError
    from simulation.llm.factory import BackendChoice
    from simulation.llm.registry import default_settings

    with pytest.raises(InputError) as exc:
        BackendChoice(base_urls=["ftp://nowhere"]).apply(default_settings())
    assert "--base-url" in str(exc.value.problems[0])


def test_concurrent_writers_share_one_cache_file(tmp_path):
    path = tmp_path / "shared.sqlite"
    a, b = ReplayCache(path), ReplayCache(path)
    a.put_many("m", [("k1", RawCompletion(text="one"))])
    b.put_many("m", [("k2", RawCompletion(text="two"))])
    assert set(a.get_many(["k1", "k2"])) == {"k1", "k2"}
    with sqlite3.connect(path) as db:
        assert db.execute("pragma journal_mode").fetchone()[0] == "wal"
