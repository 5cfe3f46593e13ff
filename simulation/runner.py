"""Starting a run: resolve settings, open run.db, build the backend and the model, step it.

The CLI is a thin shell over this module, and tests drive runs through it with a scripted
backend, so what a test checks is what ``agora run`` does.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from simulation import __version__
from simulation.llm.backend import Backend
from simulation.llm.factory import BackendChoice
from simulation.llm.types import RawCompletion
from simulation.model import TownModel
from simulation.scenario import LLMSettings, LoadedScenario, resolve_path
from simulation.store import SCHEMA_VERSION, RunStore, dumps, now_iso


@dataclass
class RunOptions:
    out: Path = Path("runs")
    ticks: int | None = None
    """Ticks to run; None = the scenario's full duration."""
    seed: int | None = None
    llm: BackendChoice = field(default_factory=BackendChoice)
    """Command-line overrides of the scenario's ``llm:`` settings."""


def llm_settings(loaded: LoadedScenario, choice: BackendChoice) -> LLMSettings:
    """The scenario's LLM settings with the command line's overrides. A model path given on the
    command line is relative to the working directory, one in the scenario to the scenario file."""
    if choice.model and resolve_path(choice.model, Path.cwd()).exists():
        choice = replace(choice, model=str(resolve_path(choice.model, Path.cwd())))
    return choice.apply(loaded.scenario.llm)


def make_backend(loaded: LoadedScenario, options: RunOptions) -> Backend:
    from simulation.llm.factory import build_backend

    return build_backend(llm_settings(loaded, options.llm), Path(loaded.path).parent)


def new_run_id(name: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


@dataclass
class Run:
    run_id: str
    run_dir: Path
    store: RunStore
    model: TownModel
    ticks: int


def create_run(
    loaded: LoadedScenario,
    backend: Backend,
    options: RunOptions,
    on_llm: Callable[[RawCompletion], None] | None = None,
) -> Run:
    """Make the run directory and run.db, record the run's settings, and build the model."""
    sc = loaded.scenario
    run_id = new_run_id(sc.name)
    run_dir = Path(options.out) / run_id
    store = RunStore.create(run_dir, run_id)
    ticks = options.ticks if options.ticks is not None else sc.clock.total_ticks
    seed = sc.seed if options.seed is None else options.seed
    store.db["runs"].insert({
        "run_id": run_id, "scenario": sc.name, "scenario_path": loaded.path, "scenario_yaml": loaded.source_text,
        "description": sc.description, "seed": seed, "backend": backend.name, "model": backend.model_id,
        "tick_minutes": sc.clock.tick_minutes, "start_time": sc.clock.start.strftime("%Y-%m-%d %H:%M"),
        "ticks_planned": ticks, "ticks_done": 0, "status": "running", "message": None,
        "started_at": now_iso(), "finished_at": None, "agora_version": __version__,
        "schema_version": SCHEMA_VERSION,
    })
    model = TownModel(loaded, backend, store, seed=seed, on_llm=on_llm)
    static = store.buffer()
    for rp in loaded.people:
        p = rp.persona
        static.add("agents", {"agent_id": p.id, "name": p.name, "age": p.age, "occupation": p.occupation,
                              "home": rp.home, "start_place": rp.start_place, "source": rp.source,
                              "persona": dumps(p.model_dump(mode="json"))})
    layout = model.town.layout()
    for place in sc.town.places:
        x, y = layout[place.id]
        static.add("places", {"place_id": place.id, "name": place.name, "kind": place.kind,
                              "description": place.description, "objects": dumps(place.objects), "x": x, "y": y})
    for path in sc.town.paths:
        static.add("paths", {"a": path.between[0], "b": path.between[1], "minutes": path.minutes})
    store.commit(static)
    return Run(run_id, run_dir, store, model, ticks)


def finish(run: Run, status: str, message: str | None = None) -> None:
    run.store.update_run(status=status, message=message, finished_at=now_iso())
