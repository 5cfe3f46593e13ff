"""The openai backend against real loopback servers: a misbehaving fixture and llama.cpp's own server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import sqlite_utils
from conftest import FLAGSHIP, MINIMAL, ROOT, agora
from llm_servers import FaultServer, free_port, llama_server
from pydantic import BaseModel, Field

from simulation.errors import RunError
from simulation.llm import batching
from simulation.llm.client import LLMClient
from simulation.llm.openai import OpenAIBackend
from simulation.llm.types import LLMRequest

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class N(BaseModel):
    n: int


class Greeting(BaseModel):
    talk: bool
    greeting: str = Field(max_length=200)


class Reply(BaseModel):
    say: str = Field(min_length=1, max_length=300)
    end_conversation: bool


def req(i: int = 0, schema: dict | None = SCHEMA) -> LLMRequest:
    return LLMRequest(messages=[{"role": "user", "content": f"question {i}"}], json_schema=schema, seed=i,
                      max_tokens=16, purpose="t", agent_id=f"a{i}", tick=0)


def backend(*servers: FaultServer | str, **kw) -> OpenAIBackend:
    urls = [s if isinstance(s, str) else s.url for s in servers]
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("max_backoff_s", 0.05)
    kw.setdefault("timeout_s", 2.0)
    return OpenAIBackend(urls, **kw)


def test_answers_with_tokens_server_and_model_from_the_server():
    with FaultServer() as srv:
        b = backend(srv)
        [out] = b.generate([req()])
    assert b.model_id == "fault-model"
    assert json.loads(out.text) == {"n": 1} and out.error is None
    assert (out.prompt_tokens, out.completion_tokens, out.finish_reason) == (11, 3, "stop")
    assert out.server == srv.url and out.retries == 0
    sent = srv.bodies[0]
    assert sent["model"] == "fault-model" and sent["seed"] == 0 and sent["max_tokens"] == 16
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"] == SCHEMA


def test_a_piece_break_never_reaches_the_server():
    """``PIECE_BREAK`` cuts a prompt's pieces for the llama.cpp backend; a server reads plain text."""
    from simulation.llm.types import PIECE_BREAK

    with FaultServer() as srv:
        b = backend(srv)
        request = LLMRequest(messages=[{"role": "user", "content": f"<memories>\n- a\n{PIECE_BREAK}- b\n{PIECE_BREAK}"
                                                                  "</memories>"}], json_schema=SCHEMA, max_tokens=16)
        b.generate([request])
    assert srv.bodies[0]["messages"] == [{"role": "user", "content": "<memories>\n- a\n- b\n</memories>"}]
    assert PIECE_BREAK in request.messages[0]["content"], "the request itself (the replay key) keeps it"


def test_500s_then_success_is_retried():
    with FaultServer(["500", "500", "ok"]) as srv:
        [out] = backend(srv, max_retries=4).generate([req()])
    assert out.error is None and json.loads(out.text) == {"n": 3} and out.retries == 2


def test_429_and_dropped_connection_are_retried():
    with FaultServer(["429", "reset", "ok"]) as srv:
        [out] = backend(srv, max_retries=4).generate([req()])
    assert out.error is None and out.retries == 2


def test_timeout_is_retried():
    with FaultServer(["stall", "ok"]) as srv:
        [out] = backend(srv, timeout_s=0.5, max_retries=2).generate([req()])
    assert out.error is None and out.retries == 1


def test_malformed_bodies_become_an_error_answer_and_the_client_falls_back():
    with FaultServer(["garbage"] * 10) as srv:
        b = backend(srv, max_retries=1)
        [out] = b.generate([req()])
        assert out.error and "not a chat completion" in out.error and srv.url in out.error
        calls = []
        client = LLMClient(b, run_seed=1, on_call=lambda rec: calls.append(rec) or None)
        loop = batching.BatchLoop()
        answer = loop.run_until_complete(client.ask([{"role": "user", "content": "hi"}], N, default=N(n=-1),
                                                    purpose="t", agent_id="a", tick=0))
        b.close()
        loop.close()
    assert answer.value.n == -1 and not answer.ok, "a safe default, not a crash"
    assert len(calls) == 2 and not any(c.parse_ok for c in calls) and calls[-1].fallback


def test_unreachable_server_at_start_is_a_clear_error_naming_it():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RunError, match="cannot reach the LLM server") as exc:
        backend(url)
    assert url in str(exc.value)


def test_server_gone_mid_run_stops_with_its_name_after_the_patience():
    srv = FaultServer()
    with srv:
        b = backend(srv, max_retries=2, patience_s=0.3)
    # stopped: connections are now refused
    with pytest.raises(RunError) as exc:
        b.generate([req(0), req(1)])
    assert srv.url in str(exc.value) and "failed for" in str(exc.value)
    assert int(str(exc.value).split("(")[1].split()[0]) > 2, "more tries than max_retries: it waited out the patience"


def test_a_server_that_refuses_json_schema_gets_json_object_with_the_schema():
    with FaultServer(["no_schema", "no_schema"]) as srv:
        b = backend(srv)
        outs = b.generate([req(0)])
        outs += b.generate([req(1)])
    assert all(o.error is None for o in outs)
    kinds = [(body.get("response_format") or {}).get("type") for body in srv.bodies]
    assert kinds == ["json_schema", "json_object", "json_object"], "falls back once, then remembers"
    assert srv.bodies[-1]["response_format"]["schema"] == SCHEMA


def test_concurrent_refusals_step_down_only_once():
    with FaultServer(["no_schema"] * 4, delay=0.05) as srv:
        b = backend(srv, concurrency=4)
        outs = b.generate([req(i) for i in range(4)])
    assert all(o.error is None for o in outs)
    assert b.servers[0].mode == "json_object", "four refusals of json_schema are one step, not three"


def test_requests_spread_over_servers_by_least_outstanding():
    with FaultServer(delay=0.05) as a, FaultServer(delay=0.05) as b:
        be = backend(a, b, concurrency=2)
        outs = be.generate([req(i) for i in range(12)])
    assert all(o.error is None for o in outs)
    assert len(a.bodies) + len(b.bodies) == 12 and abs(len(a.bodies) - len(b.bodies)) <= 2
    assert {o.server for o in outs} == {a.url, b.url}


def test_a_failing_server_sends_its_work_to_the_other():
    with FaultServer(["500"] * 50) as bad, FaultServer() as good:
        outs = backend(bad, good, concurrency=4, max_retries=3).generate([req(i) for i in range(8)])
    assert all(o.error is None and o.server == good.url for o in outs)


def test_concurrency_limit_per_server():
    with FaultServer(delay=0.1) as srv:
        be = backend(srv, concurrency=3)
        peak = 0

        async def watch():
            nonlocal peak
            task = asyncio.ensure_future(be.agenerate([req(i) for i in range(9)]))
            while not task.done():
                peak = max(peak, be.servers[0].outstanding)
                await asyncio.sleep(0.005)
            return await task

        outs = asyncio.run(watch())
    assert all(o.error is None for o in outs) and peak == 3


def test_api_key_from_the_environment_and_url_without_v1(monkeypatch):
    from simulation.llm.factory import build_backend
    from simulation.llm.settings import OpenAISettings

    monkeypatch.setenv("MY_KEY", "sekrit")
    with FaultServer() as srv:
        settings = OpenAISettings(base_urls=[srv.url.removesuffix("/v1")], api_key_env="MY_KEY",
                                  cache="off")
        b = build_backend(settings, Path("."))
        b.generate([req()])
    assert b.servers[0].url == srv.url, "a base URL without /v1 is completed"
    assert srv.headers[0]["Authorization"] == "Bearer sekrit"


def test_rejected_api_key_is_a_clear_run_error():
    with FaultServer(["401"]) as srv:
        b = backend(srv)
        with pytest.raises(RunError, match="API key"):
            b.generate([req()])


def test_run_on_the_openai_backend_records_server_answers(make_run, tmp_path):
    """A whole (short) run through the real client and model against a loopback server."""
    with FaultServer(["500"]) as srv:
        be = backend(srv)
        run = make_run(be, ticks=2)
        run.model.step()
        run.model.step()
    db = run.store.db
    assert db["llm_calls"].count > 0
    assert {r["backend"] for r in db["llm_calls"].rows} == {"openai"}


@pytest.mark.heavy
def test_cli_unreachable_server_exits_1_naming_it(tmp_path):
    import subprocess

    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = subprocess.run([sys.executable, "-m", "simulation.cli", "run", str(FLAGSHIP), "--backend", "openai",
                           "--base-url", url, "--out", str(tmp_path), "--cache", "off"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and url in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*/run.db")), "nothing is created when the server is unreachable at start"


@pytest.mark.heavy
def test_cli_openai_without_a_server_is_bad_input(tmp_path):
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "simulation.cli", "run", str(FLAGSHIP), "--backend", "openai",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--base-url" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------- real server


@pytest.fixture(scope="module")
def real_server():
    from simulation.llm.llamacpp import bundled_model_path

    with llama_server(bundled_model_path()) as url:
        yield url


@pytest.mark.slow
def test_llama_cpp_server_answers_8_schema_requests_in_flight_that_all_parse(real_server):
    be = OpenAIBackend([real_server], timeout_s=300, concurrency=4)
    assert be.model_id == "smollm2"
    client = LLMClient(be, run_seed=3, max_tokens=64)
    models = [Greeting, Reply] * 4

    async def all_asks():
        return await asyncio.gather(*(
            client.ask([{"role": "system", "content": "You are Ann, a baker in a small town."},
                        {"role": "user", "content": f"Question {i}: you meet Bob at the cafe. Answer in JSON."}],
                       m, default=m.model_validate(_default(m)), purpose="t", agent_id=f"a{i}", tick=0)
            for i, m in enumerate(models)))

    answers = batching.run(all_asks())
    assert client.stats.batches >= 1
    assert all(a.ok for a in answers), [a.value for a in answers]
    assert be.servers[0].mode in ("json_schema", "json_object"), "the schema reached the server"


def _default(model: type[BaseModel]) -> dict:
    return {"talk": False, "greeting": ""} if model is Greeting else {"say": "Bye.", "end_conversation": True}


@pytest.mark.slow
def test_agora_run_against_the_llama_cpp_server_then_replay_and_verify_with_the_server_gone(tmp_path):
    """The whole path (``agora run``, the openai backend's batches in flight, run.db) on the
    two-person scenario, through the replay cache; then, with the server stopped, the same command
    replays the run row for row, ``agora verify`` agrees, and a run that needs one answer more stops
    naming the server, its committed ticks kept. The commands run in this process (an `agora`
    process spends ten seconds importing the embedder; test_run_e2e runs the command as a process).
    (The flagship's eight waking plans took 200 s here on an idle machine, over 900 s on a busy one.)"""
    from simulation.llm.llamacpp import bundled_model_path
    from simulation.rundb.diff import first_difference

    cache_file = tmp_path / "llm.sqlite"

    def args(url: str, ticks: int, out: str) -> list[str]:
        return ["run", str(MINIMAL), "--backend", "openai", "--base-url", url, "--model", "smollm2",
                "--ticks", str(ticks), "--seed", "11", "--cache", "use", "--cache-path", str(cache_file),
                "--out", str(tmp_path / out)]

    with llama_server(bundled_model_path()) as url:
        res = agora(*args(url, 1, "served"), width=240)
    assert res.exit_code == 0, res.output
    assert "Probe answers" in res.stdout  # the summary a user reads
    served = Path(res.stdout.strip().splitlines()[-1])
    db = sqlite_utils.Database(served / "run.db")
    row = next(db["runs"].rows)
    assert row["backend"] == "openai" and row["model"] == "smollm2" and row["status"] == "finished"
    assert db.execute("select avg(parse_ok) from llm_calls").fetchone()[0] > 0.5
    assert db.execute("select sum(cache_hit) from llm_calls").fetchone()[0] == 0

    # The server is gone: the same command replays every answer and asks no server anything.
    res = agora(*args(url, 1, "replayed"), "--quiet", width=240)
    assert res.exit_code == 0, res.output
    replayed = Path(res.stdout.strip().splitlines()[-1])
    assert first_difference(replayed / "run.db", served / "run.db") is None
    again = sqlite_utils.Database(replayed / "run.db")
    assert again.execute("select count(*) = sum(cache_hit) from llm_calls").fetchone()[0] == 1

    res = agora("verify", str(served), "--cache-path", str(cache_file), width=240)
    assert res.exit_code == 0 and "every row is the same" in res.stdout, res.output

    # One tick more than the cache holds: a clear error naming the server, tick 0 kept.
    res = agora(*args(url, 2, "more"), "--quiet", width=240)
    assert res.exit_code == 1 and url in res.output and "cannot start" in res.output, res.output
    assert "Traceback" not in res.output
    (more,) = (tmp_path / "more").iterdir()
    assert next(sqlite_utils.Database(more / "run.db")["runs"].rows)["ticks_done"] >= 1
