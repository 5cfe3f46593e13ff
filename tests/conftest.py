from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGSHIP = ROOT / "scenarios" / "valentines.yaml"
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def flagship():
    from simulation import scenario

    return scenario.load(FLAGSHIP)


@pytest.fixture
def scripted():
    from scripted import ScriptedBackend

    return ScriptedBackend()


@pytest.fixture
def make_run(tmp_path, flagship):
    """Build a run of the flagship scenario on a backend; returns the runner's Run."""
    from simulation.runner import RunOptions, create_run

    def _make(backend, ticks=12, seed=None, loaded=None, out=None):
        return create_run(loaded or flagship, backend, RunOptions(out=out or tmp_path / "runs", ticks=ticks, seed=seed))

    return _make
