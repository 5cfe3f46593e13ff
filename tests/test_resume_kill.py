"""``agora run`` killed with SIGKILL, at random ticks and mid-transaction, then ``agora resume``:
the final run.db must hold exactly the rows of a run never interrupted.

The agents' LLM is the scripted test double served over real HTTP (``FaultServer`` with the
scripted answers), reached through the openai backend and the replay cache, so these runs
go through the same code as a run against a vLLM server. Each kill point is logged in the
test output (-rP) so the figures in the closing note can be reproduced.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import agora
from llm_servers import FaultServer, scripted_answer
from test_resume import assert_same_run

ROOT = Path(__file__).resolve().parents[1]
FLAGSHIP = ROOT / "scenarios" / "valentines-small.yaml"
"""The eight-person flagship: every kill point of a 25-person run tests nothing more, at three times the cost."""
HOOKS = Path(__file__).parent / "hooks"
TICKS = 14


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory) -> Path:
    """The flagship with a short patience, so a vanished server ends the run within seconds."""
    root = tmp_path_factory.mktemp("scenario")
    (root / "personas").symlink_to(ROOT / "personas")
    (root / "scenarios").mkdir()
    text = FLAGSHIP.read_text().replace("  backend: llamacpp\n", "  backend: openai\n").replace(
        "  threads: null\n", "  timeout_s: 5\n  max_retries: 1\n  patience_s: 2\n").replace(
        "  sequences: 8\n", "")  # threads and sequences: llamacpp's own
    assert "\n  backend: openai\n" in text and "\n  patience_s: 2\n" in text
    path = root / "scenarios" / "valentines-small.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def reference(scenario_file, tmp_path_factory, embedder) -> Path:
    """The uninterrupted run, against its own server and cache."""
    tmp = tmp_path_factory.mktemp("reference")
    with FaultServer(answer=scripted_answer) as server:
        return run_here(scenario_file, tmp, server.url, tmp / "cache.sqlite")


def run_here(scenario: Path, out: Path, url: str, cache: Path) -> Path:
    """``agora run SCENARIO --ticks TICKS`` with ``llm_args(url, cache)``, in this process: the run
    loop the command drives (``Simulation.run``) with the same backend options. An `agora` process
    spends most of a 14-tick run starting up (torch, the embedder); the runs that must be processes
    (killed, stopped, resumed) are, and comparing them with these shows the command adds nothing."""
    from simulation import Simulation
    from simulation import scenario as sc
    from simulation.llm.factory import BackendChoice

    choice = BackendChoice(backend="openai", model="scripted", base_urls=[url], cache_path=str(cache))
    with Simulation.from_scenario(sc.load(scenario), out=out, ticks=TICKS, llm=choice) as sim:
        summary = sim.run()
    assert summary.status == "finished" and summary.ticks_done == TICKS
    return sim.run_dir


def agora_popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "simulation.cli", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(HOOKS), **(env or {})})


def llm_args(url: str, cache: Path) -> list[str]:
    return ["--backend", "openai", "--base-url", url, "--model", "scripted", "--cache-path", str(cache)]


def ticks_done(run_dir: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("select ticks_done from runs").fetchone()[0]
        finally:
            con.close()
    except (sqlite3.OperationalError, TypeError):  # not created yet
        return 0


def kill_when(proc: subprocess.Popen[str], ready, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"agora exited ({proc.returncode}) before {what}: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)


def finish_here(*args: str) -> str:
    """``agora resume ...`` to the end, in this process: what these tests stop is a process (killed,
    signalled, left without its server); the resume that finishes the run is the same command
    either way, and a new process would spend ten seconds importing the embedder."""
    result = agora("resume", *args)
    assert result.exit_code == 0, result.output[-3000:]
    assert "Traceback" not in result.output
    return result.stdout


@pytest.mark.heavy
def test_sigkill_at_random_ticks_and_mid_transaction_then_resume_matches_an_uninterrupted_run(
        tmp_path, scenario_file, reference):
    rng = random.Random(20261122)
    kills: list[str] = []
    with FaultServer(answer=scripted_answer) as server:
        out = tmp_path / "killed"
        proc = agora_popen("run", str(scenario_file), "--ticks", str(TICKS), "--out", str(out), "--quiet",
                     *llm_args(server.url, tmp_path / "cache-killed.sqlite"))
        run_dir: Path | None = None

        def reached(n: int):
            def ready() -> bool:
                nonlocal run_dir
                found = list(out.glob("*/run.db"))
                if found:
                    run_dir = found[0].parent
                return run_dir is not None and ticks_done(run_dir) >= n
            return ready

        # 1. between ticks, at a random tick
        first = rng.randint(2, 5)
        kill_when(proc, reached(first), f"tick {first}")
        assert run_dir is not None
        kills.append(f"SIGKILL after {ticks_done(run_dir)} committed ticks (aimed at {first})")

        # 2. inside the commit transaction of a later tick
        middle = ticks_done(run_dir) + rng.randint(1, 3)
        marker = tmp_path / "in-commit"
        proc = agora_popen("resume", str(run_dir), "--quiet", *llm_args(server.url, tmp_path / "cache-killed.sqlite"),
                     env={"AGORA_TEST_PAUSE_IN_COMMIT": f"{middle}:{marker}"})
        kill_when(proc, marker.exists, f"the commit of tick {middle}")
        assert ticks_done(run_dir) == middle, "a tick killed mid-transaction must leave no trace"
        kills.append(f"SIGKILL inside the transaction of tick {middle} (run.db kept {middle} ticks)")

        # 3. once more at a random point in time, then to the end
        proc = agora_popen("resume", str(run_dir), "--quiet", *llm_args(server.url, tmp_path / "cache-killed.sqlite"))
        third = rng.randint(middle + 2, TICKS - 2)
        kill_when(proc, reached(third), f"tick {third}")
        time.sleep(rng.random() * 0.5)
        kills.append(f"SIGKILL after {ticks_done(run_dir)} committed ticks (aimed at {third})")
        finish_here(str(run_dir), "--quiet", *llm_args(server.url, tmp_path / "cache-killed.sqlite"))
    print("\n".join(kills))
    assert_same_run(reference, run_dir)
    con = sqlite3.connect(run_dir / "run.db")
    assert con.execute("select status, ticks_done from runs").fetchone() == ("finished", TICKS)
    assert con.execute("select resumes from resume_state").fetchone() == (3,)


@pytest.mark.heavy
def test_server_gone_stops_at_a_tick_boundary_and_resumes_on_another_server(tmp_path, scenario_file, reference):
    out = tmp_path / "runs"
    cache = tmp_path / "cache.sqlite"
    with FaultServer(answer=scripted_answer) as first:
        proc = agora_popen("run", str(scenario_file), "--ticks", str(TICKS), "--out", str(out), "--quiet",
                     *llm_args(first.url, cache))
        deadline = time.monotonic() + 300
        while not (found := list(out.glob("*/run.db"))) or ticks_done(found[0].parent) < 3:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    # the server is gone now, mid-run
    _, errors = proc.communicate(timeout=300)
    run_dir = found[0].parent
    assert proc.returncode == 1, errors[-2000:]
    assert first.url.removesuffix("/v1") in errors and "Traceback" not in errors
    assert f"continue with: agora resume {run_dir}" in errors
    con = sqlite3.connect(run_dir / "run.db")
    status, done = con.execute("select status, ticks_done from runs").fetchone()
    assert status == "failed" and 3 <= done < TICKS
    assert con.execute("select count(*) from ticks").fetchone()[0] == done
    con.close()
    with FaultServer(answer=scripted_answer) as second:
        finish_here(str(run_dir), "--quiet", "--base-url", second.url, "--cache-path", str(cache))
    assert_same_run(reference, run_dir)


@pytest.mark.heavy
def test_sigterm_stops_like_ctrl_c_and_says_how_to_resume(tmp_path, scenario_file, reference):
    """SIGTERM (a scheduler, `docker stop`) is a graceful stop like Ctrl-C (test_run_e2e sends SIGINT)."""
    with FaultServer(answer=scripted_answer) as server:
        out = tmp_path / "runs"
        proc = agora_popen("run", str(scenario_file), "--ticks", str(TICKS), "--out", str(out), "--quiet",
                     *llm_args(server.url, tmp_path / "cache.sqlite"))
        deadline = time.monotonic() + 300
        while not (found := list(out.glob("*/run.db"))) or ticks_done(found[0].parent) < 2:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, errors = proc.communicate(timeout=120)
        run_dir = found[0].parent
        assert proc.returncode == 130
        assert "Traceback" not in errors
        assert f"agora resume {run_dir}" in errors
        con = sqlite3.connect(run_dir / "run.db")
        status, done = con.execute("select status, ticks_done from runs").fetchone()
        assert status == "interrupted" and done >= 2
        assert con.execute("select count(distinct tick) from ticks").fetchone()[0] == done
        con.close()
        finish_here(str(run_dir), "--quiet", *llm_args(server.url, tmp_path / "cache.sqlite"))
    assert_same_run(reference, run_dir)


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (["resume", "no/such/run"], 2, "run directory not found"),
    (["resume", "."], 2, "has no run.db"),
])
@pytest.mark.heavy
def test_resume_bad_input_exits_2(args, code, fragment):
    proc = subprocess.run([sys.executable, "-m", "simulation.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == code and fragment in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.heavy
def test_transient_server_faults_change_nothing(tmp_path, scenario_file, reference):
    """500s, 429s and dropped connections sprinkled over the run's requests: the openai backend's
    retries absorb them and the run is row for row the uninterrupted one (in this process: what
    is tested is the backend, and the tests above run the command)."""
    rng = random.Random(7)
    script = [rng.choice(["500", "429", "reset"]) if rng.random() < 0.2 else "ok" for _ in range(60)]
    faults = sum(action != "ok" for action in script)
    patient = scenario_file.with_name("patient.yaml")  # the same town, retrying for longer
    patient.write_text(scenario_file.read_text().replace("  max_retries: 1", "  max_retries: 10").replace(
        "  patience_s: 2", "  patience_s: 60"))
    with FaultServer(script, answer=scripted_answer) as server:
        run_dir = run_here(patient, tmp_path, server.url, tmp_path / "cache.sqlite")
        served = len(server.bodies)
    print(f"{faults} faults scheduled over the first {len(script)} of {served} requests")
    assert served > len(script), "the run must have gone through the whole fault schedule"
    assert_same_run(reference, run_dir, skip=("runs",))  # its scenario file says how long to retry
