"""The ``agora`` command line: run, validate, schema.

Exit codes: 0 ok, 2 bad input (a message naming file, line and field; no traceback),
1 any other failure (a message; the traceback only with AGORA_DEBUG=1), 130 interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simulation.errors import InputError, RunError

app = typer.Typer(
    name="agora", help="Agora: LLM persona agents living in a town.", no_args_is_help=True,
    pretty_exceptions_enable=False, add_completion=False,
)
console = Console()
err = Console(stderr=True, emoji=False)

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(func: F) -> F:
    """Turn the engine's errors into one clear message and the documented exit code."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            err.print(f"[bold red]error:[/] {len(exc.problems)} problem(s) in the input" if len(exc.problems) > 1
                      else "[bold red]error:[/] bad input", highlight=False)
            for problem in exc.problems:
                err.print(f"  {problem}", highlight=False, markup=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except RunError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None
        except typer.Exit:
            raise
        except Exception as exc:  # a bug: say so plainly
            if os.environ.get("AGORA_DEBUG"):
                raise
            err.print(f"[bold red]internal error:[/] {escape(f'{type(exc).__name__}: {exc}')}\n"
                      "Run again with AGORA_DEBUG=1 to see the traceback.", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


@app.command()
@user_errors
def validate(
    scenarios: Annotated[list[Path], typer.Argument(help="scenario or persona YAML files", show_default=False)],
) -> None:
    """Check scenario files (and the persona files they reference) and persona files; exit 0 if all
    are valid, else 2."""
    from simulation import scenario as sc

    problems = []
    for path in scenarios:
        try:
            if _looks_like_persona(path):
                persona = sc.load_persona(path)
                console.print(f"[green]ok[/] {escape(str(path))}: persona {escape(persona.name)} ({persona.id})",
                              highlight=False, soft_wrap=True)
                continue
            loaded = sc.load(path)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        s = loaded.scenario
        console.print(f"[green]ok[/] {escape(str(path))}: {len(loaded.people)} people, {len(s.town.places)} places, "
                      f"{s.clock.total_ticks} ticks of {s.clock.tick_minutes} min", highlight=False, soft_wrap=True)
    if problems:
        raise InputError(problems)


def _looks_like_persona(path: Path) -> bool:
    """A persona file rather than a scenario: a mapping with a routine or Big Five and no town."""
    from simulation.yamlfile import load_yaml

    try:
        data = load_yaml(path).data
    except InputError:
        return False  # the scenario loader reports it
    return isinstance(data, dict) and "town" not in data and ("routine" in data or "big_five" in data)


@app.command()
@user_errors
def schema(
    kind: Annotated[str, typer.Option(help="scenario or persona")] = "scenario",
    out: Annotated[Optional[Path], typer.Option(help="write to this file instead of stdout")] = None,
) -> None:
    """Print the JSON Schema of scenario (or persona) files, for editor validation."""
    from simulation import scenario as sc

    if kind not in ("scenario", "persona"):
        raise InputError(sc.Problem("--kind", f"expected 'scenario' or 'persona', got {kind!r}"))
    text = json.dumps(sc.json_schema(kind), indent=2)  # type: ignore[arg-type]
    if out:
        try:
            out.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(sc.Problem(str(out), f"cannot write: {exc.strerror or exc}")) from None
        err.print(f"wrote {out}", markup=False, highlight=False)
    else:
        print(text)


BackendOpt = Annotated[Optional[str], typer.Option(
    "--backend", help="llamacpp (GGUF on the CPU, default), vllm (in-process engine) or openai (servers)",
    show_default=False)]
ModelOpt = Annotated[Optional[str], typer.Option(
    "--model", help="llamacpp: GGUF path; vllm: Hugging Face folder or id; openai: served model name",
    show_default=False)]
BaseUrlOpt = Annotated[Optional[list[str]], typer.Option(
    "--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (repeat for a fleet)",
    show_default=False)]
CacheOpt = Annotated[Optional[str], typer.Option(
    "--cache", help="replay cache: use (read+write, default), refresh (write only) or off", show_default=False)]
CachePathOpt = Annotated[Optional[str], typer.Option(
    "--cache-path", help="replay-cache file (default ~/.cache/agora/llm.sqlite)", show_default=False)]


def backend_choice(backend: str | None, model: str | None, base_url: list[str] | None, cache: str | None,
                   cache_path: str | None) -> Any:
    """Command-line LLM options as overrides of a scenario's ``llm:`` block (shared by run, eval, ...)."""
    from simulation.llm.factory import BackendChoice
    from simulation.scenario import Problem

    problems = []
    if backend is not None and backend not in ("llamacpp", "vllm", "openai"):
        problems.append(Problem("--backend", f"expected llamacpp, vllm or openai, got {backend!r}"))
    if cache is not None and cache not in ("use", "refresh", "off"):
        problems.append(Problem("--cache", f"expected use, refresh or off, got {cache!r}"))
    if problems:
        raise InputError(problems)
    return BackendChoice(backend=backend, model=model, base_urls=list(base_url or []), cache=cache,
                         cache_path=cache_path)


QuietOpt = Annotated[bool, typer.Option(help="no progress bar or summary; print only the run directory")]


def _show_progress(quiet: bool) -> bool:
    """A progress bar on a terminal unless --quiet; AGORA_PROGRESS=1 forces it (e.g. when piped)."""
    return not quiet and console.is_terminal or os.environ.get("AGORA_PROGRESS") == "1"


@app.command()
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
    from simulation import scenario as sc
    from simulation.runner import RunOptions, create_run, llm_settings, make_backend

    loaded = sc.load(scenario_file)
    options = RunOptions(out=out, ticks=ticks, seed=seed,
                         llm=backend_choice(backend, model, base_url, cache, cache_path))
    settings = llm_settings(loaded, options.llm)
    if model and settings.backend == "llamacpp" and not sc.resolve_path(model, Path.cwd()).is_file():
        raise InputError(sc.Problem("--model", f"model file not found: {model}"))
    show = _show_progress(quiet)
    with console.status(f"starting the {settings.backend} backend...", spinner="dots") if show else nullcontext():
        llm = make_backend(loaded, options)
    progress = _RunProgress(enabled=show)
    started = time.perf_counter()
    the_run = create_run(loaded, llm, options, on_llm=progress.on_llm)
    _drive(the_run, llm, progress, started, quiet)


@app.command()
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
    from simulation.runner import RunOptions, resume_run

    options = RunOptions(ticks=ticks, llm=backend_choice(backend, model, base_url, cache, cache_path))
    show = _show_progress(quiet)
    progress = _RunProgress(enabled=show)
    started = time.perf_counter()
    with console.status("rebuilding the run's state...", spinner="dots") if show else nullcontext():
        the_run, llm = resume_run(run_dir, options, on_llm=progress.on_llm)
    if show:
        err.print(f"resuming {the_run.run_id} at tick {the_run.model.tick} "
                  f"({the_run.model.now:%a %H:%M}), {the_run.ticks} tick(s) to go", highlight=False)
    _drive(the_run, llm, progress, started, quiet)


def _drive(the_run: Any, llm: Any, progress: _RunProgress, started: float, quiet: bool) -> None:
    """Step a created or resumed run to its end, then ask its probes; record how it ended, and on
    any stop say what is saved and how to go on."""
    from simulation.runner import finish

    status, message = "failed", None
    try:
        with progress.live(the_run.ticks):
            for _ in range(the_run.ticks):
                the_run.model.step()
                progress.on_tick(the_run.model)
            if the_run.model.scenario.probes and the_run.probes_due:
                progress.describe("asking probe questions")
                the_run.model.ask_probes()
        status = "finished"
    except KeyboardInterrupt:
        status, message = "interrupted", f"stopped by the user after {the_run.model.tick} tick(s)"
        err.print(f"{message}; {_saved(the_run)}", markup=False, highlight=False, soft_wrap=True)
        raise
    except RunError as exc:
        message = str(exc)
        raise RunError(f"{exc}\n{_saved(the_run)}") from None
    except Exception as exc:
        message = f"internal error: {type(exc).__name__}: {exc}"
        raise
    finally:
        finish(the_run, status, message)
        llm.close()
    if not quiet:
        from simulation.report import summarize

        print_summary(summarize(the_run.run_dir / "run.db"), time.perf_counter() - started)
    print(the_run.run_dir)


def _saved(the_run: Any) -> str:
    """What a stopped run kept, and the command that continues it."""
    done = the_run.model.tick
    where = the_run.run_dir / "run.db"
    kept = f"ticks 0-{done - 1} are saved in {where}" if done else f"no tick was completed ({where})"
    return f"{kept}\ncontinue with: agora resume {the_run.run_dir}"


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
            TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
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

    def on_tick(self, model: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.task, advance=1, clock=model.now.strftime("%a %H:%M"),
                                 failures=model.llm.stats.parse_failures)

    def describe(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=text)


def print_summary(s: Any, wall: float) -> None:
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
    for topic, aware in s.awareness.items():
        who = ", ".join(f"{name} from {when[5:]}" for name, when in aware)
        console.print(f"Topic [bold]{escape(topic)}[/]: {len(aware)}/{len(s.agents)} aware"
                      + (f" ({escape(who)})" if aware else ""), highlight=False)
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
    if s.probes:
        probes = Table(title="Probe answers", title_justify="left")
        probes.add_column("who")
        probes.add_column("question", overflow="fold")
        probes.add_column("answer", overflow="fold")
        for who, q, a in s.probes:
            probes.add_row(escape(who), escape(q), escape(a))
        console.print(probes)


# Command groups that live in modules of their own (they import user_errors etc. from here).
from simulation import cli_eval, cli_rewards, cli_ui  # noqa: E402

cli_ui.register(app)
cli_eval.register(app)
cli_rewards.register(app)


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # A graceful stop on Ctrl-C and on SIGTERM (a scheduler, `docker stop`, `kill`): the tick in
    # flight is rolled back and the run can be resumed. SIGINT is set explicitly because a process
    # started in the background by a non-interactive shell inherits it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop)
    app()


if __name__ == "__main__":
    sys.exit(main())
