"""Replay without the machinery that made a run: backends start on the first cache miss, and
``agora verify`` re-makes a run from its run.db and replay cache and compares every row.

The llama.cpp server case (the run made over HTTP, replayed with the server stopped) is in
test_llm_openai.py, beside the other real-server tests.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest
from conftest import SMALL, agora

from simulation import Simulation
from simulation.errors import RunError
from simulation.llm.cache import CachedBackend, ReplayCache
from simulation.llm.factory import build_backend
from simulation.llm.lazy import LazyBackend
from simulation.llm.settings import LlamaCppSettings, OpenAISettings
from simulation.run.verify import verify
from simulation.rundb.diff import first_difference
from simulation.testing import ScriptedBackend

VLLM_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


class ScriptedVLLM(ScriptedBackend):
    """The scripted double under the vllm backend's name and a model id as vLLM would report it."""

    name = "vllm"
    model_id = VLLM_MODEL


def made_run(flagship, out: Path, cache_file: Path, backend=None, ticks: int = 4, seed: int = 5) -> Path:
    """A finished run whose every answer went through the replay cache ``cache_file``."""
    cache = ReplayCache(cache_file)
    with Simulation.from_scenario(flagship, backend=CachedBackend(backend or ScriptedBackend(), cache, "use"),
                                  out=out, ticks=ticks, seed=seed) as sim:
        sim.run()
        run_dir = sim.run_dir
    cache.close()
    return run_dir


# ------------------------------------------------------------------ the backend starts on a miss


class Counting:
    name = "counting"
    model_id = "c-1"

    def __init__(self):
        self.calls = 0

    def generate(self, requests, on_done=None):
        self.calls += len(requests)
        return ScriptedBackend().generate(requests, on_done)

    def close(self):
        pass


def test_a_lazy_backend_starts_only_when_a_request_reaches_it():
    started = []
    lazy = LazyBackend("counting", "c-1", lambda: started.append(Counting()) or started[-1])
    assert lazy.generate([]) == [] and not lazy.started and not started
    assert "replay cache" in lazy.describe()
    lazy.close()  # closing a backend that never started is fine
    from simulation.llm.types import LLMRequest

    answers = lazy.generate([LLMRequest(messages=[{"role": "user", "content": "hi"}], purpose="x")])
    assert len(answers) == 1 and lazy.started and started[0].calls == 1


def test_a_backend_that_cannot_start_on_a_miss_says_why_it_was_needed():
    def refuse():
        raise RunError("cannot reach the LLM server: http://127.0.0.1:9/v1: cannot connect")

    lazy = LazyBackend("openai", "smollm2", refuse)
    from simulation.llm.types import LLMRequest

    with pytest.raises(RunError, match=r"openai backend cannot start: cannot reach.*127\.0\.0\.1:9.*replay cache"):
        lazy.generate([LLMRequest(messages=[{"role": "user", "content": "hi"}])])


def test_a_backend_started_for_a_miss_must_serve_the_model_the_run_recorded():
    lazy = LazyBackend("counting", "c-0", Counting)
    from simulation.llm.types import LLMRequest

    with pytest.raises(RunError, match="now serves model 'c-1', not 'c-0'"):
        lazy.generate([LLMRequest(messages=[{"role": "user", "content": "hi"}])])


def test_the_openai_backend_behind_the_cache_asks_no_server_when_built(tmp_path):
    # Port 9 (discard) refuses: building it eagerly would fail with "cannot reach".
    settings = OpenAISettings(base_urls=["http://127.0.0.1:9/v1"], model="smollm2", cache_path=str(tmp_path / "c"))
    backend = build_backend(settings, tmp_path)
    try:
        assert backend.name == "openai" and backend.model_id == "smollm2" and not backend.inner.started
    finally:
        backend.close()


def test_the_llamacpp_model_id_is_known_without_loading_the_model(tmp_path):
    from simulation.llm.llamacpp import LlamaCppBackend

    settings = LlamaCppSettings(cache_path=str(tmp_path / "c"))
    backend = build_backend(settings, tmp_path)
    try:
        assert isinstance(backend.inner, LazyBackend) and not backend.inner.started
        assert backend.model_id == LlamaCppBackend.replay_id(settings, tmp_path)
        assert backend.model_id.startswith("SmolLM2-135M-Instruct.Q8_0.gguf@")
    finally:
        backend.close()
    gone = LlamaCppSettings(model=str(tmp_path / "gone.gguf"), cache_path=str(tmp_path / "c"))
    assert LlamaCppBackend.replay_id(gone, tmp_path) is None  # only the run's record can say


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="checks a machine without vLLM")
def test_a_vllm_run_replays_on_a_machine_without_vllm(flagship, tmp_path):
    cache_file = tmp_path / "llm.sqlite"
    original = made_run(flagship, tmp_path / "gpu", cache_file, backend=ScriptedVLLM())
    args = ["run", str(SMALL), "--backend", "vllm", "--model", VLLM_MODEL, "--cache-path", str(cache_file),
            "--seed", "5", "--quiet"]
    res = agora(*args, "--ticks", "4", "--out", str(tmp_path / "laptop"), width=240)
    assert res.exit_code == 0, res.output
    replay = Path(res.stdout.strip().splitlines()[-1])
    assert first_difference(replay / "run.db", original / "run.db") is None
    db = sqlite3.connect(replay / "run.db")
    assert db.execute("select count(*), sum(cache_hit) from llm_calls").fetchone()[0] > 0
    assert db.execute("select count(*) - sum(cache_hit) from llm_calls").fetchone()[0] == 0
    assert db.execute("select backend, model from runs").fetchone() == ("vllm", VLLM_MODEL)

    # Ticks the cache never saw: the first miss needs vLLM, which is not here. A clear error, and
    # every tick the cache could answer is kept (the four, and a quiet fifth that asked nothing).
    res = agora(*args, "--ticks", "8", "--out", str(tmp_path / "more"), width=240)
    assert res.exit_code == 1 and "cannot start" in res.output and "needs vLLM" in res.output
    assert "Traceback" not in res.output and "continue with: agora resume" in res.output
    (more,) = (tmp_path / "more").iterdir()
    db = sqlite3.connect(more / "run.db")
    done, status = db.execute("select ticks_done, status from runs").fetchone()
    assert status == "failed" and 4 <= done < 8
    assert db.execute("select count(*) from ticks").fetchone()[0] == done


# ------------------------------------------------------------------ agora verify


def test_verify_remakes_a_run_row_for_row_and_finds_a_tampered_row(flagship, tmp_path):
    cache_file = tmp_path / "llm.sqlite"
    run_dir = made_run(flagship, tmp_path / "runs", cache_file)
    res = agora("verify", str(run_dir), "--cache-path", str(cache_file), width=240)
    assert res.exit_code == 0, res.output
    assert "every row is the same" in res.stdout

    db = sqlite3.connect(run_dir / "run.db")
    (uid, text) = db.execute("select id, text from utterances order by id limit 1").fetchone()
    db.execute("update utterances set text = ? where id = ?", (text + " (edited)", uid))
    db.commit()
    res = agora("verify", str(run_dir), "--cache-path", str(cache_file), width=240)
    assert res.exit_code == 1
    assert "DIFFERENT" in res.stdout and "table utterances" in res.stdout and "column text" in res.stdout
    assert "(edited)" in res.stdout


def test_verify_replays_whispers_at_their_ticks(flagship, tmp_path):
    cache_file = tmp_path / "llm.sqlite"
    cache = ReplayCache(cache_file)
    sim = Simulation.from_scenario(flagship, backend=CachedBackend(ScriptedBackend(), cache, "use"),
                                   out=tmp_path / "runs", ticks=4, seed=2)
    with sim:
        sim.step()
        sim.db["inbox"].insert({"run_id": sim.run_id, "agent_id": "klaus_mueller", "sender": "viewer",
                                "text": "The library closes early today.", "created_at": "2026-11-23T10:00:00"})
        sim.run()
    cache.close()
    assert sqlite3.connect(sim.run_dir / "run.db").execute(
        "select delivered_tick from inbox").fetchone() == (1,)
    result = verify(sim.run_dir, cache_file)
    assert result.same, result.difference
    assert result.replayed > 0


def test_verify_names_the_request_the_cache_cannot_answer(flagship, tmp_path):
    cache_file = tmp_path / "llm.sqlite"
    run_dir = made_run(flagship, tmp_path / "runs", cache_file)
    # A changed persona makes every prompt of hers new: the re-run leaves the cache at her first call.
    db = sqlite3.connect(run_dir / "run.db")
    saved = db.execute("select scenario from resume_state").fetchone()[0]
    assert '"name":"Isabella Rodriguez"' in saved
    db.execute("update resume_state set scenario = ?",
               (saved.replace('"name":"Isabella Rodriguez"', '"name":"Isabel Rodrigo"'),))
    db.commit()
    result = verify(run_dir, cache_file)
    assert not result.same
    assert "not in the replay cache" in result.difference
    assert "differs from the original's at message" in result.difference


def test_verify_without_the_cache_file_is_bad_input(flagship, tmp_path):
    run_dir = made_run(flagship, tmp_path / "runs", tmp_path / "llm.sqlite", ticks=1)
    res = agora("verify", str(run_dir), "--cache-path", str(tmp_path / "nowhere.sqlite"), width=240)
    assert res.exit_code == 2 and "replay-cache file not found" in res.output
    res = agora("verify", str(tmp_path / "no-such-run"), width=240)
    assert res.exit_code == 2 and "no run.db here" in res.output
