"""End to end: `agora run` as a user runs it, on the real bundled SmolLM2 model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils
from conftest import FLAGSHIP, MINIMAL, ROOT, SMALL, agora

AGORA = [sys.executable, "-m", "simulation.cli"]


def agora_process(*args: str, cwd: Path = ROOT, timeout: int = 1800,
                  cache_dir: Path | None = None) -> subprocess.CompletedProcess:
    """``agora ARGS...`` as a process of its own (``agora`` from conftest runs it in this one)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("AGORA_DEBUG", None)
    args = (*args, "--cache", "off") if cache_dir is None and args[:1] == ("run",) else args
    if cache_dir is not None:
        env["AGORA_CACHE_DIR"] = str(cache_dir)
    return subprocess.run([*AGORA, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("llm-cache")


REAL_TICKS = 2
"""On the two-person scenario: tick 0 plans (importance, plan, hours, steps), tick 1 holds a whole
conversation (react, utterances, recaps), then the probes. The flagship's eight people took 160 s
on an idle 2-core machine for four ticks that asked the model nothing after tick 0."""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, cache_dir):
    out = tmp_path_factory.mktemp("runs")
    proc = agora_process("run", str(MINIMAL), "--ticks", str(REAL_TICKS), "--out", str(out), cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    return proc, run_dir, sqlite_utils.Database(run_dir / "run.db")


def _events(db):
    return [(r["tick"], r["agent_id"], r["kind"], r["text"]) for r in db.query("select * from events order by id")]


@pytest.mark.slow
def test_rerun_with_the_replay_cache_makes_no_backend_call_and_replays_exactly(real_run, cache_dir, tmp_path,
                                                                            monkeypatch):
    """The same command again, in this process (a second `agora` process would spend ten seconds
    importing the embedder to replay what the cache holds)."""
    _, _, first = real_run
    monkeypatch.setenv("AGORA_CACHE_DIR", str(cache_dir))
    proc = agora("run", str(MINIMAL), "--ticks", str(REAL_TICKS), "--out", str(tmp_path))
    assert proc.exit_code == 0, proc.output
    again = sqlite_utils.Database(Path(proc.stdout.strip().splitlines()[-1]) / "run.db")
    calls = again["llm_calls"].count
    assert calls == first["llm_calls"].count
    assert again.execute("select sum(cache_hit) from llm_calls").fetchone()[0] == calls, "every call was replayed"
    assert again.execute("select sum(cache_hits) from ticks").fetchone()[0] == again.execute(
        "select sum(llm_calls) from ticks").fetchone()[0]
    assert _events(again) == _events(first)
    assert [r[0] for r in again.execute("select completion from llm_calls order by id")] == \
        [r[0] for r in first.execute("select completion from llm_calls order by id")]
    assert "cache" in proc.stdout  # the summary's LLM table (headers wrap in a narrow terminal)


@pytest.mark.slow
def test_real_run_records_everything(real_run):
    proc, run_dir, db = real_run
    assert run_dir.is_dir() and (run_dir / "run.db").is_file()
    run = next(db["runs"].rows)
    assert run["status"] == "finished" and run["ticks_done"] == REAL_TICKS
    assert run["backend"] == "llamacpp" and run["model"].startswith("SmolLM2-135M-Instruct.Q8_0.gguf@")
    agents = {r["agent_id"] for r in db["agents"].rows}
    assert agents == {"ann", "bob"}
    with_events = {r["agent_id"] for r in db.query("select distinct agent_id from events")}
    with_memories = {r["agent_id"] for r in db.query("select distinct agent_id from memories")}
    assert agents <= with_events and agents <= with_memories


@pytest.mark.slow
def test_real_run_accounts_every_llm_call(real_run):
    _, _, db = real_run
    calls = db["llm_calls"].count
    in_ticks = db.execute("select sum(llm_calls) from ticks").fetchone()[0]
    probe_calls = db.execute("select count(*) from llm_calls where purpose like 'probe%'").fetchone()[0]
    # a probe's first question (answer, or "I have not heard of it") is a scored choice, calibrated
    # against its content-free version: asked once, after the last tick, under purpose "calibrate"
    first_probe = db.execute("select min(id) from llm_calls where purpose like 'probe%'").fetchone()[0]
    probe_baseline = db.execute("select count(*) from llm_calls where purpose = 'calibrate' and id > ?",
                                [first_probe]).fetchone()[0]
    assert probe_baseline <= 1
    assert calls > 0 and calls == in_ticks + probe_calls + probe_baseline
    assert db.execute("select count(*) from llm_calls where prompt_tokens = 0").fetchone()[0] == 0
    assert db["probes"].count == 2, "one question for each of the two"
    assert all(r["parse_ok"] in (0, 1) for r in db["llm_calls"].rows)
    ok = db.execute("select avg(parse_ok) from llm_calls").fetchone()[0]
    assert ok > 0.5, "grammar-constrained answers from the bundled model mostly parse"


@pytest.mark.slow
def test_real_run_summary_is_honest_about_conversations(real_run):
    proc, _, db = real_run
    out = proc.stdout
    assert "People" in out and "Probe answers" in out
    if db["conversations"].count:
        assert f"{db['conversations'].count} conversation(s)" in out
    else:
        assert "No conversations happened" in out
    assert "Traceback" not in proc.stderr


@pytest.mark.heavy
def test_missing_scenario_exits_2(tmp_path):
    proc = agora_process("run", str(tmp_path / "nope.yaml"))
    assert proc.returncode == 2
    assert "nope.yaml" in proc.stderr and "not found" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.heavy
def test_missing_model_file_exits_2(tmp_path):
    proc = agora_process("run", str(FLAGSHIP), "--model", str(tmp_path / "none.gguf"), "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "none.gguf" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.heavy
def test_model_that_is_not_a_model_exits_1_without_traceback(tmp_path):
    fake = tmp_path / "fake.gguf"
    fake.write_text("not a model")
    proc = agora_process("run", str(FLAGSHIP), "--model", str(fake), "--out", str(tmp_path / "runs"), "--ticks", "1")
    assert proc.returncode == 1
    assert "cannot load model" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.heavy
def test_bad_tick_count_exits_2(tmp_path):
    proc = agora_process("run", str(FLAGSHIP), "--ticks", "0", "--out", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_same_seed_same_run_on_the_real_model(real_run, tmp_path):
    """Deterministic end to end: same scenario, seed and model give the same events and answers,
    here ``agora run`` in its own process (real_run) and the API in this one, whose model may have
    answered other tests before. Comparing with real_run rather than making two runs saves one
    real-model run (35 s idle); two runs of the flagship took 111 s idle and 528 s on a busy machine,
    close to pytest's 900 s limit (whose timeout then hung the old batcher: tests/test_batching.py)."""
    from simulation import Simulation, scenario
    from simulation.llm.factory import BackendChoice

    _, _, first = real_run
    with Simulation.from_scenario(scenario.load(MINIMAL), out=tmp_path, ticks=REAL_TICKS,
                                  llm=BackendChoice(cache="off")) as sim:
        assert sim.run().status == "finished"
    second = sqlite_utils.Database(sim.run_dir / "run.db")
    assert next(second["runs"].rows)["backend"] == "llamacpp"

    def answers(db):
        return [r["completion"] for r in db.query("select completion from llm_calls order by id")]

    assert answers(first), "the run asked the model something"
    assert second.execute("select sum(cache_hit) from llm_calls").fetchone()[0] == 0, "no answer was replayed"
    assert _events(second) == _events(first)
    assert answers(second) == answers(first)


@pytest.mark.heavy
def test_ctrl_c_stops_between_ticks_and_keeps_what_was_committed(tmp_path):
    """The small flagship against the scripted answers served over HTTP (the openai backend): what
    is tested is the stop, and the real model's first tick alone would take 30 s (real_run above
    runs the real model as a process)."""
    import signal
    import time

    from llm_servers import FaultServer, scripted_answer

    out = tmp_path / "runs"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with FaultServer(answer=scripted_answer) as server:
        proc = subprocess.Popen([*AGORA, "run", str(SMALL), "--ticks", "100", "--out", str(out), "--cache", "off",
                                 "--backend", "openai", "--base-url", server.url, "--model", "scripted"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            deadline = time.monotonic() + 900
            db_path = None
            while time.monotonic() < deadline:
                found = list(out.glob("*/run.db"))
                if found:
                    db_path = found[0]
                    try:
                        if sqlite_utils.Database(db_path)["ticks"].count >= 1:
                            break
                    except Exception:
                        pass
                time.sleep(0.2)
            assert db_path is not None, "the run started"
            proc.send_signal(signal.SIGINT)
            sent = time.monotonic()
            stdout, stderr = proc.communicate(timeout=120)
            waited = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "saved in" in stderr and "Traceback" not in stderr
    db = sqlite_utils.Database(db_path)
    run = next(db["runs"].rows)
    assert run["status"] == "interrupted"
    n = db["ticks"].count
    assert n >= 1 and run["ticks_done"] == n
    assert db.execute("select count(distinct tick) from agent_states").fetchone()[0] == n, "whole ticks only"
    print(f"stopped {waited:.1f} s after Ctrl-C")
