"""Verify a run: make it again from what it recorded, answers from the replay cache only, and compare every row.

A shared run directory plus the replay-cache file it was made with is a checkable result: the
run's scenario (people resolved), seed and LLM settings are in its run.db, and every answer the
LLM gave is in the cache, keyed by the exact request. ``verify`` re-runs the same number of ticks
in a scratch directory with a backend that can only replay (no server, GPU or model file is
needed, and none is started), feeds the same whispers at the same ticks, asks the probes if the
run asked them, and compares the two run.db files row by row (``simulation.rundb.diff``).

A request the cache cannot answer means the re-run has left the original: it is reported with
where its prompt first differs from the original's request of the same agent, purpose and seed.

A run with model groups (``llm.groups``) is re-made with one replay-only backend per model that
answered, each under the backend name and model id run.db recorded for it (``llm_groups``), so
each person's questions find the answers their own model gave.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulation.errors import InputError, Problem, RunError
from simulation.formats.paths import resolve_path
from simulation.llm.backend import Messages, OnDone, TokenCounter, estimate_tokens
from simulation.llm.cache import CachedBackend, ReplayCache, default_cache_path
from simulation.llm.lazy import counter_for
from simulation.llm.registry import as_recorded
from simulation.llm.types import LLMRequest, RawCompletion
from simulation.record.store import TABLES
from simulation.rundb.connect import connect_ro, db_path, table_names
from simulation.rundb.diff import SKIPPED_TABLES, first_difference
from simulation.rundb.groups import recorded_models
from simulation.run.recorded import deliver_whispers, recorded_run, recorded_whispers
from simulation.scenario import LoadedScenario

__all__ = ["CacheMiss", "Verification", "verify"]


class CacheMiss(RunError):
    """The re-run asked something the replay cache has no answer for."""

    def __init__(self, request: LLMRequest):
        super().__init__(f"tick {request.tick}: {request.agent_id or 'no agent'}'s {request.purpose} request "
                         "is not in the replay cache")
        self.request = request


class ReplayOnly:
    """A backend that has every answer in the cache in front of it, or none: a miss stops the re-run.

    It counts prompt tokens as the backend that made the run did (``counter``: that backend
    class's count without starting it, ``simulation.llm.lazy.counter_for``), since cognition
    budgets prompts by that count: counting otherwise would build other prompts and miss."""

    def __init__(self, name: str, model_id: str, counter: TokenCounter | None = None):
        self.name = name
        self.model_id = model_id
        self._counter = counter or estimate_tokens

    def count_tokens(self, messages: Messages) -> int:
        return self._counter(messages)

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        if requests:
            raise CacheMiss(requests[0])
        return []

    def close(self) -> None:
        pass


@dataclass
class Verification:
    """What ``verify`` found."""

    run_dir: Path
    cache_path: Path
    ticks: int
    """Ticks re-run (the original's committed ticks)."""
    same: bool
    difference: str | None = None
    """Where the re-run first parted from the original (None when the same)."""
    replayed: int = 0
    """Answers read from the cache."""
    notes: tuple[str, ...] = ()


def _cache_file(given: Path | None, loaded: LoadedScenario, run_dir: Path) -> Path:
    settings = loaded.scenario.llm
    if given is not None:
        path, where = resolve_path(str(given), Path.cwd()), "--cache-path"
    elif settings.cache == "off":
        raise InputError(Problem(str(run_dir), "the run was made with the replay cache off, so no cache holds "
                                 "its answers; give --cache-path FILE if one does"))
    elif settings.cache_path:
        path, where = resolve_path(settings.cache_path, Path(loaded.path).parent), "the run's llm.cache_path"
    else:
        path, where = default_cache_path(), "the default replay cache"
    if not path.is_file():
        raise InputError(Problem(str(path), f"replay-cache file not found ({where}); give the run's cache "
                                 "file with --cache-path FILE"))
    return path


def _first_mismatch(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _miss_report(con: sqlite3.Connection, miss: CacheMiss) -> str:
    """Where the missed request's prompt first differs from the original's request of the same
    agent, purpose and seed (which encodes the tick and the attempt)."""
    req = miss.request
    row = con.execute("select messages from llm_calls where agent_id is ? and purpose = ? and seed = ? "
                      "order by id limit 1", (req.agent_id, req.purpose, req.seed)).fetchone()
    if row is None:
        return f"{miss}; the original made no such request"
    theirs = json.loads(row[0])
    for i, (ours, orig) in enumerate(zip(req.messages, theirs)):
        if ours != orig:
            a, b = ours.get("content", ""), orig.get("content", "")
            at = _first_mismatch(a, b)
            return (f"{miss}; its prompt differs from the original's at message {i + 1}, character {at}: "
                    f"{a[max(0, at - 40):at + 60]!r} vs {b[max(0, at - 40):at + 60]!r}")
    if len(req.messages) != len(theirs):
        return f"{miss}; its prompt has {len(req.messages)} messages, the original's {len(theirs)}"
    return f"{miss}; its prompt is the original's, so the cache file lacks the answer (not this run's cache?)"


def verify(run_dir: Path | str, cache_path: Path | None = None, *, out: Path | None = None,
           on_tick: Callable[[int, int], None] | None = None) -> Verification:
    """Re-run ``run_dir``'s committed ticks from the replay cache and compare every row.

    ``out``: where the re-run goes (default: a temporary directory, removed after). ``on_tick``
    gets (ticks done, ticks in all) for progress."""
    from simulation import Simulation

    run_dir = Path(run_dir)
    original = db_path(run_dir)
    if not original.is_file():
        raise InputError(Problem(str(run_dir), "no run.db here: give a run directory"))
    con = connect_ro(original)
    try:
        run, scenario_json = recorded_run(con, run_dir)
        loaded = LoadedScenario.model_validate_json(scenario_json)
        cache_file = _cache_file(cache_path, loaded, run_dir)
        whispers = recorded_whispers(con)
        asked = "probes" in table_names(con) and con.execute("select count(*) from probes").fetchone()[0] > 0
        finished = run["status"] == "finished" or asked
        ticks = int(run["ticks_done"] or 0)
        notes = []
        from simulation.version import __version__, engine_fingerprint

        if run.get("agora_version") and run["agora_version"] != __version__:
            notes.append(f"the run was made by Agora {run['agora_version']}, this is {__version__}: "
                         "a difference may be a change of the engine")
        elif run.get("engine") and run["engine"] != engine_fingerprint():
            notes.append(f"the run was made by engine {run['engine']}, this is {engine_fingerprint()}: "
                         "a difference may be a change of the engine")
        if ticks == 0:
            raise InputError(Problem(str(run_dir), "the run has no committed tick to verify"))
        cache = ReplayCache(cache_file)
        base_dir = Path(loaded.path).parent if loaded.path else Path.cwd()
        # One replay-only backend per model that answered (the llm block's own, and each model
        # group's, as run.db recorded them), all in front of the one cache file.
        # (counted with the file the run began on: ``registry.as_recorded``, as a resume would)
        replaying = {group: CachedBackend(ReplayOnly(name, model, counter_for(
            name, model, as_recorded(loaded.scenario.llm.group(group), (name, model)), base_dir)), cache, "use")
            for group, (name, model) in recorded_models(con).items()
            if group is None or group in loaded.scenario.llm.groups}
        backend = replaying.pop(None)
        with tempfile.TemporaryDirectory(prefix="agora-verify-") as scratch:
            where = Path(out) if out is not None else Path(scratch)
            difference: str | None = None
            try:
                sim = Simulation.from_scenario(loaded, seed=run["seed"], backend=backend, out=where, ticks=ticks,
                                               groups=replaying)
                with sim:
                    for tick in range(ticks):
                        deliver_whispers(sim, whispers, tick)
                        sim.step()
                        if on_tick is not None:
                            on_tick(tick + 1, ticks)
                    deliver_whispers(sim, whispers, None)  # sent, never delivered
                    if finished:  # probes, behaviour metrics, status: as the original ended
                        sim.run(0)
                    else:
                        sim.close("interrupted", "verified")
            except CacheMiss as miss:
                # The re-run asked something new: its state parted from the original's before this
                # request, and the request's prompt shows where (rows committed before it may still
                # be updated later by the original, so they are not compared).
                difference = _miss_report(con, miss)
            else:
                tables = [t for t in TABLES if t not in SKIPPED_TABLES]
                found = first_difference(sim.run_dir / "run.db", original, tables)
                difference = None if found is None else f"{found} (re-run vs original)"
            finally:
                cache.close()
            replayed = backend.hits + sum(b.hits for b in replaying.values())
            return Verification(run_dir, cache_file, ticks, difference is None, difference, replayed, tuple(notes))
    finally:
        con.close()
