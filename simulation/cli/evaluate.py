"""`agora eval`: persona fidelity of agents (Big Five self-report, interviews, PersonaGym, consistency)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from simulation.cli import common
from simulation.cli.common import CacheOpt, user_errors
from simulation.errors import InputError, Problem

__all__ = ["eval_"]

_AGENTS = "LLM for the agents"
_JUDGE = "LLM for the judge (default: the agents' LLM)"
AgentBackendOpt = common.backend_option(_AGENTS)
AgentModelOpt = common.model_option(_AGENTS)
AgentBaseUrlOpt = common.base_url_option(_AGENTS)
JudgeBackendOpt = common.backend_option(_JUDGE, "--judge-backend")
JudgeModelOpt = common.model_option(_JUDGE, "--judge-model")
JudgeBaseUrlOpt = common.base_url_option(_JUDGE, "--judge-base-url")
QuietOpt = common.quiet_option("the output folder")


@user_errors
def eval_(
    targets: Annotated[list[Path], typer.Argument(
        metavar="TARGET...", help="persona files, scenarios (every person in them) or run directories",
        show_default=False)],
    suite: Annotated[str, typer.Option(
        help="comma-separated: bigfive, forcedchoice, interview, personagym, consistency, backtest, believability, "
        "customisation")] = "bigfive",
    backend: AgentBackendOpt = None,
    model: AgentModelOpt = None,
    base_url: AgentBaseUrlOpt = None,
    judge_backend: JudgeBackendOpt = None,
    judge_model: JudgeModelOpt = None,
    judge_base_url: JudgeBaseUrlOpt = None,
    out: Annotated[Optional[Path], typer.Option(help="output folder (default: evals/EVAL_ID)")] = None,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of every request and bootstrap")] = 0,
    items: Annotated[Optional[int], typer.Option(
        min=1, max=50, help="bigfive: IPIP items per agent (default all 50)")] = None,
    calibrate: Annotated[bool, typer.Option(
        "--calibrate/--no-calibrate", help="bigfive, forcedchoice: divide each item's answer by the item's "
        "content-free answer (persona blanked), as the town's choices are; backtest, customisation: each "
        "judgement by the judge's answer with the lines blanked")] = True,
    settings: Annotated[int, typer.Option(min=1, max=20, help="personagym: settings per agent")] = 2,
    questions: Annotated[int, typer.Option(min=1, max=10, help="personagym: questions per task and setting")] = 1,
    max_items: Annotated[int, typer.Option(
        min=1, max=1000, help="consistency: behaviour items judged per agent")] = 12,
    bootstrap: Annotated[int, typer.Option(min=100, max=100000, help="bootstrap resamples for intervals")] = 1000,
    temperature: Annotated[float, typer.Option(min=0, max=2, help="agents' sampling temperature")] = 0.7,
    judge_temperature: Annotated[float, typer.Option(min=0, max=2, help="judge's sampling temperature")] = 0.0,
    cache: CacheOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Evaluate persona fidelity; writes eval.db, results.json/.csv, report.md and plots into --out."""
    from simulation.evaluation import engine, models, report
    from simulation.evaluation import targets as targets_mod
    from simulation.evaluation.session import EvalOptions
    from simulation.llm import factory

    suites = engine.parse_suites(suite)
    if out is not None and (out / "eval.db").exists():
        raise InputError(Problem(str(out), "already holds an evaluation (eval.db); choose another --out"))
    agent_choice = common.backend_choice(backend, model, base_url, cache)
    judge_choice = common.backend_choice(judge_backend, judge_model, judge_base_url, cache, prefix="--judge-")
    found = targets_mod.resolve(list(targets))
    # Which model and why, said out loud: never a silent fall back to the bundled model.
    agent_model = models.agent_model(found, agent_choice)
    judge_model_ = models.judge_model(agent_model, judge_choice)
    agent_settings, judge_settings = agent_model.settings, judge_model_.settings
    options = EvalOptions(suites=suites, seed=seed, items=items, calibrate=calibrate, settings=settings,
                          questions=questions,
                          max_items=max_items, bootstrap=bootstrap, temperature=temperature,
                          judge_temperature=judge_temperature)
    show = common.show_progress(quiet)
    if not quiet:
        common.console.print(f"Agents' model: {escape(models.describe(agent_settings))} "
                             f"({escape(agent_model.why)})", highlight=False, soft_wrap=True)
        common.console.print(f"Judge's model: {escape(models.describe(judge_settings))} "
                             f"({escape(judge_model_.why)})", highlight=False, soft_wrap=True)
    with common.status("loading model...", show):
        agent = factory.build_backend(agent_settings, agent_model.base_dir)
        try:
            judge = agent if judge_settings == agent_settings else factory.build_backend(judge_settings,
                                                                                          judge_model_.base_dir)
        except BaseException:
            agent.close()
            raise
    bar = common.CallsBar("evaluating", show)
    try:
        with bar.live():
            result = engine.evaluate(found, agent, judge, options, on_progress=bar.on_llm, on_plan=bar.plan,
                                     model_notes={"agent": agent_model.why, "judge": judge_model_.why})
    finally:
        agent.close()
        if judge is not agent:
            judge.close()
    folder = out or Path("evals") / result.eval_id
    report.write(result, folder)
    if not quiet:
        _show(result, folder)
    print(folder)


def _show(result: Any, out: Path) -> None:
    from simulation.evaluation.ipip import FACTORS
    from simulation.evaluation.report import Lookup, agreement_text, kappa_cell

    console = common.console
    look = Lookup(result.metrics)
    table = Table(title=f"Persona fidelity · {result.agent['model']} (judge {result.judge['model']})",
                  title_justify="left")
    cols = [("agent", None)]
    if "bigfive" in result.suites:
        cols += [("IPIP MAE", ("bigfive", "mae")), ("IPIP agree", ("bigfive", "agreement")),
                 ("IPIP constant guess", ("bigfive", "agreement_baseline"))]
    if "forcedchoice" in result.suites:
        cols += [("forced-choice MAE", ("forcedchoice", "mae")), ("forced-choice agree", ("forcedchoice", "agreement")),
                 ("forced-choice constant guess", ("forcedchoice", "agreement_baseline"))]
    if "interview" in result.suites:
        cols += [("interview MAE", ("interview", "mae")), ("interview agree", ("interview", "agreement")),
                 ("interview constant guess", ("interview", "agreement_baseline"))]
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
    table.add_row("[bold]all agents[/]", *(cell(look.value(s, m)) if m == "agreement_baseline"
                                           else _ci_text(look.get(s, m)) for _, (s, m) in cols[1:]))
    if len(cols) > 1:  # the back-test alone has no per-agent columns
        console.print(table)
    for suite, label in (("bigfive", "IPIP"), ("forcedchoice", "Forced choice"), ("interview", "Interview")):
        if suite not in result.suites:
            continue
        factors = Table(title=f"{label} high/low agreement per factor, beside the constant guess (always the side "
                              "most targets are on) and Cohen's kappa; agreement not above its constant guess shows "
                              "nothing", title_justify="left")
        for name in ("factor", "agreement", "constant guess", "kappa"):
            factors.add_column(name, justify="left" if name == "factor" else "right")
        for f in FACTORS:
            factors.add_row(f, _ci_text(look.get(suite, f"agreement_{f}")),
                            cell(look.value(suite, f"agreement_baseline_{f}")),
                            escape(kappa_cell(look.get(suite, f"kappa_{f}"))))
        factors.add_row("[bold]all factors[/]", _ci_text(look.get(suite, "agreement")),
                        cell(look.value(suite, "agreement_baseline")), escape(kappa_cell(look.get(suite, "kappa"))))
        console.print(factors)
        console.print(f"{label}: high/low {escape(agreement_text(look, suite))}", highlight=False)
    if "backtest" in result.suites:
        bt = Table(title="Back-test: the persona's side of 0.5 named by a judge who reads only the person's lines "
                         "(Wilson 95 % intervals), beside the constant guess", title_justify="left")
        for name in ("factor", "success", "written low", "written high", "constant guess"):
            bt.add_column(name, justify="left" if name == "factor" else "right")
        for f in (*FACTORS, None):
            key = f"success_{f}" if f else "success"
            bt.add_row(f or "[bold]all factors[/]", _ci_text(look.get("backtest", key)),
                       _ci_text(look.get("backtest", f"{key}_low")) if f else "",
                       _ci_text(look.get("backtest", f"{key}_high")) if f else "",
                       cell((look.get("backtest", key).details.get("constant_guess")
                             if look.get("backtest", key) else None)))
        console.print(bt)
    if "customisation" in result.suites:
        cu = Table(title="Customisation: the person's own aspiration and skills picked out of four by a judge who "
                         "reads only their lines (Wilson 95 % intervals; chance 0.25)", title_justify="left")
        for name in ("question", "success", "raw answers", "p(own option)"):
            cu.add_column(name, justify="left" if name == "question" else "right")
        for q in ("aspiration", "skills", None):
            key = f"success_{q}" if q else "success"
            cu.add_row(q or "[bold]both[/]", _ci_text(look.get("customisation", key)),
                       _ci_text(look.get("customisation", f"uncalibrated_{key}")),
                       cell(look.value("customisation", f"p_own_{q}")) if q else "")
        console.print(cu)
    if "believability" in result.suites:
        asked = look.get("believability", "failed")
        console.print(f"Believability interview: {len(result.suites['believability'])} agent(s), "
                      f"{asked.details.get('asked', 0) if asked else 0} answers asked, "
                      f"{asked.value if asked and asked.value is not None else 0:.0f} failed; the answers are in results.json and "
                      "report.md",
                      highlight=False)
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


@user_errors
def rank(
    conditions: Annotated[list[str], typer.Argument(
        metavar="LABEL=EVAL_DIR...", help="each condition's `agora eval --suite believability` output folder, "
        "labelled (e.g. full=evals/full no_reflection=evals/noref)", show_default=False)],
    judge_backend: JudgeBackendOpt = None,
    judge_model: JudgeModelOpt = None,
    judge_base_url: JudgeBaseUrlOpt = None,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("ranking"),
    per_category: Annotated[Optional[int], typer.Option(
        min=1, max=5, help="questions per category to compare (default all five)")] = None,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of every request and bootstrap")] = 0,
    bootstrap: Annotated[int, typer.Option(min=0, max=100000, help="bootstrap resamples of agents")] = 1000,
    cache: CacheOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Rank conditions by their agents' believability interview answers: a judge compares each pair
    of answers (both orders), Bradley–Terry strengths with bootstrap intervals (Generative Agents 6.2)."""
    import sys

    from simulation.evaluation import models, ranking
    from simulation.llm import factory
    from simulation.scenario import LLMSettings

    parsed = []
    for spec in conditions:
        label, sep, folder = spec.partition("=")
        if not sep or not label.strip() or not folder.strip():
            raise InputError(Problem("CONDITION", f"{spec!r}: expected LABEL=EVAL_DIR, e.g. full=evals/full"))
        parsed.append(ranking.read_condition(label.strip(), Path(folder.strip())))
    if len(parsed) < 2:
        raise InputError(Problem("CONDITION", "ranking needs at least two conditions (LABEL=EVAL_DIR each)"))
    if len({c.label for c in parsed}) != len(parsed):
        raise InputError(Problem("CONDITION", "two conditions share a label"))
    choice = common.backend_choice(judge_backend, judge_model, judge_base_url, cache, prefix="--judge-")
    settings = choice.apply(LLMSettings(backend="llamacpp"))
    judge_text = models.describe(settings)
    show = common.show_progress(quiet)
    if not quiet:
        common.console.print(f"Judge's model: {escape(judge_text)}" + (
            "" if judge_backend or judge_model else " (no --judge-model given: the bundled 135M model, which "
            "cannot read a rubric; name a capable judge)"), highlight=False)
    with common.status("loading model...", show):
        judge = factory.build_backend(settings, Path.cwd())
    try:
        result = ranking.rank(parsed, judge, per_category=per_category, seed=seed, bootstrap=bootstrap)
    finally:
        judge.close()
    ranking.write(result, out, judge_text, "agora rank " + " ".join(sys.argv[2:]))
    if not quiet:
        table = Table(title="Believability: Bradley–Terry log-strength (95 % bootstrap interval over agents)",
                      title_justify="left")
        for name in ("condition", "log-strength", "interval", "first"):
            table.add_column(name, justify="left" if name == "condition" else "right")
        for i in sorted(range(len(result.labels)), key=lambda i: -result.strength[i]):
            table.add_row(escape(result.labels[i]), f"{result.strength[i]:+.2f}",
                          f"[{result.low[i]:+.2f}, {result.high[i]:+.2f}]", f"{result.first_share[i]:.2f}")
        common.console.print(table)
        common.console.print(f"{len(result.comparisons)} comparisons of {len(result.agents)} agents; "
                             f"{len(result.calls)} judge calls. Report: {out / 'report.md'}", highlight=False)
    print(out)

