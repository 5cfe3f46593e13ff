"""`agora bench behaviour` and `agora behaviour`: a scenario's behaviour over several seeds, and one run's.

``bench behaviour`` runs the scenario once per seed (a rich progress bar over seeds and ticks),
with ``--control`` also with the no-LLM control on the same seeds (``simulation.llm.control``),
then writes report.md, behaviour.json, the audit CSVs and PNG plots
(simulation/benchmark/report.py) and prints the table. ``behaviour`` computes one run's metrics
from its run.db, stores them in its ``behaviour`` table and prints them. Both flag in red any
purpose whose questions fell back to the safe default half the time or more.
"""

from __future__ import annotations

import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simulation.cli import common
from simulation.cli.common import BackendOpt, BaseUrlOpt, CacheOpt, CachePathOpt, ModelOpt, user_errors
from simulation.errors import InputError, Problem

__all__ = ["behaviour", "bench_behaviour", "bench_compare", "bench_rescore"]


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise InputError(Problem("--seeds", f"not a comma-separated list of integers: {text!r}")) from None
    if not seeds or any(s < 0 or s > 2**31 - 1 for s in seeds) or len(set(seeds)) != len(seeds):
        raise InputError(Problem("--seeds", f"needs distinct seeds from 0 to 2147483647, got {text!r}"))
    return seeds


@user_errors
def bench_behaviour(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO", help="scenario YAML file", show_default=False)],
    seeds: Annotated[str, typer.Option(help="comma-separated seeds, one run each")] = "1,2,3,4,5",
    ticks: Annotated[Optional[int], typer.Option(min=1, help="ticks per run (default: the scenario's full duration)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="report directory (default: bench-out/behaviour-NAME-TIME)")] = None,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    cache_path: CachePathOpt = None,
    control: Annotated[bool, typer.Option(
        "--control", help="also run the no-LLM control on the same seeds (into OUT/control) and report the "
                          "LLM's margin over it")] = False,
    jobs: common.JobsOpt = 1,
    quiet: common.quiet_option("the report's path") = False,  # type: ignore[valid-type]
) -> None:
    """Run a scenario over several seeds and report each behaviour metric's mean and 95 % interval.

    Run again with the same --out, it reuses the finished runs there (made by this engine from this
    scenario content) and resumes the interrupted ones."""
    from simulation import scenario as sc
    from simulation.benchmark.behaviour import run_benchmark
    from simulation.benchmark.compare import difference_cell
    from simulation.benchmark.report import failing, margins, write_report
    from simulation.llm.factory import BackendChoice

    loaded = sc.load(scenario_file)
    chosen = _seeds(seeds)
    choice = common.backend_choice(backend, model, base_url, cache, cache_path)
    out = out or Path("bench-out") / f"behaviour-{loaded.scenario.name}-{datetime.now():%Y%m%d-%H%M%S}"
    command = "agora " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else ""
    show = common.show_progress(quiet)
    progress = Progress(TextColumn("[bold]{task.description}"), MofNCompleteColumn(), BarColumn(),
                        TimeElapsedColumn(), console=common.err) if show else None
    seeds_task = progress.add_task("seeds", total=len(chosen)) if progress else None
    ticks_task = progress.add_task("ticks", total=None) if progress else None

    def on_seed(i: int, seed: int) -> None:
        if progress is not None and jobs == 1:  # several at once: the bar counts finished runs (on_seed_done)
            progress.update(seeds_task, completed=i, description=f"seed {seed}")
            progress.reset(ticks_task)

    def on_tick(done: int, total: int) -> None:
        if progress is not None:
            progress.update(ticks_task, completed=done, total=total)

    if progress is not None:
        progress.start()
    try:
        finished = 0

        def on_seed_done(i: int, seed: int) -> None:
            nonlocal finished
            finished += 1
            if progress is not None and jobs > 1:
                progress.update(seeds_task, completed=finished, description=f"{jobs} seeds at a time")

        result = run_benchmark(loaded, chosen, out, ticks=ticks, llm=choice, command=command, on_seed=on_seed,
                               on_tick=on_tick, jobs=jobs, on_seed_done=on_seed_done)
        baseline = None
        if control:
            def on_control_seed(i: int, seed: int) -> None:  # the control runs one at a time
                if progress is not None:
                    progress.update(seeds_task, completed=i, description=f"control, seed {seed}")
                    progress.reset(ticks_task)

            baseline = run_benchmark(loaded, chosen, out / "control", ticks=ticks,
                                     llm=BackendChoice(backend="control", cache="off", everyone=True),
                                     command=command,
                                     on_seed=on_control_seed, on_tick=on_tick)
    finally:
        if progress is not None:
            progress.update(seeds_task, completed=len(chosen))
            progress.stop()
    files = write_report(result, out, baseline)
    if baseline is not None:
        write_report(baseline, out / "control")
    for purpose, share in failing(result):
        common.err.print(f"[bold red]failing:[/] {escape(purpose)} falls back {share:.0%} of the time: that part "
                         "of cognition is not running", highlight=False)
    if quiet:
        common.console.print(str(out / "report.md"), highlight=False, soft_wrap=True)
        return
    table = Table(title=f"Behaviour of {escape(result.scenario)} over seeds {seeds} (mean, 95 % interval); "
                        f"{result.trajectories} distinct trajectories", title_justify="left")
    columns = ["metric", "mean", "95 % interval", "n", "distinct"] + (["control", "LLM − control"] if baseline else [])
    for col in columns:
        table.add_column(col, justify="left" if col == "metric" else "right")
    margin = margins(result, baseline) if baseline is not None else {}
    control_table = baseline.table() if baseline is not None else {}
    for name, e in result.table().items():
        interval = f"{e.low:.3g} – {e.high:.3g}" if e.n > 1 and e.low is not None else "–"
        row = [name, "–" if e.mean is None else f"{e.mean:.3g}", interval, str(e.n), str(result.distinct(name))]
        if baseline is not None:
            c = control_table.get(name)
            row += ["–" if c is None or c.mean is None else f"{c.mean:.3g}", difference_cell(margin[name])]
        table.add_row(*row)
    common.console.print(table)
    common.console.print("Report: " + ", ".join(str(f) for f in files), highlight=False, soft_wrap=True)


@user_errors
def behaviour(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory (holds run.db)", show_default=False)],
) -> None:
    """Re-score a run's probe answers, compute its behaviour metrics (docs/behaviour.md), store both in its run.db and print them."""
    from simulation.provenance.rescore import rescore_probes
    from simulation.record.store import RunStore
    from simulation.rundb.behaviour import behaviour as compute
    from simulation.rundb.behaviour import failing_purposes

    from simulation.rundb.attendance import attendance
    from simulation.rundb.beats import beats
    from simulation.rundb.metrics import people

    store = RunStore.open(run_dir)
    try:
        rescore_probes(store.db.conn, store.run_id)
        store.db.conn.commit()
        metrics = compute(store.db, store.run_id)
        store.replace_behaviour(metrics)
        turnout, names = attendance(store.db, store.run_id), people(store.db, store.run_id)
        story = beats(store.db, store.run_id)
    finally:
        store.close()
    table = Table(title=f"Behaviour of {escape(str(run_dir))}", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    failing = dict(failing_purposes(metrics))
    for name, value in metrics.items():
        shown = "–" if value is None else f"{value:.4g}"
        if name.removeprefix("llm.fallback_share.") in failing and name.startswith("llm.fallback_share."):
            table.add_row(f"[bold red]{escape(name)}[/]", f"[bold red]{shown} failing[/]")
        else:
            table.add_row(escape(name), shown)
    common.console.print(table)
    for purpose, share in failing.items():
        common.console.print(f"[bold red]failing:[/] {escape(purpose)} falls back {share:.0%} of the time: that "
                             "part of cognition is not running", highlight=False)
    for fid, a in turnout.items():
        h = a.happening

        def who(ids: list[str]) -> str:
            return escape(", ".join(names.get(i, i) for i in ids)) or "nobody"

        common.console.print(
            f"[bold]{escape(fid)}[/] at {escape(h.place)}, {h.starts}-{h.ends[11:]}: came {who(a.attended)}; "
            f"invited {len(a.invited)}, of whom came {who(a.invited_came)}; aware when it began {len(a.aware)}, "
            f"of whom came {who(a.aware_came)}; put it in their plan {who(a.planned)} "
            f"(of {len(a.planners)} who planned the day knowing it)", highlight=False, soft_wrap=True)
    for b in story:
        state = ("[green]reached[/] at " + str(b.reached_at) if b.reached else "[red]missed[/]" if b.reached is False
                 else "not decided yet (the run stopped before its deadline)")
        people_shown = escape(", ".join(names.get(i, i) for i in b.who)) or "nobody"
        counted = "aware by then" if b.kind == "reach" else "the largest gathering"
        common.console.print(f"[bold]beat {escape(b.id)}[/] ({b.kind}, {b.needed} needed by {b.by}): {state}; "
                             f"{counted}: {people_shown}", highlight=False, soft_wrap=True)


@user_errors
def bench_compare(
    reports: Annotated[list[Path], typer.Argument(metavar="REPORT...", show_default=False,
                                                  help="report directories of agora bench behaviour (the first is the reference)")],
    label: Annotated[Optional[list[str]], typer.Option(help="a name per report, in order (default: the folder names)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="also write the comparison as markdown to this file")] = None,
    seeds: Annotated[Optional[str], typer.Option(
        help="compare only these comma-separated seeds, which every report must have run (default: all; "
             "the reports must then have run the same seeds)")] = None,
) -> None:
    """Behaviour benchmarks of the same seeds side by side: each metric's mean and 95 % interval, and the
    per-seed (paired) difference of each from the first, with its interval."""
    from simulation.benchmark.compare import cell, compare, difference_cell, load_report, markdown

    if len(reports) < 2:
        raise InputError(Problem("REPORT", "give two or more report directories to compare"))
    if label and len(label) != len(reports):
        raise InputError(Problem("--label", f"give one label per report: {len(reports)} reports, {len(label)} labels"))
    loaded = [load_report(p, label[i] if label else None) for i, p in enumerate(reports)]
    if seeds is not None:
        chosen = _seeds(seeds)
        loaded = [r.only(chosen) for r in loaded]
    rows = compare(loaded)
    table = Table(title="Behaviour, mean [95 % interval] over seeds; Δ paired by seed", title_justify="left")
    table.add_column("metric")
    for r in loaded:
        table.add_column(escape(r.label), justify="right")
    for r in loaded[1:]:
        table.add_column(escape(f"Δ {r.label}"), justify="right")
    table.add_column("moved")
    for row in rows:
        table.add_row(row.metric, *(cell(e) for e in row.estimates), *(difference_cell(d) for d in row.differences),
                      row.moved)
    common.console.print(table)
    if out is not None:
        out.write_text(markdown(loaded, rows), "utf-8")
        common.console.print(f"Written: {out}", highlight=False, soft_wrap=True)


@user_errors
def bench_rescore(
    report: Annotated[Path, typer.Argument(metavar="REPORT", show_default=False,
                                           help="a report directory of agora bench behaviour (its runs/ are read)")],
    out: Annotated[Path, typer.Option(help="where to write the rescored report", show_default=False)],
    quiet: common.quiet_option("the report's path") = False,  # type: ignore[valid-type]
) -> None:
    """Score an earlier benchmark's runs by this engine's rules, whatever engine made them; the report
    names both engines. Nothing is run again: for judging an older engine by today's instrument."""
    from simulation.benchmark.behaviour import rescore_benchmark
    from simulation.benchmark.report import write_report

    command = "agora " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else ""
    result = rescore_benchmark(report, command)
    files = write_report(result, out)
    common.console.print(str(out / "report.md") if quiet else "Report: " + ", ".join(str(f) for f in files),
                         highlight=False, soft_wrap=True)
