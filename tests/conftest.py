from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGSHIP = ROOT / "scenarios" / "valentines.yaml"
"""The flagship: 25 people over two game days (its validity is tested; it is too big for scripted runs)."""
SMALL = ROOT / "scenarios" / "valentines-small.yaml"
"""The flagship's first version: its 8 named people in 15 places, the town the scripted runs use."""
MINIMAL = ROOT / "tests" / "data" / "good" / "minimal.yaml"
"""Two people in two places: real-model tests that check a mechanism, not the town, run it."""
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def flagship():
    """The small flagship (``SMALL``): eight people make a lively scripted run in seconds."""
    from simulation import scenario

    return scenario.load(SMALL)


@pytest.fixture
def scripted():
    from simulation.testing import ScriptedBackend

    return ScriptedBackend()


@pytest.fixture
def make_run(tmp_path, flagship):
    """A ``Simulation`` of the flagship scenario (or ``loaded``) on a backend object."""
    from simulation import Simulation

    def _make(backend, ticks=12, seed=None, loaded=None, out=None, phases=None):
        return Simulation.from_scenario(loaded or flagship, backend=backend, out=out or tmp_path / "runs",
                                        ticks=ticks, seed=seed, phases=phases)

    return _make


@pytest.fixture(scope="session")
def embedder():
    """The bundled all-MiniLM-L6-v2, loaded once for the whole session (runs share it too)."""
    from simulation.memory.embeddings import get_embedder

    e = get_embedder()
    e.embed(["warm-up"])
    return e


def agora(*args, backend=None, monkeypatch=None, width=200, env=None):
    """``agora ARGS...`` run in this process (typer's ``CliRunner`` on ``simulation.cli.app``) on a
    terminal ``width`` columns wide, without colour; the ``Result`` has ``exit_code``, ``output``,
    ``stdout`` and ``stderr``. ``backend``: the object every backend the command builds is (set
    with ``monkeypatch``). ``env``: more environment variables for the command."""
    from typer.testing import CliRunner

    from simulation.cli import app

    if backend is not None:
        if monkeypatch is None:
            raise TypeError("agora(..., backend=...) needs monkeypatch= to put the backend in place")
        from simulation.llm import factory

        monkeypatch.setattr(factory, "build_backend", lambda settings, base, *more, **kw: backend)
    return CliRunner().invoke(app, [str(a) for a in args], terminal_width=width,
                              env={"NO_COLOR": "1", "COLUMNS": str(width), **(env or {})})


def step_run(run, n=None):
    """Step a run ``n`` ticks (default: all it was made for)."""
    for _ in range(n if n is not None else run.ticks):
        run.step()
    return run


def with_settings(loaded, **sections):
    """A copy of a loaded scenario with some settings changed, e.g. memory={"reflection_threshold": 20}."""
    sc = loaded.scenario.model_copy(deep=True)
    for name, values in sections.items():
        setattr(sc, name, getattr(sc, name).model_copy(update=values))
    return loaded.model_copy(update={"scenario": sc})
