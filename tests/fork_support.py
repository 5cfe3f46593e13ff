"""What the fork tests share: a parent run and forks of it on the scripted double."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulation import Simulation
from simulation.testing import ScriptedBackend


def run_parent(scenario: Any, out: Path, ticks: int, seed: int = 3) -> Path:
    """A finished scripted run of ``scenario`` (the parent every fork test forks)."""
    sim = Simulation.from_scenario(scenario, backend=ScriptedBackend(), out=out, ticks=ticks, seed=seed)
    with sim:
        sim.run()
    return sim.run_dir


def run_fork(parent: Path, out: Path, at: int, **kw: Any) -> Simulation:
    """A finished scripted fork of ``parent`` at tick ``at`` (``Simulation.fork``'s keywords)."""
    sim = Simulation.fork(parent, at=at, out=out, backend=ScriptedBackend(), **kw)
    with sim:
        sim.run()
    return sim
