"""Several runs at once (``--jobs N``, simulation/benchmark/parallel.py): the runs are those made one
at a time, row for row; a run's failure in a worker reaches the command as the same located
message; SIGTERM stops every run at its tick boundary and the same command resumes them.

Runs use the no-LLM control backend by name, which each worker process builds for itself."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, SMALL
from typer.testing import CliRunner

from simulation.benchmark.parallel import RunTask, run_tasks
from simulation.errors import InputError
from simulation.testing import ScriptedBackend

FORKED = ("seeds: [1, 2]\nticks: 5\nconditions:\n  - name: as_is\n  - name: hushed\n"
          "    fork: {of: as_is, at: 3, set: [cognition.reactions_per_hour=0],\n"
          "           whisper: [walter_hughes=The mill is for sale.]}\n")


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: t\nscenario: {SMALL}\n" + body, encoding="utf-8")
    return path


def _runs(out: Path) -> dict[tuple[str, int], Path]:
    data = json.loads((out / "experiment.json").read_text())
    return {(c["name"], r["seed"]): Path(r["run_dir"]) for c in data["conditions"] for r in c["runs"]}


@pytest.mark.heavy
def test_an_experiment_with_jobs_makes_the_runs_it_makes_one_at_a_time(tmp_path, embedder):
    from simulation.cli import app
    from simulation.rundb.diff import first_difference

    spec = _spec(tmp_path, FORKED)
    runner = CliRunner()
    for jobs in ("1", "2"):
        done = runner.invoke(app, ["experiment", str(spec), "--out", str(tmp_path / jobs), "--backend", "control",
                                   "--quiet", "--jobs", jobs])
        assert done.exit_code == 0, done.output
    alone, together = _runs(tmp_path / "1"), _runs(tmp_path / "2")
    assert sorted(alone) == sorted(together) == [(c, s) for c in ("as_is", "hushed") for s in (1, 2)]
    for key, run in alone.items():
        assert first_difference(run / "run.db", together[key] / "run.db") is None, key
    one = json.loads((tmp_path / "1" / "experiment.json").read_text())["effects"]
    two = json.loads((tmp_path / "2" / "experiment.json").read_text())["effects"]
    assert one == two


@pytest.mark.heavy
def test_a_failure_in_a_worker_is_the_same_located_message(tmp_path):
    missing = [RunTask("resume", seed, tmp_path / f"gone-{seed}") for seed in (1, 2)]
    with pytest.raises(InputError) as alone:
        run_tasks(missing, llm=None, backend=None, jobs=1)
    with pytest.raises(InputError) as second:
        run_tasks(missing[1:], llm=None, backend=None, jobs=1)
    with pytest.raises(InputError) as together:
        run_tasks(missing, llm=None, backend=None, jobs=2)
    # both fail at once; the first to fail stops the other, which may or may not have failed by then
    assert str(together.value) in (str(alone.value), str(second.value)) and "gone-1" in str(alone.value)


def test_jobs_need_a_backend_each_process_can_build(tmp_path):
    tasks = [RunTask("resume", seed, tmp_path / str(seed)) for seed in (1, 2)]
    with pytest.raises(InputError, match="--jobs: several runs at once need a backend"):
        run_tasks(tasks, llm=None, backend=ScriptedBackend(), jobs=2)
    with pytest.raises(InputError, match="--jobs: needs at least 1"):
        run_tasks(tasks, llm=None, backend=None, jobs=0)


def _statuses(out: Path) -> list[str]:
    found = []
    for db in sorted(out.glob("runs/*/run.db")):
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            try:
                found += [f"{status} {done}" for status, done in con.execute("select status, ticks_done from runs")]
            finally:
                con.close()
        except sqlite3.Error:  # being created
            pass
    return found


@pytest.mark.heavy
def test_sigterm_stops_every_run_on_a_fleet_and_the_same_command_resumes_them(tmp_path):
    """Two runs at once on two (scripted) servers: SIGTERM to ``agora bench behaviour`` stops both at
    their tick boundary (exit 130, each run interrupted, resumable), and the same command finishes
    them without making either again."""
    from llm_servers import FaultServer, scripted_answer

    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with FaultServer(answer=scripted_answer, delay=0.05) as one, FaultServer(answer=scripted_answer, delay=0.05) as two:
        command = [sys.executable, "-m", "simulation.cli", "bench", "behaviour", str(SMALL), "--seeds", "1,2",
                   "--ticks", "12", "--out", str(out), "--quiet",
                   "--jobs", "2", "--backend", "openai", "--model", "scripted", "--base-url", one.url,
                   "--base-url", two.url, "--cache-path", str(tmp_path / "cache.sqlite")]
        child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            deadline = time.monotonic() + 300
            while (len(_statuses(out)) < 2 or any(s.endswith(" 0") for s in _statuses(out))) \
                    and time.monotonic() < deadline:
                assert child.poll() is None, "ended before it could be stopped: " + child.stderr.read()[-2000:]
                time.sleep(0.1)
            child.send_signal(signal.SIGTERM)
            _, err = child.communicate(timeout=300)
        finally:
            if child.poll() is None:
                child.kill()
        assert child.returncode == 130, err[-3000:]
        assert "Traceback" not in err
        stopped = _statuses(out)
        assert len(stopped) == 2 and all(s.startswith("interrupted ") for s in stopped), stopped
        assert one.bodies and two.bodies, "both servers of the fleet were asked"
        again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [r["seed"] for r in json.loads((out / "behaviour.json").read_text())["runs"]] == [1, 2]
    assert _statuses(out) == ["finished 12", "finished 12"], "each stopped run was resumed, not made again"
