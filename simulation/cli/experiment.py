"""`agora experiment SPEC.yaml`: run every condition of an experiment over its seeds, then report
each condition against the control (simulation/experiment; docs/experiments.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulation.cli import common
from simulation.cli.common import BackendOpt, BaseUrlOpt, CacheOpt, CachePathOpt, ModelOpt, user_errors

__all__ = ["experiment"]


@user_errors
def experiment(
    spec_file: Annotated[Path, typer.Argument(metavar="SPEC", help="experiment YAML file", show_default=False)],
    out: Annotated[Optional[Path], typer.Option(help="experiment folder (default: bench-out/experiment-NAME)")] = None,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    cache_path: CachePathOpt = None,
    jobs: common.JobsOpt = 1,
    quiet: common.quiet_option("the report's path") = False,  # type: ignore[valid-type]
) -> None:
    """Run an experiment's conditions over the same seeds and compare each with the control: the
    paired difference per metric with its interval and effect size.

    Run again with the same --out, it reuses the finished runs there and resumes the interrupted
    ones (runs of another engine or scenario text are refused)."""
    from simulation.experiment.report import write_report
    from simulation.experiment.runner import run_experiment
    from simulation.experiment.spec import load_spec

    spec, scenario = load_spec(spec_file)
    out = out or Path("bench-out") / f"experiment-{spec.name}"
    choice = common.backend_choice(backend, model, base_url, cache, cache_path)
    command = "agora " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else ""
    total = len(spec.conditions) * len(spec.seeds)
    progress = Progress(TextColumn("[bold]{task.description}"), MofNCompleteColumn(), BarColumn(),
                        TimeElapsedColumn(), console=common.err) if common.show_progress(quiet) else None
    runs_task = progress.add_task("runs", total=total) if progress else None
    ticks_task = progress.add_task("ticks", total=None) if progress else None

    finished = 0

    def on_run(condition: str, i: int, seed: int) -> None:
        if progress is not None and jobs == 1:
            progress.update(runs_task, completed=i, description=f"{condition}, seed {seed}")
            progress.reset(ticks_task)
        elif progress is not None:
            progress.update(runs_task, description=f"{condition}, {jobs} runs at a time")

    def on_run_done(condition: str, i: int, seed: int) -> None:
        nonlocal finished
        finished += 1
        if progress is not None and jobs > 1:
            progress.update(runs_task, completed=finished)

    def on_tick(done: int, ticks: int) -> None:
        if progress is not None:
            progress.update(ticks_task, completed=done, total=ticks)

    if progress is not None:
        progress.start()
    try:
        result = run_experiment(spec, scenario, Path(spec_file), out, llm=choice, command=command, on_run=on_run,
                                on_tick=on_tick, jobs=jobs, on_run_done=on_run_done)
    finally:
        if progress is not None:
            progress.update(runs_task, completed=total)
            progress.stop()
    files = write_report(result, out)
    if not quiet:
        for c in spec.conditions:
            if c.name == result.control:
                continue
            clear = [e for e in result.effects(c.name) if e.verdict in ("higher", "lower")]
            common.err.print(f"{c.name} against {result.control}: {len(clear)} metric(s) clear of zero"
                             + (": " + ", ".join(f"{e.metric} {e.verdict}" for e in clear[:6]) if clear else ""),
                             highlight=False, markup=False)
    print(files[1])
