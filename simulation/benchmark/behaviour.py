"""The behaviour benchmark: one scenario over several seeds, each metric's mean and 95 % interval.

``run_benchmark`` runs the scenario once per seed (a run directory each, under ``out/runs``) and
reads each run's behaviour metrics (``simulation.rundb.behaviour``, docs/behaviour.md);
``simulation.benchmark.report.write_report`` writes the report. The interval is Student's t over seeds,
which treats seeds as independent replicates: they are, because every scored choice is drawn
with the run's seeded generator (``cognition.choices: sample``), and the report says how many
distinct trajectories and distinct values the seeds produced, so a reader sees when they are not.

A benchmark reuses what is already under ``out/runs`` only when it is the same experiment: the
same scenario content (``runs.scenario_sha256``), tick count, engine code
(``runs.engine``, ``simulation.version.engine_fingerprint``) and backend and model. Anything else
there is refused with a message, never republished as if this engine had made it. To judge an
older engine's runs by today's rules, ``rescore_benchmark`` re-reads them and labels the report
with the engine that made them (``agora bench rescore``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from simulation.benchmark import host
from simulation.errors import InputError, Problem
from simulation.rundb.intervals import Estimate, estimate, format_value

if TYPE_CHECKING:
    from simulation.llm.backend import Backend
    from simulation.llm.factory import BackendChoice
    from simulation.run.fork import Intervention
    from simulation.scenario import LoadedScenario

__all__ = ["BenchmarkResult", "Estimate", "SeedRun", "estimate", "fork_benchmark", "format_value", "metric_order",
           "rescore_benchmark",
           "run_benchmark", "trajectory"]


@dataclass
class SeedRun:
    seed: int
    run_dir: Path
    run_id: str
    metrics: dict[str, float | None]
    curves: dict[str, list[tuple[int, str, int]]]
    """fact id -> awareness curve."""
    verdicts: dict[str, dict[str, int]]
    people: int
    wall_s: float
    trajectory: str
    """A digest of everything that happened (every event, in order): equal digests, equal runs."""


@dataclass
class BenchmarkResult:
    scenario: str
    seeds: list[int]
    ticks: int | None
    backend: str
    model: str
    command: str
    engine: str = ""
    scenario_sha256: str = ""
    runs: list[SeedRun] = field(default_factory=list)
    scored_by: str = ""
    """The engine whose rules computed the metrics, when it is not the one that made the runs
    (``rescore_benchmark``); empty when they are the same."""
    cpu: str = ""
    """The kind of CPU the runs were made on (``host.cpu``; empty when not known: rescored or
    gathered runs): a seed is a replicate only on the same kind."""

    def metric_names(self) -> list[str]:
        names: dict[str, None] = {}
        for r in self.runs:
            names.update(dict.fromkeys(r.metrics))
        return sorted(names, key=metric_order)

    def table(self) -> dict[str, Estimate]:
        return {name: estimate([r.metrics.get(name) for r in self.runs], name) for name in self.metric_names()}

    def distinct(self, name: str) -> int:
        """How many different values the seeds gave ``name`` (a metric all seeds agree on has 1)."""
        return len({round(v, 9) for r in self.runs if (v := r.metrics.get(name)) is not None})

    @property
    def trajectories(self) -> int:
        """How many different runs the seeds produced (by ``SeedRun.trajectory``)."""
        return len({r.trajectory for r in self.runs})


def metric_order(name: str) -> tuple[int, str]:
    """Where a metric goes in a report: talk, plans, facts, story, probes, relationships, memory, the LLM."""
    groups = ["talk", "plans", "facts", "story", "probes", "relationships", "memory", "llm"]
    head = name.split(".", 1)[0]
    return (groups.index(head) if head in groups else len(groups), name)


@dataclass(frozen=True)
class _Earlier:
    run_dir: Path
    status: str
    engine: str | None
    scenario_sha256: str | None


def _earlier_runs(runs_dir: Path, scenario: str, ticks: int) -> dict[int, _Earlier]:
    """seed -> the run already under ``runs_dir`` for this scenario name and tick count, so a
    benchmark stopped halfway goes on where it stopped when run again. A run.db that cannot be
    read there is an error (a damaged folder is not silently run again beside)."""
    import sqlite3

    from simulation.rundb import connect_ro

    found: dict[int, _Earlier] = {}
    for db in sorted(runs_dir.glob("*/run.db")) if runs_dir.is_dir() else []:
        try:
            con = connect_ro(db)
            try:
                columns = {r[1] for r in con.execute("pragma table_info(runs)")}
                extra = ", engine, scenario_sha256" if {"engine", "scenario_sha256"} <= columns else ", null, null"
                row = con.execute(f"select seed, status{extra} from runs where scenario = ? and ticks_planned = ?",
                                  (scenario, ticks)).fetchone()
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise InputError(Problem(str(db), f"an earlier run of this benchmark cannot be read ({exc}); move it "
                                              "away or give a new --out")) from None
        if row is not None and row[1] in ("finished", "interrupted", "running") and row[0] not in found:
            found[row[0]] = _Earlier(db.parent, row[1], row[2], row[3])
    return found


def _same_experiment(earlier: _Earlier, engine: str, scenario_sha256: str) -> None:
    """Refuse to reuse a run of another engine or scenario content (``InputError``)."""
    if earlier.engine != engine:
        made = f"engine {earlier.engine}" if earlier.engine else "an engine that recorded no fingerprint"
        raise InputError(Problem(str(earlier.run_dir), f"was made by {made}, not this engine ({engine}): its "
                                 "numbers are not this engine's; give a new --out to run the benchmark again"))
    if earlier.scenario_sha256 != scenario_sha256:
        raise InputError(Problem(str(earlier.run_dir), "was made from other scenario content (its sha256 differs "
                                 "from this file's): give a new --out"))


def run_benchmark(loaded: LoadedScenario, seeds: Sequence[int], out: Path, *, ticks: int | None = None,
                  llm: BackendChoice | None = None, backend: Backend | str | None = None, command: str = "",
                  on_seed: Callable[[int, int], None] | None = None,
                  on_tick: Callable[[int, int], None] | None = None, jobs: int = 1,
                  on_seed_done: Callable[[int, int], None] | None = None) -> BenchmarkResult:
    """Run ``loaded`` once per seed into ``out/runs`` and collect each run's behaviour metrics.
    ``on_seed(i, seed)`` before each run and ``on_seed_done(i, seed)`` after it; ``on_tick(done,
    total)`` after each of its ticks (of all runs in flight, summed, with ``jobs`` > 1: that many
    runs at once, each in its own process, ``simulation.benchmark.parallel``).

    A seed that already has a run of the same experiment under ``out/runs`` (see the module's
    docstring) is not run again: a finished run is re-read (its probe answers re-scored and its
    metrics recomputed with the current rules), an interrupted one (or one whose process was
    killed) is resumed. A run's wall time is the sum of its ticks' (probes excluded)."""
    from simulation.benchmark.parallel import RunTask, check_jobs
    from simulation.version import engine_fingerprint, text_sha256

    check_jobs(jobs, backend)
    runs_dir = Path(out) / "runs"
    planned = ticks if ticks is not None else loaded.scenario.clock.total_ticks
    engine, scenario_sha = engine_fingerprint(), text_sha256(loaded.source_text)
    earlier = _earlier_runs(runs_dir, loaded.scenario.name, planned)
    for seed in seeds:
        if seed in earlier:
            _same_experiment(earlier[seed], engine, scenario_sha)
    result = BenchmarkResult(loaded.scenario.name, list(seeds), ticks, "", "", command, engine, scenario_sha,
                             cpu=host.cpu())
    tasks: dict[int, RunTask | Path] = {}
    for seed in seeds:
        if seed in earlier and earlier[seed].status == "finished":
            tasks[seed] = earlier[seed].run_dir
        elif seed in earlier:
            tasks[seed] = RunTask("resume", seed, earlier[seed].run_dir)
        else:
            tasks[seed] = RunTask("new", seed, runs_dir, loaded, ticks)
    _make(result, tasks, llm=llm, backend=backend, jobs=jobs, on_seed=on_seed, on_seed_done=on_seed_done,
          on_tick=on_tick)
    return result


def _make(result: BenchmarkResult, tasks: dict[int, RunTask | Path], *, llm: BackendChoice | None,
          backend: Backend | str | None, jobs: int, on_seed: Callable[[int, int], None] | None,
          on_seed_done: Callable[[int, int], None] | None, on_tick: Callable[[int, int], None] | None) -> None:
    """Make the runs of ``tasks`` (seed -> what to run, or the folder of a finished run to re-read)
    and read every run back into ``result`` in the seeds' order. One at a time, each seed's run is
    made and read in turn; with ``jobs`` > 1 those to make go first, that many at once."""
    from simulation.benchmark.parallel import RunTask, execute, run_tasks

    order = list(tasks)
    made: dict[int, Path] = {}
    todo = [t for t in tasks.values() if isinstance(t, RunTask)]
    if jobs > 1 and len(todo) > 1:
        at = {seed: i for i, seed in enumerate(order)}
        folders = run_tasks(todo, llm=llm, backend=backend, jobs=jobs,
                            on_start=(lambda _, seed: on_seed(at[seed], seed)) if on_seed else None,
                            on_done=(lambda _, seed: on_seed_done(at[seed], seed)) if on_seed_done else None,
                            on_tick=on_tick)
        made = {t.seed: folder for t, folder in zip(todo, folders)}
    for i, seed in enumerate(order):
        task = tasks[seed]
        if seed in made:
            run_dir = made[seed]
        else:
            if on_seed is not None:
                on_seed(i, seed)
            if isinstance(task, RunTask):
                run_dir = execute(task, llm=llm, backend=backend, on_tick=on_tick)
            else:
                run_dir = task
                _rescore(run_dir)
            if on_seed_done is not None:
                on_seed_done(i, seed)
        _read_back(result, seed, run_dir)


def fork_benchmark(base: BenchmarkResult, out: Path, *, at: int, interventions: Sequence[Intervention],
                   llm: BackendChoice | None = None, backend: Backend | None = None, command: str = "",
                   on_seed: Callable[[int, int], None] | None = None,
                   on_tick: Callable[[int, int], None] | None = None, jobs: int = 1,
                   on_seed_done: Callable[[int, int], None] | None = None) -> BenchmarkResult:
    """Fork each of ``base``'s runs at tick ``at`` with ``interventions`` (``simulation.run.fork``)
    into ``out/runs`` and run the forks to their parents' end: the same seeds, the same prefix,
    then the intervention. Run again, it re-reads the finished forks there and resumes the
    interrupted ones; a fork made with other interventions, at another tick or by another
    engine is refused."""
    from dataclasses import asdict

    from simulation.benchmark.parallel import RunTask, check_jobs
    from simulation.rundb import connect_ro
    from simulation.version import engine_fingerprint

    check_jobs(jobs, backend)
    runs_dir = Path(out) / "runs"
    engine = engine_fingerprint()
    wanted = json.dumps([asdict(iv) for iv in interventions])
    found: dict[str, tuple[Path, str]] = {}  # parent run id -> (fork's folder, status)
    for db in sorted(runs_dir.glob("*/run.db")) if runs_dir.is_dir() else []:
        con = connect_ro(db)
        try:
            parent, tick, done, status, made = con.execute(
                "select parent_run_id, fork_tick, interventions, status, engine from runs").fetchone()
        finally:
            con.close()
        if parent is None:
            continue
        if (tick, done, made) != (at, wanted, engine):
            raise InputError(Problem(str(db.parent), f"is a fork at tick {tick} with other interventions or by "
                                     f"another engine than this one (at {at}, engine {engine}): give a new --out"))
        found[parent] = (db.parent, status)
    result = BenchmarkResult(base.scenario, list(base.seeds), base.ticks, "", "", command, engine,
                             base.scenario_sha256, cpu=host.cpu())
    tasks: dict[int, RunTask | Path] = {}
    for parent in base.runs:
        earlier = found.get(parent.run_id)
        if earlier is not None and earlier[1] == "finished":
            tasks[parent.seed] = earlier[0]
        elif earlier is not None:
            tasks[parent.seed] = RunTask("resume", parent.seed, earlier[0], at=at)
        else:
            tasks[parent.seed] = RunTask("fork", parent.seed, runs_dir, parent=parent.run_dir, at=at,
                                         interventions=tuple(interventions))
    _make(result, tasks, llm=llm, backend=backend, jobs=jobs, on_seed=on_seed, on_seed_done=on_seed_done,
          on_tick=on_tick)
    return result


def _rescore(run_dir: Path) -> None:
    """A finished run's probe answers re-scored and its behaviour recomputed and stored, by the
    current rules (``agora behaviour`` does the same for one run)."""
    from simulation.provenance.rescore import rescore_probes
    from simulation.record.store import RunStore
    from simulation.rundb.behaviour import behaviour as compute

    store = RunStore.open(run_dir)
    try:
        rescore_probes(store.db.conn, store.run_id)
        store.db.conn.commit()
        store.replace_behaviour(compute(store.db, store.run_id))
    finally:
        store.close()


def _read_back(result: BenchmarkResult, seed: int, run_dir: Path) -> None:
    """Append the finished run in ``run_dir`` to ``result`` (its stored metrics, curves, verdicts)."""
    from simulation.errors import RunError
    from simulation.rundb import connect_ro
    from simulation.rundb.behaviour import stored
    from simulation.rundb.facts import awareness_curve, probe_verdicts
    from simulation.rundb.metrics import people

    con = connect_ro(run_dir / "run.db")
    try:
        run_id, made_by, model, wall = con.execute(
            "select r.run_id, r.backend, r.model, (select sum(wall_s) from ticks t where t.run_id = r.run_id) "
            "from runs r").fetchone()
        if not result.backend:
            result.backend, result.model = made_by, model
        elif (made_by, model) != (result.backend, result.model):
            raise RunError(f"{run_dir} was made by {made_by} {model}, the benchmark's other runs by "
                           f"{result.backend} {result.model}: give a new --out to start over")
        result.runs.append(SeedRun(seed, run_dir, run_id, stored(con, run_id), awareness_curve(con, run_id),
                                   {f: dict(c) for f, c in probe_verdicts(con, run_id).items()},
                                   len(people(con, run_id)), wall or 0.0, trajectory(con, run_id)))
    finally:
        con.close()


def _cpu_of(report_dir: Path) -> str:
    """The kind of CPU an earlier report of ``report_dir`` says its runs were made on ('' if none)."""
    try:
        return str(json.loads((report_dir / "behaviour.json").read_text("utf-8")).get("cpu") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def rescore_benchmark(report_dir: Path, command: str = "") -> BenchmarkResult:
    """The runs of an earlier benchmark (``report_dir/runs``), whatever engine made them, scored by
    this engine's rules: probe answers re-scored, metrics recomputed and stored in each run.db. The
    result names the engine that made the runs (``engine``; "unrecorded" for runs from before run.db
    schema 9) and the one that scored them (``scored_by``), so the report cannot pass for a new run."""
    import sqlite3

    from simulation.rundb import connect_ro
    from simulation.version import engine_fingerprint

    runs: list[tuple[int, Path, str, str, int, str, str]] = []
    for db in sorted((Path(report_dir) / "runs").glob("*/run.db")):
        try:
            con = connect_ro(db)
            try:
                columns = {r[1] for r in con.execute("pragma table_info(runs)")}
                extra = ", engine, scenario_sha256" if {"engine", "scenario_sha256"} <= columns else ", null, null"
                row = con.execute(f"select seed, scenario, status, ticks_planned{extra} from runs").fetchone()
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise InputError(Problem(str(db), f"cannot be read: {exc}")) from None
        if row is None or row[2] != "finished":
            raise InputError(Problem(str(db), "is not a finished run: finish it (agora resume) before rescoring"))
        runs.append((int(row[0]), db.parent, row[1], row[4] or "unrecorded", int(row[3]), row[5] or "", row[2]))
    if not runs:
        raise InputError(Problem(str(report_dir), "holds no runs (runs/*/run.db) to rescore"))
    runs.sort()
    seeds = [r[0] for r in runs]
    if len(set(seeds)) != len(seeds) or len({r[2] for r in runs}) != 1 or len({r[4] for r in runs}) != 1:
        raise InputError(Problem(str(report_dir), "its runs are not one benchmark (a seed twice, or several "
                                 "scenarios or tick counts)"))
    engines = sorted({r[3] for r in runs})
    result = BenchmarkResult(runs[0][2], seeds, runs[0][4], "", "", command, ",".join(engines), runs[0][5],
                             scored_by=engine_fingerprint(), cpu=_cpu_of(report_dir))
    for seed, run_dir, *_ in runs:
        _rescore(run_dir)
        _read_back(result, seed, run_dir)
    return result


def trajectory(con: object, run_id: str) -> str:
    """A digest of what a run's people did, not of the words they used: who was where doing which
    kind of thing at each tick, who talked with whom and with which moves, who learnt which fact
    when. Two seeds whose digests are equal made the same run as behaviour goes, even if the model
    worded its lines differently (a wording-level digest would call every sampled run distinct)."""
    from simulation.rundb.connect import column_names
    from simulation.rundb.facts import first_aware

    digest = hashlib.sha256()
    queries = [
        ("events", ("tick", "agent_id", "kind", "place")),
        ("utterances", ("tick", "speaker_id", "listener_id", "aim")),  # aim: run.db schema 6
    ]
    for table, columns in queries:
        if not set(columns) <= column_names(con, table):
            continue  # an older layout records less: the digest covers what it has
        rows = con.execute(f"select {', '.join(columns)} from {table} where run_id = ? order by id",  # type: ignore[attr-defined]
                           [run_id])
        for row in rows:
            digest.update("\x1f".join(map(str, row)).encode() + b"\x1e")
        digest.update(b"\x1d")
    for fact_id, learned in sorted(first_aware(con, run_id).items()):  # who learnt it, when, from whom
        for row in ((fact_id, i.agent_id, i.tick, i.source, i.parent) for i in learned):
            digest.update("\x1f".join(map(str, row)).encode() + b"\x1e")
        digest.update(b"\x1d")
    return digest.hexdigest()[:16]
