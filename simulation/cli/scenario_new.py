"""`agora scenario new "TOPIC"`: a whole scenario file drafted by the LLM from a one-line topic."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulation.cli import common
from simulation.cli.common import user_errors
from simulation.errors import InputError, Problem, RunError

__all__ = ["new"]

_LLM = "LLM that drafts the scenario"
BackendOpt = common.backend_option(_LLM)
ModelOpt = common.model_option(_LLM)
BaseUrlOpt = common.base_url_option(_LLM)
QuietOpt = common.quiet_option("the file written")
CONTEXT_TOKENS = 4096
"""The window the drafting model is given: a persona's question shows the whole town."""


@user_errors
def new(
    topic: Annotated[str, typer.Argument(help="what the story is about, in a line: 'a rumour that the cannery "
                                              "will close, in a fishing village'", show_default=False)],
    out: Annotated[Path, typer.Option(help="the scenario file to write", show_default=False)],
    people: Annotated[int, typer.Option(min=2, max=25, help="named people")] = 6,
    places: Annotated[int, typer.Option(min=2, max=12, help="public places (each household gets a home besides)")] = 5,
    days: Annotated[int, typer.Option(min=1, max=3, help="game days (from --start to 23:00 of the last)")] = 1,
    start: Annotated[str, typer.Option(help="when the run starts, 'YYYY-MM-DD HH:00' (between 05:00 and 12:00)")]
        = "2024-03-04 07:00",
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="drafting seed: the same seed, topic and model "
                                                                  "give the same file")] = 0,
    tries: Annotated[int, typer.Option(min=1, max=10, help="times a piece is asked before the command gives up")] = 3,
    director: Annotated[bool, typer.Option(help="write story.director: on (a director keeps the beats)")] = False,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: common.CacheOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Draft a scenario from a one-line TOPIC: town, people, news with its details, beats and probes.

    Every piece is asked under a JSON schema; the file is loaded as `agora validate` would, and each
    problem goes back to the piece that made it. Exit 0 with a valid file, 1 when the topic could
    not be made valid within --tries (the last problems shown, the draft kept beside as
    OUT.invalid.yaml), 2 for bad options."""
    from simulation import authoring
    from simulation.llm import factory, registry
    from simulation.llm.client import LLMClient

    try:
        begins = datetime.strptime(start, "%Y-%m-%d %H:%M")
    except ValueError:
        raise InputError(Problem("--start", f"expected 'YYYY-MM-DD HH:00', got {start!r}")) from None
    if begins.minute or not 5 <= begins.hour <= 12:
        raise InputError(Problem("--start", f"the run starts on the hour between 05:00 and 12:00, not {begins:%H:%M}"))
    if not topic.strip() or "\n" in topic or len(topic) > 500:
        raise InputError(Problem("TOPIC", "give the topic as one line of at most 500 characters"))
    if out.exists():
        raise InputError(Problem(str(out), "already exists; choose another --out (it is never overwritten)"))
    if not out.parent.is_dir():
        raise InputError(Problem(str(out), f"its folder {out.parent} does not exist"))
    options = authoring.DraftOptions(people=people, places=places, days=days, start=begins, seed=seed, tries=tries,
                                     director=director)
    choice = common.backend_choice(backend, model, base_url, cache)
    settings = choice.apply(registry.default_settings())
    settings = settings.model_copy(update={"max_tokens": max(settings.max_tokens, authoring.drafter.MAX_TOKENS),
                                           "context_tokens": max(settings.context_tokens, CONTEXT_TOKENS)})
    show = common.show_progress(quiet)
    with common.status("loading model...", show):
        llm = factory.build_backend(settings, Path.cwd())
    progress = Progress(TextColumn("[bold]drafting"), MofNCompleteColumn(), BarColumn(), TextColumn("{task.description}"),
                        TimeElapsedColumn(), console=common.err, disable=not show)
    task = progress.add_task("", total=authoring.pieces_planned(options))
    began = time.monotonic()
    client = LLMClient(llm, run_seed=seed, temperature=settings.temperature, max_tokens=settings.max_tokens,
                       call_timeout_s=settings.call_timeout_s)
    named = Path(settings.model).name if settings.model else getattr(llm, "model_id", settings.backend)
    try:
        with progress:
            drafted = authoring.draft(topic, client, options, str(named),
                                      authoring.loader_problems(str(out)),
                                      on_piece=lambda piece: progress.update(task, advance=1, description=piece))
    except authoring.DraftFailed as exc:
        kept = ""
        if exc.text is not None:
            invalid = out.with_name(out.stem + ".invalid.yaml")
            invalid.write_text("# NOT VALID: kept to show what the LLM drafted. Problems:\n"
                               + "".join(f"#   {p}\n" for p in exc.problems) + exc.text, "utf-8")
            kept = f"; the invalid draft is in {invalid}"
        raise RunError(f"could not draft a valid scenario for this topic in {tries} tries: "
                       + "; ".join(exc.problems[:5]) + (f" (and {len(exc.problems) - 5} more)"
                                                        if len(exc.problems) > 5 else "") + kept) from None
    finally:
        llm.close()
    partial = out.with_name(out.name + ".part")
    partial.write_text(drafted.text, "utf-8")
    os.replace(partial, out)  # never a half-written file under the name asked for
    seconds = time.monotonic() - began
    if not quiet:
        again = sum(drafted.asked_again.values())
        common.console.print(
            f"[green]ok[/] {escape(str(out))}: {people} people, {places} public places, {days} day(s); "
            f"{drafted.calls} LLM calls, {again} piece(s) asked again, {drafted.rounds} round(s) of validation, "
            f"{seconds:.0f} s", highlight=False, soft_wrap=True)
        common.console.print(f"run it: agora run {escape(str(out))}", highlight=False)
    print(out)
