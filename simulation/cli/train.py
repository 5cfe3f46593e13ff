"""`agora train`: fine-tune the agents' model on the rewarded turns of one or more runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulation.cli import common
from simulation.cli.common import user_errors

__all__ = ["train"]

QuietOpt = common.quiet_option("the output folder")


@user_errors
def train(
    run_dirs: Annotated[list[Path], typer.Argument(
        metavar="RUN_DIR...", help="run directories whose rewards (`agora rewards`) are the training data",
        show_default=False)],
    out: Annotated[Path, typer.Option(help="folder for the model (hf/, model.gguf), loss.png and train.json",
                                      show_default=False)],
    fmt: Annotated[str, typer.Option("--format", help="objective: sft (best turns), dpo (better vs worse "
                                                      "answers), kto (desirable or not)")] = "sft",
    base: Annotated[str, typer.Option(help="model to start from: bundled, a GGUF file or a Hugging Face "
                                           "folder")] = "bundled",
    lora: Annotated[bool, typer.Option("--lora/--full", help="LoRA adapters (merged at the end) or all "
                                                             "weights")] = True,
    epochs: Annotated[float, typer.Option(min=0.01, max=100, help="passes over the data")] = 1.0,
    steps: Annotated[Optional[int], typer.Option(min=1, help="stop after this many optimiser steps")] = None,
    learning_rate: Annotated[Optional[float], typer.Option(
        min=1e-8, max=1.0, help="default 2e-4 with LoRA, 2e-5 full")] = None,
    grad_accumulation: Annotated[int, typer.Option(min=1, max=256, help="examples per optimiser step")] = 4,
    max_length: Annotated[int, typer.Option(min=64, max=131072, help="longest example in tokens; longer "
                                                                     "ones are left out")] = 4096,
    gguf_type: Annotated[str, typer.Option(help="the written GGUF's weights: q8_0, f16 or f32")] = "q8_0",
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1)] = 0,
    cache: Annotated[Path, typer.Option(help="where dequantised base models are kept")] = Path(".cache/agora-train"),
    quiet: QuietOpt = False,
) -> None:
    """Train on runs' rewarded turns (TRL on the CPU); writes a Hugging Face folder and a GGUF for `--model`."""
    from simulation.errors import InputError, Problem, RunError
    from simulation.training.base import resolve_base
    from simulation.training.gguf_out import GGUF_TYPES
    from simulation.training.trainer import TrainOptions, load_rows
    from simulation.training.trainer import train as run_training

    missing = [name for name in ("trl", "peft", "datasets", "gguf") if importlib.util.find_spec(name) is None]
    if missing:
        raise RunError(f"agora train needs {', '.join(missing)}: pip install 'agora[train]' (torch first, as the "
                       "README says)")
    if gguf_type not in GGUF_TYPES:
        raise InputError(Problem("--gguf-type", f"unknown type {gguf_type!r}; choose from {', '.join(GGUF_TYPES)}"))
    for run_dir in run_dirs:
        if not (run_dir / "run.db").is_file():
            raise InputError(Problem(str(run_dir), "not a run directory (no run.db)"))
    options = TrainOptions(format=fmt, lora=lora, epochs=epochs, steps=steps, learning_rate=learning_rate,
                           grad_accumulation=grad_accumulation, max_length=max_length, seed=seed, gguf_type=gguf_type)
    if not (out / "train.json").exists():
        # the runs' rows first (seconds; exported where training will read them): a run without
        # rewards is bad input found before the base model is prepared, which can take a minute
        load_rows(run_dirs, fmt, out / "data")
    show = common.show_progress(quiet)
    with common.status("preparing the base model...", show):
        hf_base, template, label = resolve_base(base, cache)
    progress = Progress(TextColumn(f"[bold]training ({escape(fmt)})"), MofNCompleteColumn(), BarColumn(),
                        TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(), console=common.err) if show else None
    task = progress.add_task("", total=None, loss="-") if progress else None

    def on_step(step: int, total: int, loss: float | None) -> None:
        if progress is not None:
            progress.update(task, completed=step, total=total or None, loss="-" if loss is None else f"{loss:.3f}")

    if progress is not None:
        with progress:
            result = run_training(run_dirs, hf_base, out, options, template_gguf=template, base_label=label,
                                  on_step=on_step)
    else:
        result = run_training(run_dirs, hf_base, out, options, template_gguf=template, base_label=label)
    if not quiet:
        first = f"{result.losses[0][1]:.3f}" if result.losses else "-"
        last = f"{result.losses[-1][1]:.3f}" if result.losses else "-"
        common.console.print(
            f"{result.rows} examples ({result.skipped_long} left out as too long), {result.steps} steps, "
            f"loss {first} -> {last}, {result.seconds:.0f} s", highlight=False)
        if result.gguf is not None:
            common.console.print(f"run it: agora run SCENARIO --model {result.gguf}", highlight=False, markup=False)
    print(out)
