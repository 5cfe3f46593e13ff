"""Which runs the viewer offers: the ones named on the command line, then a runs folder, then
the runs of any co-evolution loop (``evolve.db``) named or found there.

`agora ui` hands its arguments to the Streamlit process in environment variables
(``AGORA_UI_RUNS_DIR``, and ``AGORA_UI_RUNS`` joined with ``os.pathsep``), so the app can
also be started as ``streamlit run ui/app.py`` with the same variables. The folder is
listed on every full rerun, so runs started after the viewer appear without a restart.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from simulation.rundb import lineage
from ui.db import db_path

RUNS_DIR_ENV = "AGORA_UI_RUNS_DIR"
RUNS_ENV = "AGORA_UI_RUNS"

_STAMP = re.compile(r"-(\d{8}-\d{6})-[0-9a-f]{4}$")
"""Run directory names end in -YYYYmmdd-HHMMSS-xxxx (``simulation.run.runner.new_run_id``)."""


@dataclass(frozen=True)
class RunEntry:
    key: str
    """Unique, URL-safe-ish name shown in the picker (the directory name)."""
    path: Path
    """The run directory."""
    named: bool
    """Named on the command line (listed first, opened by default)."""


@dataclass(frozen=True)
class Settings:
    runs_dir: Path
    named: tuple[Path, ...]


def settings() -> Settings:
    named = tuple(Path(p) for p in os.environ.get(RUNS_ENV, "").split(os.pathsep) if p)
    return Settings(Path(os.environ.get(RUNS_DIR_ENV) or "runs"), named)


def _started(path: Path) -> str:
    """Sort key, newest last: the run id's UTC stamp, else the run.db's modification time."""
    match = _STAMP.search(path.name)
    if match:
        return match.group(1)
    try:
        stamp = db_path(path).stat().st_mtime
    except OSError:
        stamp = 0.0
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y%m%d-%H%M%S")


def evolutions(config: Settings) -> list[Path]:
    """Folders holding an ``evolve.db`` (``agora evolve --out``): a named folder, the runs folder
    itself, or one of its folders."""
    candidates = [p.parent if p.name == lineage.DB_NAME else p for p in config.named] + [config.runs_dir]
    try:
        candidates += sorted(p for p in config.runs_dir.iterdir() if p.is_dir())
    except OSError:
        pass
    found: list[Path] = []
    for path in candidates:
        if (path / lineage.DB_NAME).is_file() and path.resolve() not in {f.resolve() for f in found}:
            found.append(path)
    return found


def _evolve_runs(folder: Path) -> list[Path]:
    """The runs an evolve loop recorded, latest round first (held-out runs before training runs)."""
    try:
        rounds = lineage.read(folder)
    except lineage.LineageUnreadable:
        return []
    return [Path(d) for r in reversed(rounds) for d in [*r.held_out_runs, *r.trained_on] if (Path(d) / "run.db").is_file()]


def discover(config: Settings) -> list[RunEntry]:
    """Named runs first (as given), then every folder of the runs folder that holds a run.db,
    newest first."""
    entries: list[RunEntry] = []
    seen: set[Path] = set()
    keys: set[str] = set()

    def add(path: Path, named: bool) -> None:
        path = path.parent if path.suffix == ".db" else path
        resolved = path.resolve()
        if resolved in seen:
            return
        seen.add(resolved)
        key = path.name or str(path)
        while key in keys:  # two folders of the same name in different places
            key += "'"
        keys.add(key)
        entries.append(RunEntry(key, path, named))

    for path in config.named:
        if path.name == lineage.DB_NAME or ((path / lineage.DB_NAME).is_file() and not db_path(path).is_file()):
            continue  # an evolve folder: its runs are added below
        add(path, True)
    try:
        found = [p for p in config.runs_dir.iterdir() if p.is_dir() and (p / "run.db").is_file()]
    except OSError:
        found = []
    for path in sorted(found, key=lambda p: (_started(p), p.name), reverse=True):
        add(path, False)
    for folder in evolutions(config):
        for path in _evolve_runs(folder):
            add(path, False)
    return entries
