"""`agora eval` and `agora personas`: persona fidelity and population sampling (issue 6)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

personas_app = typer.Typer(name="personas", help="The persona library and sampled populations.",
                           no_args_is_help=True)

_LLM_HELP = "LLM for the agents"
_JUDGE_HELP = "LLM for the judge (default: the agents' LLM)"


def make_backend(settings: Any, base_dir: Path) -> Any:
    """The backend for ``settings`` (one place to swap in a test double)."""
    from simulation.llm.factory import build_backend

    return build_backend(settings, base_dir)


def _choice(backend: str | None, model: str | None, base_urls: list[str] | None, cache: str | None = None) -> Any:
    from simulation.llm.factory import BackendChoice
    from simulation.scenario import resolve_path

    if model is not None and resolve_path(model, Path.cwd()).is_file():
        model = str(resolve_path(model, Path.cwd()))  # a GGUF path given on the command line is relative to here
    return BackendChoice(backend=backend, model=model, base_urls=list(base_urls or []), cache=cache)


def _progress(err: Any, enabled: bool, what: str) -> Any:
    """A rich progress bar of LLM calls (completions, including retries) with token counts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    class Bar:
        def __init__(self) -> None:
            self.done = 0
            self.tokens = 0
            self.progress = Progress(TextColumn(f"[bold]{what}"), MofNCompleteColumn(), BarColumn(),
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

        def live(self) -> Any:
            return self.progress if self.progress else nullcontext()

    return Bar()


def _show(console: Any, result: Any, out: Path) -> None:
    from rich.markup import escape
    from rich.table import Table

    from simulation.evaluation.report import Lookup

    look = Lookup(result.metrics)
    table = Table(title=f"Persona fidelity · {result.agent['model']} (judge {result.judge['model']})",
                  title_justify="left")
    cols = [("agent", None)]
    if "bigfive" in result.suites:
        cols += [("IPIP MAE", ("bigfive", "mae")), ("IPIP agree", ("bigfive", "agreement"))]
    if "interview" in result.suites:
        cols += [("interview MAE", ("interview", "mae")), ("interview agree", ("interview", "agreement"))]
    if "personagym" in result.suites:
        cols += [("PersonaScore 1-5", ("personagym", "persona_score"))]
    if "consistency" in result.suites:
        cols += [("consistency 0-9", ("consistency", "mean"))]
    for name, _ in cols:
        table.add_column(name, justify="left" if name == "agent" else "right")

    def cell(v: float | None) -> str:
        return "–" if v is None else f"{v:.2f}"

    for t in result.targets:
        table.add_row(escape(t.persona.name), *(cell(look.value(s, m, t.key)) if t.key in result.suites.get(s, [])
                                                 else "" for _, (s, m) in cols[1:]))
    table.add_row("[bold]all agents[/]", *(_ci_text(look.get(s, m)) for _, (s, m) in cols[1:]))
    console.print(table)
    for suite, why in result.skipped.items():
        console.print(f"[yellow]{suite} skipped:[/] {escape(why)}")
    dropped = [(s, look.value(s, "dropped_judgements")) for s in ("interview", "personagym", "consistency")
               if s in result.suites]
    if dropped:
        counts = ", ".join(f"{s} {v:.0f}" for s, v in dropped if v is not None)
        console.print(f"Unparsable judgements dropped: {counts}")
    cost = result.cost()
    console.print(f"{len(result.calls)} LLM calls in {result.wall_s:.0f} s; LLM seconds per agent: "
                  + ", ".join(f"{s} {c['llm_s_per_agent']:.0f}" for s, c in cost.items()), highlight=False)
    console.print(f"Report: {escape(str(out / 'report.md'))}", highlight=False)


def _ci_text(m: Any) -> str:
    if m is None or m.value is None:
        return "–"
    lo, hi = m.details.get("ci_low"), m.details.get("ci_high")
    return f"{m.value:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else "")


def register(app: typer.Typer) -> None:
    """Add the evaluation and persona commands to ``app``."""
    from simulation.cli import user_errors

    @app.command("eval")
    @user_errors
    def eval_(
        targets: Annotated[list[Path], typer.Argument(
            metavar="TARGET...", help="persona files, scenarios (every person in them) or run directories",
            show_default=False)],
        suite: Annotated[str, typer.Option(
            help="comma-separated: bigfive, interview, personagym, consistency")] = "bigfive",
        backend: Annotated[Optional[str], typer.Option(help=f"{_LLM_HELP}: llamacpp, vllm or openai")] = None,
        model: Annotated[Optional[str], typer.Option(help=f"{_LLM_HELP}: GGUF path or model name")] = None,
        base_url: Annotated[Optional[list[str]], typer.Option(
            help=f"{_LLM_HELP}: OpenAI-compatible server URL")] = None,
        judge_backend: Annotated[Optional[str], typer.Option(help=_JUDGE_HELP)] = None,
        judge_model: Annotated[Optional[str], typer.Option(help=_JUDGE_HELP)] = None,
        judge_base_url: Annotated[Optional[list[str]], typer.Option(help=_JUDGE_HELP)] = None,
        out: Annotated[Optional[Path], typer.Option(help="output folder (default: evals/EVAL_ID)")] = None,
        seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of every request and bootstrap")] = 0,
        items: Annotated[Optional[int], typer.Option(
            min=1, max=50, help="bigfive: IPIP items per agent (default all 50)")] = None,
        settings: Annotated[int, typer.Option(min=1, max=20, help="personagym: settings per agent")] = 2,
        questions: Annotated[int, typer.Option(min=1, max=10, help="personagym: questions per task and setting")] = 1,
        max_items: Annotated[int, typer.Option(
            min=1, max=1000, help="consistency: behaviour items judged per agent")] = 12,
        bootstrap: Annotated[int, typer.Option(min=100, max=100000, help="bootstrap resamples for intervals")] = 1000,
        temperature: Annotated[float, typer.Option(min=0, max=2, help="agents' sampling temperature")] = 0.7,
        judge_temperature: Annotated[float, typer.Option(min=0, max=2, help="judge's sampling temperature")] = 0.0,
        cache: Annotated[Optional[str], typer.Option(help="replay cache: use, refresh or off")] = None,
        quiet: Annotated[bool, typer.Option(help="no progress bar or tables; print only the output folder")] = False,
    ) -> None:
        """Evaluate persona fidelity; writes eval.db, results.json/.csv, report.md and plots into --out."""
        import os

        from simulation.cli import console, err
        from simulation.errors import InputError, Problem
        from simulation.evaluation import engine, report
        from simulation.evaluation import targets as targets_mod
        from simulation.evaluation.session import EvalOptions
        from simulation.scenario import LLMSettings

        suites = engine.parse_suites(suite)
        if out is not None and (out / "eval.db").exists():
            raise InputError(Problem(str(out), "already holds an evaluation (eval.db); choose another --out"))
        found = targets_mod.resolve(list(targets))
        first = next((t for t in found if t.llm is not None), None)
        base = first.llm if first and first.llm else LLMSettings()
        base_dir = first.llm_base if first and first.llm_base else Path.cwd()
        agent_settings = _choice(backend, model, base_url, cache).apply(base)
        judge_settings = _choice(judge_backend, judge_model, judge_base_url, cache).apply(agent_settings)
        options = EvalOptions(suites=suites, seed=seed, items=items, settings=settings, questions=questions,
                              max_items=max_items, bootstrap=bootstrap, temperature=temperature,
                              judge_temperature=judge_temperature)
        show = not quiet and (err.is_terminal or os.environ.get("AGORA_PROGRESS") == "1")
        with err.status("loading model...", spinner="dots") if show else nullcontext():
            agent = make_backend(agent_settings, base_dir)
            try:
                judge = agent if judge_settings == agent_settings else make_backend(judge_settings, base_dir)
            except BaseException:
                agent.close()
                raise
        bar = _progress(err, show, "evaluating")
        try:
            with bar.live():
                result = engine.evaluate(found, agent, judge, options, on_progress=bar.on_llm, on_plan=bar.plan)
        finally:
            agent.close()
            if judge is not agent:
                judge.close()
        folder = out or Path("evals") / result.eval_id
        report.write(result, folder)
        if not quiet:
            _show(console, result, folder)
        print(folder)

    @personas_app.command("sample")
    @user_errors
    def sample_(
        spec: Annotated[Path, typer.Option(
            help="population spec YAML (personas/populations/*.yaml)", show_default=False)],
        n: Annotated[int, typer.Option(min=1, max=10000, help="how many people", show_default=False)],
        out: Annotated[Path, typer.Option(help="folder for the persona files", show_default=False)],
        seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="sampling seed")] = 0,
        backstories: Annotated[bool, typer.Option(help="ask the LLM for a short backstory per person")] = False,
        backend: Annotated[Optional[str], typer.Option(help="LLM for backstories: llamacpp, vllm or openai")] = None,
        model: Annotated[Optional[str], typer.Option(help="LLM for backstories: GGUF path or model name")] = None,
        base_url: Annotated[Optional[list[str]], typer.Option(help="LLM for backstories: server URL")] = None,
        quiet: Annotated[bool, typer.Option(help="no table; print only the output folder")] = False,
    ) -> None:
        """Sample N people from a population spec into persona files (deterministic given --seed)."""
        import os

        from rich.markup import escape
        from rich.table import Table

        from simulation import population as pop
        from simulation.cli import console, err
        from simulation.errors import InputError, Problem, RunError
        from simulation.scenario import LLMSettings, load_persona

        population = pop.load_spec(spec)
        try:
            people = pop.sample(population, n, seed)
        except pop.TooFewNames as exc:
            raise InputError(Problem("--n", str(exc))) from None
        files = [out / f"{s.persona.id}.yaml" for s in people] + [out / "population.json", out / "marginals.html"]
        if backstories:
            files.append(out / "backstory_calls.jsonl")
        clash = [f for f in files if f.exists()]
        if clash:
            raise InputError(Problem(str(clash[0]), f"already exists ({len(clash)} file(s) would be overwritten); "
                                                     "choose an empty --out"))
        failed = 0
        calls: list[dict[str, Any]] = []
        if backstories:
            settings = _choice(backend, model, base_url).apply(LLMSettings())
            show = not quiet and (err.is_terminal or os.environ.get("AGORA_PROGRESS") == "1")
            with err.status("loading model...", spinner="dots") if show else nullcontext():
                llm = make_backend(settings, Path.cwd())
            bar = _progress(err, show, "backstories")
            bar.plan(len(people))

            def record(rec: Any) -> int:
                calls.append(rec.model_dump(mode="json"))
                return len(calls)

            try:
                with bar.live():
                    failed = pop.add_backstories(people, llm, seed, on_progress=bar.on_llm, on_call=record)
            finally:
                llm.close()
        try:
            pop.write_sample(out, spec, population, people, seed, failed, calls if backstories else None)
        except OSError as exc:
            raise InputError(Problem(str(out), f"cannot write: {exc.strerror or exc}")) from None
        for path in files[: len(people)]:  # what we wrote must load back: a failure here is a bug, not bad input
            try:
                load_persona(path)
            except InputError as exc:
                raise RunError(f"sampled persona does not validate: {exc}") from None
        if not quiet:
            table = Table(title=f"{len(people)} people from {escape(population.name)} (seed {seed})",
                          title_justify="left")
            for col in ("id", "age", "occupation", "household", "O", "C", "E", "A", "N"):
                left = col in ("id", "occupation", "household")
                table.add_column(col, overflow="fold", justify="left" if left else "right")
            for s in people[:40]:
                b = s.persona.big_five
                table.add_row(s.persona.id, str(s.persona.age), escape(s.persona.occupation),
                              escape(s.persona.household),
                              *(f"{getattr(b, f):.2f}" for f in pop.FACTORS))
            console.print(table)
            if len(people) > 40:
                console.print(f"... and {len(people) - 40} more (see population.json)")
            if backstories:
                console.print(f"backstories: {len(people) - failed} written, {failed} left empty (unusable answers)")
            console.print(f"marginals: {escape(str(out / 'marginals.html'))}", highlight=False)
        print(out)

    app.add_typer(personas_app, name="personas")
