"""`agora bench behaviour` and `agora behaviour`: a scenario's behaviour over several seeds, and one run's.

``bench behaviour`` runs the scenario once per seed (a rich progress bar over seeds and ticks),
then writes report.md, behaviour.json and PNG plots (simulation/benchmark/behaviour.py) and
prints the table. ``behaviour`` computes one run's metrics from its run.db, stores them in its
``behaviour`` table and prints them.
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

__all__ = ["behaviour", "bench_behaviour", "bench_compare"]


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
    quiet: common.quiet_option("the report's path") = False,  # type: ignore[valid-type]
) -> None:
    """Run a scenario over several seeds and report each behaviour metric's mean and 95 % interval.

    Run again with the same --out, it reuses the finished runs there and resumes the interrupted ones."""
    from simulation import scenario as sc
    from simulation.benchmark.behaviour import run_benchmark, write_report

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
        if progress is not None:
            progress.update(seeds_task, completed=i, description=f"seed {seed}")
            progress.reset(ticks_task)

    def on_tick(done: int, total: int) -> None:
        if progress is not None:
            progress.update(ticks_task, completed=done, total=total)

    if progress is not None:
        progress.start()
    try:
        result = run_benchmark(loaded, chosen, out, ticks=ticks, llm=choice, command=command, on_seed=on_seed,
                               on_tick=on_tick)
    finally:
        if progress is not None:
            progress.update(seeds_task, completed=len(chosen))
            progress.stop()
    files = write_report(result, out)
    if quiet:
        common.console.print(str(out / "report.md"), highlight=False, soft_wrap=True)
        return
    table = Table(title=f"Behaviour of {escape(result.scenario)} over seeds {seeds} (mean, 95 % interval)",
                  title_justify="left")
    for col in ("metric", "mean", "95 % interval", "n"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for name, e in result.table().items():
        interval = f"{e.low:.3g} – {e.high:.3g}" if e.n > 1 and e.low is not None else "–"
        table.add_row(name, "–" if e.mean is None else f"{e.mean:.3g}", interval, str(e.n))
    common.console.print(table)
    common.console.print("Report: " + ", ".join(str(f) for f in files), highlight=False, soft_wrap=True)


@user_errors
def behaviour(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory (holds run.db)", show_default=False)],
) -> None:
    """Re-score a run's probe answers, compute its behaviour metrics (docs/behaviour.md), store both in its run.db and print them."""
    from simulation.provenance.rescore import rescore_probes
    from simulation.rundb.behaviour import behaviour as compute
    from simulation.store import RunStore

    store = RunStore.open(run_dir)
    try:
        rescore_probes(store.db.conn, store.run_id)
        store.db.conn.commit()
        metrics = compute(store.db, store.run_id)
        store.replace_behaviour(metrics)
    finally:
        store.close()
    table = Table(title=f"Behaviour of {escape(str(run_dir))}", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        table.add_row(name, "–" if value is None else f"{value:.4g}")
    common.console.print(table)


@user_errors
def bench_compare(
    reports: Annotated[list[Path], typer.Argument(metavar="REPORT...", show_default=False,
                                                  help="report directories of agora bench behaviour (the first is the reference)")],
    label: Annotated[Optional[list[str]], typer.Option(help="a name per report, in order (default: the folder names)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="also write the comparison as markdown to this file")] = None,
) -> None:
    """Behaviour benchmarks side by side: each metric's mean and 95 % interval, and which way the last moved from the first."""
    from simulation.benchmark.compare import cell, compare, load_report, markdown

    if len(reports) < 2:
        raise InputError(Problem("REPORT", "give two or more report directories to compare"))
    if label and len(label) != len(reports):
        raise InputError(Problem("--label", f"give one label per report: {len(reports)} reports, {len(label)} labels"))
    loaded = [load_report(p, label[i] if label else None) for i, p in enumerate(reports)]
    rows = compare(loaded)
    table = Table(title="Behaviour, mean [95 % interval] over seeds", title_justify="left")
    table.add_column("metric")
    for r in loaded:
        table.add_column(escape(r.label), justify="right")
    table.add_column("moved")
    for row in rows:
        table.add_row(row.metric, *(cell(e) for e in row.estimates), row.moved)
    common.console.print(table)
    if out is not None:
        out.write_text(markdown(loaded, rows), "utf-8")
        common.console.print(f"Written: {out}", highlight=False, soft_wrap=True)
