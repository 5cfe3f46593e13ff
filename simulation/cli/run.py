"""`agora run`, `agora resume` and `agora fork`: step a run to its end with a progress bar, then print its summary.

The run loop is ``Simulation.run`` (simulation/run/simulation.py); these commands add a progress
bar, and on any stop say what is saved and how to go on.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simulation.cli import common
from simulation.cli.common import BackendOpt, BaseUrlOpt, CacheOpt, CachePathOpt, ModelOpt, user_errors
from simulation.errors import RunError
from simulation.rundb.behaviour import failing_purposes

if TYPE_CHECKING:
    from simulation import Simulation

__all__ = ["fork", "print_summary", "resume", "run"]

QuietOpt = common.quiet_option("the run directory")


@user_errors
def run(
    scenario_file: Annotated[Path, typer.Argument(metavar="SCENARIO", help="scenario YAML file", show_default=False)],
    out: Annotated[Path, typer.Option(help="directory that receives the run directory")] = Path("runs"),
    ticks: Annotated[Optional[int], typer.Option(min=1, help="ticks to run (default: the scenario's full duration)")] = None,
    seed: Annotated[Optional[int], typer.Option(min=0, max=2**31 - 1, help="override the scenario's seed")] = None,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    cache_path: CachePathOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Run a scenario; prints the run directory (which holds run.db)."""
    from simulation import Simulation
    from simulation import scenario as sc
    from simulation.run.settings import RunSettings

    loaded = sc.load(scenario_file)
    choice = common.backend_choice(backend, model, base_url, cache, cache_path)
    settings = RunSettings.resolve(loaded, llm=choice, seed=seed, ticks=ticks, out=out)
    show = common.show_progress(quiet)
    progress = _RunProgress(enabled=show)
    started = time.perf_counter()
    with common.status(f"starting the {settings.llm.backend} backend...", show):
        sim = Simulation.from_settings(settings, on_llm=progress.on_llm)
    _drive(sim, progress, started, quiet)


@user_errors
def resume(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory (holds run.db)", show_default=False)],
    ticks: Annotated[Optional[int], typer.Option(min=1, help="ticks to run from here (default: the rest of the run)")] = None,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    cache_path: CachePathOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Continue a run from its last committed tick (after Ctrl-C, an error, or a killed process).

    The LLM options override the settings the run started with (e.g. a server's new address).
    With the replay cache the resumed run's events are exactly those of an uninterrupted run."""
    from simulation import Simulation

    choice = common.backend_choice(backend, model, base_url, cache, cache_path)
    show = common.show_progress(quiet)
    progress = _RunProgress(enabled=show)
    started = time.perf_counter()
    with common.status("rebuilding the run's state...", show):
        sim = Simulation.resume(run_dir, ticks=ticks, llm=choice, on_llm=progress.on_llm)
    if show:
        common.err.print(f"resuming {sim.run_id} at tick {sim.tick} ({sim.now:%a %H:%M}), "
                         f"{sim.ticks_left} tick(s) to go", highlight=False)
    _drive(sim, progress, started, quiet)


@user_errors
def fork(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="the run to fork (holds run.db)", show_default=False)],
    at: Annotated[int, typer.Option(min=0, help="the first tick the fork makes itself; the ticks before it are "
                                    "the parent's, replayed from the replay cache", show_default=False)],
    out: Annotated[Path, typer.Option(help="directory that receives the fork's run directory")] = Path("runs"),
    whisper: Annotated[Optional[list[str]], typer.Option(
        help="PERSON=TEXT: a thought put into a person's mind at the fork (repeatable)", show_default=False)] = None,
    event: Annotated[Optional[list[str]], typer.Option(
        help="PLACE=TEXT or PLACE:MINUTES=TEXT: something everyone at a place sees from the fork (repeatable)",
        show_default=False)] = None,
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="SETTING=VALUE: a cognition or memory setting changed from the fork on, e.g. "
        "cognition.reactions_per_hour=1 (repeatable)", show_default=False)] = None,
    fact: Annotated[Optional[str], typer.Option(
        help="the scenario fact the whispers and events bring into the town (tracked as the scenario's own)",
        show_default=False)] = None,
    remove: Annotated[Optional[list[str]], typer.Option(
        help="PERSON or PERSON=TEXT: the person leaves the town at the fork (repeatable)", show_default=False)] = None,
    add: Annotated[Optional[list[str]], typer.Option(
        help="PERSONA_FILE@PLACE[,home=PLACE][,workplace=PLACE][,crowd]: the persona file's person arrives at "
        "PLACE at the fork and lives there from then on (home: PLACE unless given; crowd: background crowd) "
        "(repeatable)", show_default=False)] = None,
    correct: Annotated[Optional[list[str]], typer.Option(
        help="FACT=TEXT: the fact's text from the fork on, what later tellings and probe answers are scored "
        "against (repeatable, once per fact)", show_default=False)] = None,
    detail: Annotated[Optional[list[str]], typer.Option(
        help="FACT.DETAIL=VALUE: one of a corrected fact's details changed with its text, e.g. "
        "party.place=the_rose_and_crown_pub (repeatable)", show_default=False)] = None,
    ticks: Annotated[Optional[int], typer.Option(min=1, help="ticks to run after the fork (default: to the parent's end)")] = None,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    cache_path: CachePathOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Branch a run at a tick: a new run whose earlier ticks are the parent's, bit for bit, and which
    then goes its own way after the interventions (docs/experiments.md)."""
    from simulation import Simulation
    from simulation.run.fork import parse_interventions

    interventions = parse_interventions(whisper=whisper or [], event=event or [], set_=set_ or [], fact=fact,
                                        remove=remove or [], add=add or [], correct=correct or [],
                                        detail=detail or [])
    choice = common.backend_choice(backend, model, base_url, cache, cache_path)
    show = common.show_progress(quiet)
    progress = _RunProgress(enabled=show)
    started = time.perf_counter()
    replay = _RunProgress(enabled=show)
    with replay.live(at):
        replay.describe("replaying the parent")
        sim = Simulation.fork(run_dir, at=at, out=out, interventions=interventions, ticks=ticks, llm=choice,
                              on_tick=replay.on_tick, on_llm=replay.on_llm)
    if not quiet:
        fresh = replay.calls - replay.hits
        common.err.print(f"forked {sim.run_id} from {run_dir} at tick {at} ({sim.now:%a %H:%M}): "
                         f"{replay.calls} answers replayed, {replay.hits} from the replay cache"
                         + (f", {fresh} asked again (not in the cache)" if fresh else "")
                         + f"; {len(interventions)} intervention(s); {sim.ticks_left} tick(s) to go",
                         highlight=False, markup=False)
        added = {iv.persona for iv in interventions if iv.kind == "arrival"}
        for person in sim.model.loaded.arrivals.values():  # as agora validate says of a scenario's people
            note = common.habits_note(person) if person.source in added else None
            if note is not None:
                common.err.print(note, highlight=False, soft_wrap=True)
    sim.model.llm.on_progress = progress.on_llm  # the rest of the run's calls, on the run's own bar
    _drive(sim, progress, started, quiet)


def _drive(sim: Simulation, progress: _RunProgress, started: float, quiet: bool) -> None:
    """``Simulation.run`` under a progress bar; on any stop, say what is saved and how to go on
    (the Simulation records how the run ended, releases its lock and closes the backend)."""
    try:
        with sim, progress.live(sim.ticks_left):
            summary = sim.run(on_tick=progress.on_tick, on_probes=lambda: progress.describe("asking probe questions"))
    except KeyboardInterrupt:
        common.err.print(f"stopped by the user after {sim.tick} tick(s); {sim.saved()}", markup=False,
                         highlight=False, soft_wrap=True)
        raise
    except RunError as exc:
        raise RunError(f"{exc}\n{sim.saved()}") from None
    if not quiet:
        print_summary(summary, time.perf_counter() - started)
    print(sim.run_dir)


class _RunProgress:
    """A rich progress bar: ticks, game time, LLM calls, tokens/s."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.calls = 0
        self.hits = 0
        self.tokens = 0
        self.all_tokens = 0
        self.started = time.perf_counter()
        self.progress: Progress | None = None
        self.task: Any = None

    def live(self, total: int) -> Any:
        if not self.enabled:
            return nullcontext()
        self.progress = Progress(
            TextColumn("[bold]tick"), MofNCompleteColumn(), BarColumn(), TextColumn("{task.fields[clock]}"),
            TextColumn("LLM calls {task.fields[calls]}"), TextColumn("cached {task.fields[hits]}"),
            TextColumn("tokens {task.fields[tokens]}"), TextColumn("{task.fields[tps]} tok/s generated"),
            TextColumn("parse failures {task.fields[failures]}"),
            TextColumn("{task.description}"), TimeElapsedColumn(), console=common.err,
        )
        self.task = self.progress.add_task("", total=total, clock="", calls=0, hits=0, tokens="0", tps="0",
                                           failures=0)
        self.started = time.perf_counter()
        return self.progress

    def on_llm(self, completion: Any) -> None:
        self.calls += 1
        self.hits += completion.cache_hit
        if not completion.cache_hit:  # tok/s is what the backend generated, not what the cache replayed
            self.tokens += completion.completion_tokens
        self.all_tokens += completion.prompt_tokens + completion.completion_tokens
        if self.progress is not None:
            elapsed = max(1e-6, time.perf_counter() - self.started)
            self.progress.update(self.task, calls=self.calls, hits=self.hits, tokens=f"{self.all_tokens / 1000:.1f}k",
                                 tps=f"{self.tokens / elapsed:.0f}")

    def on_tick(self, sim: Simulation) -> None:
        if self.progress is not None:
            self.progress.update(self.task, advance=1, clock=sim.now.strftime("%a %H:%M"),
                                 failures=sim.model.llm.stats.parse_failures)

    def describe(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=text)


def _num(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def print_summary(s: Any, wall: float) -> None:
    """The end-of-run report on stdout: people, conversations, how each fact spread, memories, the
    LLM's cost, probe answers."""
    console = common.console
    console.rule(f"[bold]{escape(s.scenario)}[/] · {escape(s.run_id)} · {s.status}")
    console.print(f"{s.ticks_done} ticks, game time {s.start} to {s.end} ({s.game_hours:g} h); "
                  f"wall {wall:.0f} s", highlight=False)
    people = Table(title="People", title_justify="left")
    for col in ("name", "now at", "doing", "events", "memories", "convs", "said", "LLM calls"):
        people.add_column(col, overflow="fold", justify="right" if col in ("events", "memories", "convs", "said", "LLM calls") else "left")
    for a in s.agents:
        people.add_row(*(escape(str(v)) for v in (a.name, a.place, a.doing, a.events, a.memories,
                                                    a.conversations, a.utterances, a.llm_calls)))
    console.print(people)
    if s.conversations:
        console.print(f"{s.conversations} conversation(s), {s.utterances} utterances.")
    else:
        console.print("No conversations happened in this run (nobody met someone they chose to talk to).")
    b = s.behaviour
    if b.get("talk.encounters_per_agent_hour") is not None:
        turns = b.get("talk.turns_mean")
        console.print(f"Encounters per person per game hour {b['talk.encounters_per_agent_hour']:.2f}; "
                      f"conversations per encounter {_num(b.get('talk.conversations_per_encounter'))}; "
                      f"lines per conversation {_num(turns)}"
                      + (f" ({b['talk.two_line_share']:.0%} ended at two lines)" if turns is not None else ""),
                      highlight=False)
    if b.get("talk.invitations"):
        turnout = b.get("talk.invitation_turnout")
        console.print(f"Invitations {b['talk.invitations']:.0f}, accepted "
                      f"{_num(b.get('talk.invitations_accepted_share'), '.0%')}"
                      + (f", accepted guests who came {turnout:.0%}" if turnout is not None else ""), highlight=False)
    for fact_id, f in s.facts.items():
        who = ", ".join(f"{name} {when[5:]} {how}" + (f" from {teller}" if teller else "")
                        for name, when, how, teller, _ in f.aware)
        line = (f"Fact [bold]{escape(fact_id)}[/]: told to {f.told} by someone, "
                f"{len(f.aware)}/{len(s.agents)} aware (its sources included)")
        if f.told:
            line += f", cascade depth {f.depth}, distorted {_num(f.distortion, '.0%')}, " \
                    f"details kept {_num(f.retention, '.0%')}"
        if f.invented:
            line += f", {f.invented} invented mention(s)"
        if f.verdicts:
            line += "; probe answers: " + ", ".join(f"{n} {v}" for v, n in sorted(f.verdicts.items()))
        console.print(line + (f" ({escape(who)})" if who else ""), highlight=False)
    if s.memory_kinds:
        kinds = ", ".join(f"{n} {k}" for k, n in s.memory_kinds.items())
        console.print(f"Memories formed: {escape(kinds)}; {s.retrievals} retrievals.", highlight=False)
    if s.density is not None:
        console.print(f"Who-knows-whom density: {s.density[0]:.2f} at the start, {s.density[1]:.2f} at the end.",
                      highlight=False)
    llm = Table(title="LLM", title_justify="left")
    for col in ("calls", "cache hits", "per agent per game hour", "tokens per agent per game hour",
                "tokens/s generated", "parse failures", "fallbacks", "LLM time", "outside LLM"):
        llm.add_column(col)
    fresh_s = s.llm_seconds
    tps = f"{s.generated_tokens / fresh_s:.0f}" if fresh_s > 0 and s.generated_tokens else "-"
    llm.add_row(str(s.llm_calls), str(s.cache_hits), f"{s.calls_per_agent_hour:.1f}",
                f"{s.tokens_per_agent_hour:.0f}", tps, str(s.parse_failures), str(s.fallbacks),
                f"{s.llm_seconds:.0f} s", f"{s.outside_llm_share:.2%}")
    console.print(llm)
    for purpose, share in failing_purposes(b):
        console.print(f"[bold red]failing: {escape(purpose)} falls back to the safe default {share:.0%} of the "
                      "time[/]: that part of cognition is not running", highlight=False)
    if s.probes:
        probes = Table(title="Probe answers", title_justify="left")
        probes.add_column("who")
        probes.add_column("question", overflow="fold")
        probes.add_column("answer", overflow="fold")
        for who, q, a in s.probes:
            probes.add_row(escape(who), escape(q), escape(a))
        console.print(probes)
