"""Starting a run: open run.db, record the run's settings (resolved once, ``RunSettings``), build the model.

The CLI is a thin shell over this module, and tests drive runs through it with a scripted
backend, so what a test checks is what ``agora run`` does.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from simulation.cognition import Phase
from simulation.errors import RunError
from simulation.llm.backend import Backend
from simulation.llm.factory import BackendChoice
from simulation.llm.groups import RunBackends, build_run_backends
from simulation.llm.types import RawCompletion
from simulation.record.recorder import person_row
from simulation.record.store import SCHEMA_VERSION, RunStore, dumps, now_iso
from simulation.rundb.groups import recorded_models
from simulation.run.settings import RunSettings
from simulation.scenario import LoadedScenario
from simulation.tick.model import TownModel
from simulation.version import __version__, engine_fingerprint, text_sha256


def new_run_id(name: str) -> str:
    """``name-YYYYmmdd-HHMMSS-xxxx``; the name is made safe for a directory name."""
    name = re.sub(r"[^\w.-]+", "-", name).strip("-.") or "run"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


@dataclass
class Run:
    run_id: str
    run_dir: Path
    store: RunStore
    model: TownModel
    ticks: int
    """Ticks this process steps (for a resumed run: the ones left)."""
    lock: RunLock | None = None
    probes_due: bool = True
    """False when a resumed run had asked its probes already (it died just before finishing)."""
    first_tick: int = 0
    """The tick this process started stepping at."""


def create_run(
    settings: RunSettings,
    backends: RunBackends,
    on_llm: Callable[[RawCompletion], None] | None = None,
    phases: Sequence[Phase] | None = None,
) -> Run:
    """Make the run directory and run.db, record the run's settings, and build the model."""
    loaded = settings.loaded
    sc = loaded.scenario
    run_id = new_run_id(sc.name)
    run_dir = settings.out / run_id
    store = RunStore.create(run_dir, run_id)
    backend = backends.default
    store.start({
        "scenario": sc.name, "scenario_path": loaded.path, "scenario_yaml": loaded.source_text,
        "description": sc.description, "seed": settings.seed, "backend": backend.name, "model": backend.model_id,
        "tick_minutes": sc.clock.tick_minutes, "start_time": sc.clock.start.strftime("%Y-%m-%d %H:%M"),
        "ticks_planned": settings.ticks, "ticks_done": 0, "status": "running", "message": None,
        "started_at": now_iso(), "finished_at": None, "agora_version": __version__,
        "schema_version": SCHEMA_VERSION, "engine": engine_fingerprint(),
        "scenario_sha256": text_sha256(loaded.source_text),
    }, loaded.model_dump_json())  # what resume needs: the scenario as run, with the LLM settings chosen
    lock = RunLock.take(run_dir)
    model = TownModel(settings, backends, store, on_llm=on_llm, phases=phases)
    record_static(store, settings, backends, model)
    return Run(run_id, run_dir, store, model, settings.ticks, lock=lock)


def record_static(store: RunStore, settings: RunSettings, backends: RunBackends, model: TownModel) -> None:
    """The rows that do not change while a run goes on (its people as they start, model groups,
    places and paths), in one transaction. Written after the model is built (the places' layout
    is the model's), so a process killed while building it leaves a run without them, which
    ``resume_run`` completes."""
    loaded, sc = settings.loaded, settings.loaded.scenario
    static = store.buffer()
    for rp in loaded.people:  # who arrives later gets their row then (TownModel)
        static.add("agents", person_row(rp, 0))
    for group, (backend_name, model_id) in sorted(backends.models().items()):
        static.add("llm_groups", {"llm_group": group, "backend": backend_name, "model": model_id,
                                  "settings": dumps(settings.llm.group(group).model_dump(mode="json", exclude={"groups"}))})
    layout = model.town.layout()
    for place in sc.town.places:
        x, y = layout[place.id]
        static.add("places", {"place_id": place.id, "name": place.name, "kind": place.kind,
                              "description": place.description, "objects": dumps(place.objects), "x": x, "y": y})
    for path in sc.town.paths:
        static.add("paths", {"a": path.between[0], "b": path.between[1], "minutes": path.minutes})
    store.commit(static)


def finish(run: Run, status: str, message: str | None = None) -> None:
    run.store.update_run(status=status, message=message, finished_at=now_iso())
    if run.lock is not None:
        run.lock.release()


class RunLock:
    """An exclusive lock on a run directory while a process steps it, so a second ``agora
    resume`` cannot write the same run.db. The OS drops it when the process dies, kill -9 included."""

    def __init__(self, handle: IO[str]):
        self.handle = handle

    @classmethod
    def take(cls, run_dir: Path) -> RunLock:
        path = Path(run_dir) / "run.lock"
        handle = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise RunError(f"{run_dir} is being run by {holder}; wait for it to stop, or stop it first") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} on {socket.gethostname()}")
        handle.flush()
        return cls(handle)

    def release(self) -> None:
        if not self.handle.closed:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


RESUMABLE = ("running", "interrupted", "failed")
"""Run statuses ``agora resume`` continues ("running" is what a killed process leaves behind)."""


def resume_run(
    run_dir: Path,
    *,
    ticks: int | None = None,
    llm: BackendChoice | None = None,
    on_llm: Callable[[RawCompletion], None] | None = None,
    backend: Backend | None = None,
    phases: Sequence[Phase] | None = None,
    groups: Mapping[str, Backend] | None = None,
) -> tuple[Run, RunBackends]:
    """Reopen a run directory and rebuild its model at the end of its last committed tick.

    ``ticks`` is how many more ticks to run (default: up to the planned number); the LLM
    overrides ``llm`` apply on top of the settings the run was started with. ``backend`` (the
    ``llm:`` block's own) and ``groups`` (model groups') are backends you built; the others are
    built from those settings, each with the model id the run recorded for it."""
    choice = llm or BackendChoice()
    store = RunStore.open(run_dir)
    try:
        run_row, saved, probes_asked = _resume_rows(store, Path(run_dir), ticks)
        lock = RunLock.take(Path(run_dir))
    except BaseException:
        store.close()
        raise
    done, planned = run_row["ticks_done"], run_row["ticks_planned"]
    more = ticks if ticks is not None else max(0, planned - done)
    try:
        recorded = recorded_models(store.db, store.run_id)
        settings = RunSettings.resumed(LoadedScenario.model_validate_json(saved["scenario"]), seed=run_row["seed"],
                                       ticks=max(planned, done + more), llm=choice)
        if choice.model is not None:  # --model replaces the llm block's own model: not the one recorded
            recorded.pop(None, None)
        backends = build_run_backends(settings.llm, settings.base_dir, settings.loaded.llm_groups().values(),
                                      default=backend, groups=groups, recorded=recorded)
    except BaseException:
        lock.release()
        store.close()
        raise
    store.resumed(status="running", message=None, finished_at=None, ticks_planned=settings.ticks)
    try:
        model = TownModel(settings, backends, store, on_llm=on_llm, resume_state=saved["state"] if done else None,
                          phases=phases)
    except BaseException:
        lock.release()
        backends.close()
        raise
    # A run that died before its first tick has no state: it starts afresh (the start events and
    # seed memories are written with tick 0), and one that died before its fixed rows were written
    # (while its model was being built) gets them now: without its people, every per-person
    # figure of the run would read as if nobody had lived there.
    if not done and not _has_static(store):
        try:
            record_static(store, settings, backends, model)
        except BaseException:
            lock.release()
            backends.close()
            raise
    run = Run(store.run_id, Path(run_dir), store, model, more, lock=lock,
              probes_due=not (probes_asked and more == 0), first_tick=model.tick)
    return run, backends


def _has_static(store: RunStore) -> bool:
    """Whether the run's fixed rows were written (they are written in one transaction)."""
    return store.db.execute("select count(*) from agents where run_id = ?", [store.run_id]).fetchone()[0] > 0


def _resume_rows(store: RunStore, run_dir: Path, ticks: int | None) -> tuple[dict, dict, bool]:
    """The runs row, the resume state and whether probes were asked; RunError when it cannot go on."""
    run_row = store.db["runs"].get(store.run_id)
    saved = next(iter(store.db.query("select * from resume_state where run_id = ?", [store.run_id])), None) \
        if store.db["resume_state"].exists() else None
    if saved is None:
        raise RunError(f"{run_dir} cannot be resumed: its run.db has no resume state "
                       f"(it was made by an older Agora, run.db schema {run_row.get('schema_version')})")
    done, planned, status = run_row["ticks_done"], run_row["ticks_planned"], run_row["status"]
    probes_asked = store.db.execute("select count(*) from probes where run_id = ?", [store.run_id]).fetchone()[0] > 0
    if status not in RESUMABLE + ("finished",):
        raise RunError(f"{run_dir} has status {status!r} and cannot be resumed")
    if ticks is None and (status == "finished" or (done >= planned and probes_asked)):
        if status != "finished":  # died between asking the probes and saying so
            store.update_run(status="finished", message=None, finished_at=now_iso())
        raise RunError(f"{run_dir} has finished ({done} ticks); give --ticks N to run N more")
    if saved["tick"] != done - 1:
        raise RunError(f"{run_dir}: its resume state is for tick {saved['tick']} but {done} ticks are recorded")
    return run_row, saved, probes_asked
