"""`agora evolve`: run a town, reward it, train the agents' model, and measure the next round on
held-out seeds (simulation/training/evolve.py; docs/rewards.md, "The loop")."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from simulation.cli import common
from simulation.cli.common import user_errors

__all__ = ["evolve"]

_JUDGE = "LLM that judges every run (default: the frozen starting model, never the one being trained)"
JudgeBackendOpt = common.backend_option(_JUDGE, "--judge-backend")
JudgeModelOpt = common.model_option(_JUDGE, "--judge-model")
JudgeBaseUrlOpt = common.base_url_option(_JUDGE, "--judge-base-url")
QuietOpt = common.quiet_option("the report")


def _seeds(text: str, option: str) -> tuple[int, ...]:
    from simulation.errors import InputError, Problem

    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError(Problem(option, f"expected comma-separated whole numbers, got {text!r}")) from None
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise InputError(Problem(option, f"expected distinct seeds >= 0, got {text!r}"))
    return seeds


@user_errors
def evolve(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO", help="scenario YAML file", show_default=False)],
    out: Annotated[Path, typer.Option(help="folder for every round's runs, models, evolve.db and report.md",
                                      show_default=False)],
    rounds: Annotated[int, typer.Option(min=1, max=50, help="training rounds after round 0")] = 2,
    seeds: Annotated[str, typer.Option(help="training seeds, one run each per round")] = "1,2,3",
    held_out: Annotated[str, typer.Option(help="seeds every round's model is measured on (never trained on)")]
    = "101,102,103",
    ticks: Annotated[Optional[int], typer.Option(min=1, help="ticks per run (default: the scenario's)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="training objective: sft, dpo or kto")] = "sft",
    base: Annotated[str, typer.Option(help="starting model: bundled or a llama-architecture GGUF")] = "bundled",
    lora: Annotated[bool, typer.Option("--lora/--full")] = True,
    epochs: Annotated[float, typer.Option(min=0.01, max=100)] = 1.0,
    steps: Annotated[Optional[int], typer.Option(min=1, help="optimiser steps per round (default: epochs)")] = None,
    max_length: Annotated[int, typer.Option(min=64, max=131072)] = 4096,
    judge_backend: JudgeBackendOpt = None,
    judge_model: JudgeModelOpt = None,
    judge_base_url: JudgeBaseUrlOpt = None,
    cache: Annotated[Path, typer.Option(help="where dequantised base models are kept")] = Path(".cache/agora-train"),
    quiet: QuietOpt = False,
) -> None:
    """Co-evolve: run -> rewards -> train -> run again on held-out seeds, for --rounds rounds."""
    from simulation import scenario as sc
    from simulation.errors import InputError, Problem
    from simulation.llm import factory, registry
    from simulation.llm.factory import BackendChoice
    from simulation.training import evolve as ev
    from simulation.training.trainer import FORMATS, TrainOptions

    if fmt not in FORMATS:
        raise InputError(Problem("--format", f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}"))
    if base != "bundled" and not Path(base).expanduser().is_file():
        raise InputError(Problem("--base", f"{base}: no such GGUF file (evolve runs each round's model on llama.cpp)"))
    loaded = sc.load(scenario_file)
    options = ev.EvolveOptions(rounds=rounds, seeds=_seeds(seeds, "--seeds"), held_out=_seeds(held_out, "--held-out"),
                               ticks=ticks)
    train_options = TrainOptions(format=fmt, lora=lora, epochs=epochs, steps=steps, max_length=max_length)
    start = None if base == "bundled" else str(Path(base).expanduser().resolve())
    judge_choice = common.backend_choice(judge_backend, judge_model or (start if judge_backend in (None, "llamacpp")
                                                                          else None),
                                         judge_base_url, prefix="--judge-")
    judge_settings = judge_choice.apply(registry.default_settings())
    show = common.show_progress(quiet)
    with common.status("loading the judge...", show):
        judge = factory.build_backend(judge_settings, Path.cwd())
    command = "agora " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "agora evolve"
    try:
        def agents_for(model: str) -> BackendChoice:
            return BackendChoice(backend="llamacpp", model=model)

        def on_stage(text: str) -> None:
            if not quiet:
                common.err.print(f"[bold]{text}[/]", highlight=False)

        results = ev.evolve(loaded, out, options, train_options, base=base, judge=judge, agents_for=agents_for,
                            cache=cache, on_stage=on_stage)
    finally:
        judge.close()
    report = ev.write_report(results, out, command, judge.model_id)
    if not quiet:
        traded = [r["metric"] for r in ev.round_table(results) if r["traded"]]
        common.console.print(f"{len(results) - 1} round(s); report {report}"
                             + (f"; prosocial measures traded away: {', '.join(traded)}" if traded else ""),
                             highlight=False, soft_wrap=True)
    print(report)
