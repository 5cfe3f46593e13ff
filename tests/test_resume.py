"""Resume: a run stopped at any point continues from its last committed tick, exactly.

In process, with the scripted backend: a run that fails mid-tick (the backend raises on a
chosen batch) is resumed with ``resume_run`` and must end with the same rows, table by
table, as a run of the same seed that was never interrupted. The subprocess tests with
SIGKILL are in test_resume_kill.py.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import step_run

from simulation import Simulation
from simulation.errors import InputError, RunError
from simulation.rundb.diff import first_difference
from simulation.testing import ScriptedBackend

TICKS = 30


def assert_same_run(a: Path, b: Path, skip: tuple[str, ...] = ()) -> None:
    """Every row of every table the same, without what measures the machine (``rundb.diff``);
    ``skip``: tables that differ by design (a run of another scenario file records its text)."""
    tables = None
    if skip:
        con = sqlite3.connect(a / "run.db")
        tables = [r[0] for r in con.execute("select name from sqlite_master where type = 'table' "
                                            "and name != 'resume_state'") if r[0] not in skip]
        con.close()
    difference = first_difference(b / "run.db", a / "run.db", tables)
    assert difference is None, str(difference)


class FailingBackend(ScriptedBackend):
    """Answers like the scripted backend, then dies on its ``fail_at``-th batch (mid-tick)."""

    def __init__(self, fail_at: int):
        super().__init__()
        self.fail_at = fail_at

    def generate(self, requests, on_done=None):
        if len(self.batches) + 1 >= self.fail_at:
            raise RunError("server gone (test)")
        return super().generate(requests, on_done)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, flagship, embedder) -> Path:
    """The uninterrupted run: TICKS ticks and the probes."""
    from simulation import Simulation

    run = Simulation.from_scenario(flagship, backend=ScriptedBackend(), out=tmp_path_factory.mktemp("ref"), ticks=TICKS)
    step_run(run)
    run.model.ask_probes()
    run.close("finished")
    return run.run_dir


def _fail_then_resume(make_run, fail_at: int, backend_after=None) -> tuple[Path, int]:
    run = make_run(FailingBackend(fail_at), ticks=TICKS)
    with pytest.raises(RunError):
        step_run(run)
    stopped_at = run.model.tick
    run.close("failed", "server gone (test)")
    run.store.close()
    resumed = Simulation.resume(run.run_dir, backend=backend_after or ScriptedBackend())
    assert resumed.model.tick == stopped_at
    assert resumed.ticks == TICKS - stopped_at
    step_run(resumed)
    resumed.model.ask_probes()
    resumed.close("finished")
    return resumed.run_dir, stopped_at


@pytest.mark.parametrize("fail_at", [9, 23, 41])
def test_a_run_failed_mid_tick_resumes_to_the_same_rows_as_an_uninterrupted_one(make_run, reference, fail_at):
    run_dir, stopped_at = _fail_then_resume(make_run, fail_at)
    assert 0 < stopped_at < TICKS
    assert_same_run(reference, run_dir)
    con = sqlite3.connect(run_dir / "run.db")
    status, resumes = con.execute("select status, resumes from runs join resume_state using (run_id)").fetchone()
    assert (status, resumes) == ("finished", 1)


def test_resume_point_can_fall_inside_a_conversation(make_run, reference):
    """At least one of the resume points above must leave a conversation open, or the test
    would not cover restoring one: check it on the reference run's rows."""
    con = sqlite3.connect(reference / "run.db")
    ticks_with_open = {t for (t,) in con.execute(
        "select distinct tick from agent_states where status = 'talking'")}
    run = make_run(FailingBackend(23), ticks=TICKS)
    with pytest.raises(RunError):
        step_run(run)
    assert run.model.tick - 1 in ticks_with_open or run.model.tick in ticks_with_open


def test_died_before_the_first_tick_starts_afresh(make_run, reference):
    run_dir, stopped_at = _fail_then_resume(make_run, 1)
    assert stopped_at == 0
    assert_same_run(reference, run_dir)


def test_killed_while_its_model_was_built_gets_its_people_places_and_paths_on_resume(make_run, reference,
                                                                                    monkeypatch, tmp_path):
    """A process killed after the run's row was written but before its fixed rows (while the
    model loads) left a run without its people: resumed, it ran every tick, and its per-person
    figures read as if nobody lived there (calls per person-hour None, nobody aware)."""
    from simulation.run import runner

    locks = []
    take = runner.RunLock.take.__func__
    monkeypatch.setattr(runner.RunLock, "take", classmethod(lambda cls, d: locks.append(take(cls, d)) or locks[-1]))

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(runner, "record_static", killed)
        with pytest.raises(KeyboardInterrupt):
            make_run(ScriptedBackend(), ticks=TICKS)
    for lock in locks:
        lock.release()  # what the OS does for a killed process
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "run.db").exists()]
    con = sqlite3.connect(run_dir / "run.db")
    assert con.execute("select count(*) from agents").fetchone()[0] == 0
    assert con.execute("select status from runs").fetchone()[0] == "running"
    con.close()
    resumed = Simulation.resume(run_dir, backend=ScriptedBackend())
    step_run(resumed)
    resumed.model.ask_probes()
    resumed.close("finished")
    assert_same_run(reference, run_dir)


def test_resumed_twice(make_run, reference):
    run = make_run(FailingBackend(9), ticks=TICKS)
    with pytest.raises(RunError):
        step_run(run)
    run.close("failed")
    resumed = Simulation.resume(run.run_dir, backend=FailingBackend(15))
    with pytest.raises(RunError):
        step_run(resumed)
    assert resumed.model.tick > run.model.tick
    resumed.close("failed")
    again = Simulation.resume(run.run_dir, backend=ScriptedBackend())
    step_run(again)
    again.model.ask_probes()
    again.close("finished")
    assert_same_run(reference, run.run_dir)


def test_memory_and_index_are_rebuilt_from_run_db(make_run, flagship):
    run = make_run(ScriptedBackend(), ticks=8)
    step_run(run)
    run.close("interrupted")
    live = run.model.memory
    resumed = Simulation.resume(run.run_dir, ticks=1, backend=ScriptedBackend())
    memory = resumed.model.memory
    memory.set_time(live.tick, live.now)  # score recency at the same moment
    assert sorted(memory.nodes) == sorted(live.nodes)
    assert memory.index is not None and len(memory.index) == len(live.index)
    for agent_id in sorted(resumed.model.people):
        a, b = live.stream(agent_id), memory.stream(agent_id)
        assert [n.id for n in a.nodes] == [n.id for n in b.nodes]
        assert [n.id for n in a.unrated] == [n.id for n in b.unrated]
        assert a.since_reflection == pytest.approx(b.since_reflection)
        query = f"{flagship.persona(agent_id).name} and the party"
        assert [n.id for n in live.search(agent_id, query)] == [n.id for n in memory.search(agent_id, query)]
    resumed.close("interrupted")


def test_finished_run_needs_ticks_to_go_on(make_run):
    run = make_run(ScriptedBackend(), ticks=2)
    step_run(run)
    run.model.ask_probes()
    run.close("finished")
    with pytest.raises(RunError, match="has finished"):
        Simulation.resume(run.run_dir, backend=ScriptedBackend())
    more = Simulation.resume(run.run_dir, ticks=2, backend=ScriptedBackend())
    step_run(more)
    more.close("finished")
    con = sqlite3.connect(run.run_dir / "run.db")
    assert con.execute("select ticks_done, ticks_planned from runs").fetchone() == (4, 4)


def test_a_run_in_progress_is_locked(make_run):
    run = make_run(ScriptedBackend(), ticks=3)
    step_run(run, 1)
    with pytest.raises(RunError, match="is being run by process"):
        Simulation.resume(run.run_dir, backend=ScriptedBackend())
    run.close("interrupted")
    resumed = Simulation.resume(run.run_dir, backend=ScriptedBackend())
    assert resumed.ticks == 2
    resumed.close("interrupted")


def test_not_a_run_directory(tmp_path):
    with pytest.raises(InputError, match="run directory not found"):
        Simulation.resume(tmp_path / "nowhere")
    with pytest.raises(InputError, match="has no run.db"):
        Simulation.resume(tmp_path)
    (tmp_path / "run.db").write_bytes(b"this is not sqlite at all, just text" * 50)
    with pytest.raises(InputError, match="not a readable run.db"):
        Simulation.resume(tmp_path)


def test_state_is_json_in_run_db(make_run):
    run = make_run(ScriptedBackend(), ticks=3)
    step_run(run)
    run.close("finished")
    con = sqlite3.connect(run.run_dir / "run.db")
    tick, state = con.execute("select tick, state from resume_state").fetchone()
    assert tick == 2
    parsed = json.loads(state)
    assert parsed["tick"] == 2 and set(parsed["agents"]) == set(run.model.people)


def test_a_stuck_phase_stops_at_the_tick_boundary_names_who_waits_and_resumes_exactly(make_run, reference,
                                                                                     monkeypatch):
    """The watchdog end to end: one agent's step waits on a future nobody resolves, mid-run. The
    tick in flight is dropped, the error names the phase and the agent, and the run resumes to the
    same rows as the uninterrupted one."""
    import asyncio

    import simulation.cognition.decide as decide
    from simulation.llm.batching import PhaseStuck

    real = decide.plan_steps
    stuck: list[str] = []

    async def plan_steps(me, mind):
        if mind.tick >= 5 and not stuck:
            stuck.append(me.id)
            await asyncio.get_running_loop().create_future()
        return await real(me, mind)

    monkeypatch.setattr(decide, "plan_steps", plan_steps)
    run = make_run(ScriptedBackend(), ticks=TICKS)
    run.model.loop.stall_s = 0
    with pytest.raises(PhaseStuck) as error:
        step_run(run)
    stopped_at = run.model.tick
    assert stopped_at >= 5
    assert f"phase 'decide' is stuck" in str(error.value) and f"{stuck[0]}: waiting at" in str(error.value)
    run.close("failed", str(error.value))
    run.store.close()
    con = sqlite3.connect(run.run_dir / "run.db")
    assert con.execute("select ticks_done from runs").fetchone()[0] == stopped_at, "committed ticks kept"
    con.close()
    monkeypatch.undo()
    resumed = Simulation.resume(run.run_dir, backend=ScriptedBackend())
    step_run(resumed)
    resumed.model.ask_probes()
    resumed.close("finished")
    assert_same_run(reference, resumed.run_dir)


def test_resumed_memories_keep_their_whole_provenance(make_run):
    """A memory's fact (a whisper's) and a line's words come back on resume: what a person still
    has to tell someone depends on them (``aims.untold_news``), so losing them changed later moves."""
    run = make_run(ScriptedBackend(), ticks=TICKS)
    step_run(run, 12)
    before = {n.id: n.provenance for n in run.model.memory.nodes.values()}
    assert any(p is not None and p.fact for p in before.values()), "a whisper names its fact"
    assert {str(p.source) for p in before.values() if p is not None and p.quote} >= {"heard", "said", "recapped",
                                                                                      "perceived"}
    run.close("failed")
    resumed = Simulation.resume(run.run_dir, backend=ScriptedBackend())
    after = {n.id: n.provenance for n in resumed.model.memory.nodes.values()}
    resumed.close("failed")
    assert after == before
