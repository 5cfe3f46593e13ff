"""The ``Simulation`` facade: the one run loop, as a notebook, the CLI and the benchmarks use it."""

from __future__ import annotations

import sqlite3
from datetime import datetime

import pytest
from conftest import MINIMAL

from simulation import Simulation
from simulation.cognition import default_phases
from simulation.errors import RunError
from simulation.testing import ScriptedBackend


def status(sim: Simulation) -> tuple[str, int, str | None]:
    con = sqlite3.connect(sim.run_dir / "run.db")
    try:
        return con.execute("select status, ticks_done, message from runs").fetchone()
    finally:
        con.close()


def test_step_run_summary_and_finish(tmp_path):
    backend = ScriptedBackend()
    seen = []
    with Simulation.from_yaml(MINIMAL, backend=backend, out=tmp_path, ticks=4, seed=3) as sim:
        sim.step()
        assert (sim.tick, sim.now) == (1, datetime(2023, 2, 13, 7, 10))
        summary = sim.run(on_tick=lambda s: seen.append(s.tick))
        assert seen == [2, 3, 4]
        assert summary.ticks_done == 4 and summary.status == "finished"
        assert sim.status == "finished"
        assert len(summary.probes) == 2, "the probes were asked once every planned tick was done"
    assert status(sim) == ("finished", 4, None)
    assert not getattr(backend, "closed", False), "a backend object passed in is the caller's to close"
    with pytest.raises(RunError, match="closed"):
        sim.step()
    with pytest.raises(RunError, match="has finished"):
        Simulation.resume(sim.run_dir, backend=ScriptedBackend())


def test_closing_early_leaves_a_resumable_run_and_resume_finishes_it(tmp_path):
    with Simulation.from_yaml(MINIMAL, backend=ScriptedBackend(), out=tmp_path, ticks=4) as sim:
        sim.run(ticks=2)
        assert sim.status == "running"
    assert status(sim) == ("interrupted", 2, "closed after 2 tick(s)")
    with Simulation.resume(sim.run_dir, backend=ScriptedBackend()) as again:
        assert again.tick == 2 and again.ticks_left == 2
        again.run()
    assert status(again)[:2] == ("finished", 4)


def test_an_error_inside_the_block_is_recorded_and_the_lock_released(tmp_path):
    with pytest.raises(RunError):
        with Simulation.from_yaml(MINIMAL, backend=ScriptedBackend(), out=tmp_path, ticks=4) as sim:
            sim.step()
            raise RunError("the server went away")
    assert status(sim) == ("failed", 1, "the server went away")
    with Simulation.resume(sim.run_dir, backend=ScriptedBackend()) as again:  # the lock is free again
        again.run()


def test_the_phases_can_be_replaced(tmp_path):
    """Without the decide phase nobody plans: the run still steps, and asks no plan question."""
    backend = ScriptedBackend()
    phases = [p for p in default_phases() if p.name != "decide"]
    with Simulation.from_yaml(MINIMAL, backend=backend, out=tmp_path, ticks=3, phases=phases) as sim:
        sim.run(ticks=3)
    purposes = {r.purpose for batch in backend.batches for r in batch}
    assert "plan" not in purposes and "steps" not in purposes


def test_a_scenario_names_its_phases_and_a_wrong_name_is_bad_input(tmp_path):
    import yaml

    from simulation.errors import InputError

    data = yaml.safe_load(MINIMAL.read_text())
    data["cognition"] = {"phases": ["perceive", "test_phases:Gossip", "converse"]}
    path = tmp_path / "gossip.yaml"
    path.write_text(yaml.safe_dump(data))
    with Simulation.from_yaml(path, backend=ScriptedBackend(), out=tmp_path, ticks=2) as sim:
        assert [p.name for p in sim.model.phases] == ["perceive", "gossip", "converse"]
        sim.run()
        said = sim.db.execute("select count(*) from memories where text like '%rumour about a party%'").fetchone()[0]
        assert said > 0, "the phase of one's own ran"
    data["cognition"] = {"phases": ["perceive", "daydream"]}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"gossip.yaml:\d+:\d+: cognition.phases\[1\]: unknown phase 'daydream'"):
        Simulation.from_yaml(path, backend=ScriptedBackend(), out=tmp_path, ticks=2)
