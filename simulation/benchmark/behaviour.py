"""The behaviour benchmark: one scenario over several seeds, each metric's mean and 95 % interval.

``run_benchmark`` runs the scenario once per seed (a run directory each, under ``out/runs``),
reads each run's behaviour metrics (``simulation.rundb.behaviour``, docs/behaviour.md) and
aggregates them; ``write_report`` writes ``report.md`` (the table a paper would print, with the
command that made it), ``behaviour.json`` (every seed's numbers) and PNG plots. The interval is
Student's t over seeds: with 5 seeds it is wide, which is the honest answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.rundb.intervals import Estimate, estimate, format_value

if TYPE_CHECKING:
    from simulation.llm.backend import Backend
    from simulation.runner import BackendChoice
    from simulation.scenario import LoadedScenario

HEADLINE = [
    "talk.encounters_per_agent_hour", "talk.conversations_per_encounter", "talk.two_line_share",
    "talk.echo_share", "plans.fitting_share", "llm.fallback_share", "relationships.density_end",
]
"""Metrics drawn in the summary plot (the per-fact ones are added per scenario)."""


@dataclass
class SeedRun:
    seed: int
    run_dir: Path
    metrics: dict[str, float | None]
    curves: dict[str, list[tuple[int, str, int]]]
    """fact id -> awareness curve."""
    verdicts: dict[str, dict[str, int]]
    people: int
    wall_s: float


@dataclass
class BenchmarkResult:
    scenario: str
    seeds: list[int]
    ticks: int | None
    backend: str
    model: str
    command: str
    runs: list[SeedRun] = field(default_factory=list)

    def metric_names(self) -> list[str]:
        names: dict[str, None] = {}
        for r in self.runs:
            names.update(dict.fromkeys(r.metrics))
        return sorted(names, key=metric_order)

    def table(self) -> dict[str, Estimate]:
        return {name: estimate([r.metrics.get(name) for r in self.runs], name) for name in self.metric_names()}


def metric_order(name: str) -> tuple[int, str]:
    """Where a metric goes in a report: talk, plans, facts, probes, relationships, the LLM."""
    groups = ["talk", "plans", "facts", "probes", "relationships", "llm"]
    head = name.split(".", 1)[0]
    return (groups.index(head) if head in groups else len(groups), name)


def _earlier_runs(runs_dir: Path, scenario: str, ticks: int) -> dict[int, tuple[Path, str]]:
    """seed -> (run directory, status) of the runs already under ``runs_dir`` for this scenario
    and tick count, so a benchmark stopped halfway goes on where it stopped when run again."""
    from simulation.rundb import connect_ro

    found: dict[int, tuple[Path, str]] = {}
    for db in sorted(runs_dir.glob("*/run.db")) if runs_dir.is_dir() else []:
        try:
            con = connect_ro(db)
        except Exception:
            continue
        try:
            row = con.execute("select seed, status from runs where scenario = ? and ticks_planned = ?",
                              (scenario, ticks)).fetchone()
        except Exception:
            row = None
        finally:
            con.close()
        if row is not None and row[1] in ("finished", "interrupted", "running") and row[0] not in found:
            found[row[0]] = (db.parent, row[1])
    return found


def run_benchmark(loaded: LoadedScenario, seeds: Sequence[int], out: Path, *, ticks: int | None = None,
                  llm: BackendChoice | None = None, backend: Backend | str | None = None, command: str = "",
                  on_seed: Callable[[int, int], None] | None = None,
                  on_tick: Callable[[int, int], None] | None = None) -> BenchmarkResult:
    """Run ``loaded`` once per seed into ``out/runs`` and collect each run's behaviour metrics.
    ``on_seed(i, seed)`` before each run; ``on_tick(done, total)`` after each of its ticks.

    A seed that already has a run of this scenario and tick count under ``out/runs`` is not run
    again: a finished run is re-read (its probe answers re-scored with the current rules), an
    interrupted one (or one whose process was killed) is resumed. A run's wall time is the sum of its ticks' (probes excluded)."""
    from simulation import Simulation
    from simulation.errors import RunError
    from simulation.provenance.rescore import rescore_probes
    from simulation.rundb import connect_ro
    from simulation.rundb.behaviour import behaviour as compute
    from simulation.rundb.facts import awareness_curve, probe_verdicts
    from simulation.rundb.metrics import people
    from simulation.store import RunStore

    runs_dir = Path(out) / "runs"
    planned = ticks if ticks is not None else loaded.scenario.clock.total_ticks
    earlier = _earlier_runs(runs_dir, loaded.scenario.name, planned)
    result = BenchmarkResult(loaded.scenario.name, list(seeds), ticks, "", "", command)
    tick_cb = (lambda s: on_tick(s.ticks - s.ticks_left, s.ticks)) if on_tick else None
    for i, seed in enumerate(seeds):
        if on_seed is not None:
            on_seed(i, seed)
        if seed in earlier and earlier[seed][1] == "finished":
            run_dir = earlier[seed][0]
            store = RunStore.open(run_dir)
            try:
                rescore_probes(store.db.conn, store.run_id)
                store.db.conn.commit()
                store.replace_behaviour(compute(store.db, store.run_id))
            finally:
                store.close()
        else:
            own = backend if backend is not None and not isinstance(backend, str) else None
            opened = (Simulation.resume(earlier[seed][0], llm=llm, backend=own) if seed in earlier else
                      Simulation.from_scenario(loaded, seed=seed, out=runs_dir, ticks=ticks, llm=llm, backend=backend))
            with opened as sim:
                sim.run(on_tick=tick_cb)
                run_dir = sim.run_dir
        con = connect_ro(run_dir / "run.db")
        try:
            from simulation.rundb.behaviour import stored

            run_id, made_by, model, wall = con.execute(
                "select r.run_id, r.backend, r.model, (select sum(wall_s) from ticks t where t.run_id = r.run_id) "
                "from runs r").fetchone()
            if not result.backend:
                result.backend, result.model = made_by, model
            elif (made_by, model) != (result.backend, result.model):
                raise RunError(f"{run_dir} was made by {made_by} {model}, the benchmark's other runs by "
                               f"{result.backend} {result.model}: give a new --out to start over")
            result.runs.append(SeedRun(seed, run_dir, stored(con, run_id), awareness_curve(con, run_id),
                                       {f: dict(c) for f, c in probe_verdicts(con, run_id).items()},
                                       len(people(con, run_id)), wall or 0.0))
        finally:
            con.close()
    return result


# ---------------------------------------------------------------------- the report

def write_report(result: BenchmarkResult, out: Path) -> list[Path]:
    """report.md, behaviour.json and the plots; returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "behaviour.json", out / "report.md"]
    table = result.table()
    files[0].write_text(json.dumps({
        "scenario": result.scenario, "seeds": result.seeds, "ticks": result.ticks, "backend": result.backend,
        "model": result.model, "command": result.command,
        "summary": {k: vars(v) for k, v in table.items()},
        "runs": [{"seed": r.seed, "run_dir": str(r.run_dir), "wall_s": round(r.wall_s, 1), "metrics": r.metrics,
                  "verdicts": r.verdicts, "awareness": {f: [c[2] for c in curve] for f, curve in r.curves.items()}}
                 for r in result.runs],
    }, indent=1), encoding="utf-8")
    plots = _plots(result, table, out)
    files += plots
    lines = [
        f"# Behaviour benchmark: {result.scenario}", "",
        f"{len(result.runs)} seeds ({', '.join(map(str, result.seeds))}), "
        f"{result.ticks if result.ticks else 'all'} ticks each, backend `{result.backend}`, model `{result.model}`.",
        "", f"Made by: `{result.command}`" if result.command else "", "",
        "Mean over seeds and 95 % interval (Student's t, clipped to the metric's range); n = seeds with a value. "
        "Definitions: docs/behaviour.md.", "",
        "| metric | mean | 95 % interval | n | per seed |", "|---|---:|---:|---:|---|",
    ]
    for name, e in table.items():
        per = ", ".join(format_value(r.metrics.get(name)) for r in result.runs)
        interval = f"{format_value(e.low)} – {format_value(e.high)}" if e.n > 1 else "–"
        lines.append(f"| `{name}` | {format_value(e.mean)} | {interval} | {e.n} | {per} |")
    verdicts = sorted({f for r in result.runs for f in r.verdicts})
    if verdicts:
        lines += ["", "## Probe answers by verdict (all seeds)", "",
                  "| fact | right | partial | wrong | missed | honest | invented |", "|---|---:|---:|---:|---:|---:|---:|"]
        for fact in verdicts:
            counts = {v: sum(r.verdicts.get(fact, {}).get(v, 0) for r in result.runs)
                      for v in ("right", "partial", "wrong", "missed", "honest", "invented")}
            lines.append(f"| {fact} | " + " | ".join(str(c) for c in counts.values()) + " |")
    lines += ["", "## Runs", "", "| seed | wall s | run directory |", "|---:|---:|---|"]
    lines += [f"| {r.seed} | {r.wall_s:.0f} | `{r.run_dir}` |" for r in result.runs]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    files[1].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return files


def _plots(result: BenchmarkResult, table: dict[str, Estimate], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    facts = sorted({f for r in result.runs for f in r.curves})
    if facts:
        fig, axes = plt.subplots(1, len(facts), figsize=(5.5 * len(facts), 3.6), squeeze=False)
        for ax, fact in zip(axes[0], facts):
            for r in result.runs:
                curve = r.curves.get(fact, [])
                ax.step([c[0] for c in curve], [c[2] for c in curve], where="post", alpha=0.8, label=f"seed {r.seed}")
            ax.set_title(f"Aware of '{fact}'")
            ax.set_xlabel("tick")
            ax.set_ylabel("people")
            ax.set_ylim(0, max(r.people for r in result.runs) + 0.5)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "awareness.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    names = [n for n in HEADLINE + [n for n in table if n.startswith(("facts.", "probes.")) and
                                    n.endswith(("aware_share", "distortion", "right_share", "hallucination"))]
             if n in table and table[n].mean is not None]
    if names:
        fig, ax = plt.subplots(figsize=(8, 0.42 * len(names) + 1.2))
        means = [table[n].mean or 0.0 for n in names]
        errs = [[(table[n].mean or 0) - (table[n].low or 0) for n in names],
                [(table[n].high or 0) - (table[n].mean or 0) for n in names]]
        ax.barh(range(len(names)), means, xerr=errs, color="#4c78a8", capsize=3)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{result.scenario}: mean and 95 % interval over {len(result.runs)} seeds")
        fig.tight_layout()
        path = out / "metrics.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def load_result(path: Path) -> dict[str, Any]:
    """A written ``behaviour.json`` (for comparing two benchmarks)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
