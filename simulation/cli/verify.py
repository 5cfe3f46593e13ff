"""`agora verify`: make a run again from its run.db and replay cache, and say whether every row is the same.

For sharing and checking published runs: a run directory plus the replay-cache file it was made
with is enough, on any machine, without the servers, GPU or model file that made it
(``simulation.run.verify``). Exit 0 when every row matches, 1 with the first difference otherwise.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulation.cli import common
from simulation.cli.common import user_errors

__all__ = ["verify"]

QuietOpt = common.quiet_option("the verdict")


@user_errors
def verify(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory (holds run.db)", show_default=False)],
    cache_path: Annotated[Optional[Path], typer.Option(
        "--cache-path", help="the run's replay-cache file (default: the one the run was made with)",
        show_default=False)] = None,
    keep: Annotated[Optional[Path], typer.Option(
        help="keep the re-run in a new run directory under this folder (default: a temporary one, removed)",
        show_default=False)] = None,
    quiet: QuietOpt = False,
) -> None:
    """Re-run a run from its recorded scenario, seed and settings against its replay cache, and check
    that every row of run.db comes out the same (exit 0) or show the first difference (exit 1)."""
    from simulation.run.verify import verify as verify_run

    show = common.show_progress(quiet)
    progress = Progress(TextColumn("[bold]verifying tick"), MofNCompleteColumn(), BarColumn(), TimeElapsedColumn(),
                        console=common.err) if show else None
    task = progress.add_task("", total=None) if progress else None

    def on_tick(done: int, total: int) -> None:
        if progress is not None:
            progress.update(task, completed=done, total=total)

    with progress if progress is not None else nullcontext():
        result = verify_run(run_dir, cache_path, out=keep, on_tick=on_tick)
    if not quiet:
        for note in result.notes:
            common.err.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    if result.same:
        common.console.print(f"verified: {result.ticks} tick(s) of {run_dir} re-made from {result.cache_path} "
                             f"({result.replayed} answers replayed); every row is the same", highlight=False,
                             markup=False, soft_wrap=True)
        return
    common.console.print(f"DIFFERENT: {run_dir} re-made from {result.cache_path} parts from the original: "
                         f"{result.difference}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(1)
