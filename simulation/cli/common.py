"""What every ``agora`` command shares: the consoles, the error-to-exit-code rule, the LLM options
and when to draw progress.

Exit codes: 0 ok, 2 bad input (a message naming file, line and field; no traceback),
1 any other failure (a message; the traceback only with AGORA_DEBUG=1), 130 interrupted.

Commands use ``common.console`` and ``common.err`` through this module (not imported names),
so a test can capture what they print by replacing them here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulation.errors import InputError, Problem, RunError
from simulation.llm import registry
from simulation.llm.factory import BackendChoice

if TYPE_CHECKING:
    from simulation.scenario import ResolvedPersona

__all__ = [
    "BaseUrlOpt", "BackendOpt", "CacheOpt", "CachePathOpt", "CallsBar", "JobsOpt", "ModelOpt", "backend_choice", "backend_option",
    "base_url_option", "console", "err", "habits_note", "model_option", "quiet_option", "show_progress", "status", "user_errors",
]

console = Console()
"""Results: tables, summaries, the path a command prints last."""
err = Console(stderr=True, emoji=False)
"""Everything else: errors, warnings, progress; stdout stays clean for scripts."""

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


# --------------------------------------------------------------------------- progress


def habits_note(person: ResolvedPersona) -> str | None:
    """The note that a person's habits at places the town lacks were left out (``agora validate``
    for a scenario's people, ``agora fork --add`` for someone who arrives), or None."""
    if not person.habits_left_out:
        return None
    return (f"note: {escape(person.persona.id)}: habits at places this town lacks are left out: "
            f"{escape('; '.join(person.habits_left_out))}")


def show_progress(quiet: bool) -> bool:
    """Whether a command draws progress (bars, spinners): not with --quiet; else when stderr, where
    they are drawn, is a terminal, or when AGORA_PROGRESS=1 forces them (e.g. into a log)."""
    return not quiet and (err.is_terminal or os.environ.get("AGORA_PROGRESS") == "1")


def status(text: str, show: bool) -> AbstractContextManager[Any]:
    """A spinner with ``text`` on stderr while a slow step runs (a model loading), when ``show``."""
    return err.status(text, spinner="dots") if show else nullcontext()


class CallsBar:
    """A progress bar of LLM calls (completions, retries included) with token counts, on stderr."""

    def __init__(self, what: str, enabled: bool):
        self.done = 0
        self.tokens = 0
        self.progress = Progress(TextColumn(f"[bold]{escape(what)}"), MofNCompleteColumn(), BarColumn(),
                                 TextColumn("tokens {task.fields[tokens]}"), TimeElapsedColumn(),
                                 console=err) if enabled else None
        self.task = self.progress.add_task("", total=None, tokens="0") if self.progress else None

    def plan(self, total: int) -> None:
        if self.progress:
            self.progress.update(self.task, total=total)

    def on_llm(self, completion: Any) -> None:
        self.done += 1
        self.tokens += completion.prompt_tokens + completion.completion_tokens
        if self.progress:
            total = self.progress.tasks[0].total
            self.progress.update(self.task, completed=self.done,
                                 total=max(total or 0, self.done) if total is not None else None,
                                 tokens=f"{self.tokens / 1000:.1f}k")

    def live(self) -> AbstractContextManager[Any]:
        return self.progress if self.progress else nullcontext()


# --------------------------------------------------------------------------- LLM options


def backend_option(who: str = "", flag: str = "--backend") -> Any:
    """``--backend`` (or ``--judge-backend``...): its help lists the registry's backends."""
    return Annotated[Optional[str], typer.Option(
        flag, help=f"{who}: {registry.backend_help()}" if who else registry.backend_help(), show_default=False)]


def model_option(who: str = "", flag: str = "--model") -> Any:
    text = "llamacpp: GGUF path; vllm: Hugging Face folder or id; openai: served model name"
    return Annotated[Optional[str], typer.Option(flag, help=f"{who}: {text}" if who else text, show_default=False)]


def base_url_option(who: str = "", flag: str = "--base-url") -> Any:
    text = "OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (repeat for a fleet)"
    return Annotated[Optional[list[str]], typer.Option(flag, help=f"{who}: {text}" if who else text,
                                                       show_default=False)]


BackendOpt = backend_option()
ModelOpt = model_option()
BaseUrlOpt = base_url_option()
CacheOpt = Annotated[Optional[str], typer.Option(
    "--cache", help="replay cache: use (read+write, default), refresh (write only) or off", show_default=False)]
CachePathOpt = Annotated[Optional[str], typer.Option(
    "--cache-path", help="replay-cache file (default ~/.cache/agora/llm.sqlite)", show_default=False)]
JobsOpt = Annotated[int, typer.Option(
    "--jobs", min=1, help="runs at once, each in its own process: for a fleet of servers (--base-url repeated) "
                          "or cores to spare; the runs are the same as one at a time")]


def quiet_option(prints: str) -> Any:
    """``--quiet``: no progress and no tables; the command prints only ``prints`` (for scripts)."""
    return Annotated[bool, typer.Option(help=f"no progress bar or tables; print only {prints}")]

CACHE_MODES = ("use", "refresh", "off")


def backend_choice(backend: str | None, model: str | None, base_url: list[str] | None, cache: str | None = None,
                   cache_path: str | None = None, prefix: str = "--") -> BackendChoice:
    """Command-line LLM options as overrides of a scenario's ``llm:`` block (run, resume, eval, rewards, ...).

    ``prefix`` is how the options are spelled (``--judge-`` for a judge's), so problems name them."""
    problems: list[Problem] = []
    if backend is not None:
        try:
            registry.lookup(backend, f"{prefix}backend")
        except InputError as exc:
            problems.extend(exc.problems)
    if cache is not None and cache not in CACHE_MODES:
        problems.append(Problem("--cache", f"expected use, refresh or off, got {cache!r}"))
    if problems:
        raise InputError(problems)
    return BackendChoice(backend=backend, model=model, base_urls=list(base_url or []), cache=cache,
                         cache_path=cache_path, option_prefix=prefix)
