"""`agora rewards`: co-evolution rewards from a run's interaction logs, and TRL training data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from simulation.cli import common
from simulation.cli.common import CacheOpt, user_errors
from simulation.errors import InputError, Problem

__all__ = ["rewards"]

_PEERS = "LLM that plays the critic and scorer agents (default: the run's)"
_JUDGE = "LLM for the judge (default: the agents' LLM, i.e. the run's)"
PeerBackendOpt = common.backend_option(_PEERS)
PeerModelOpt = common.model_option(_PEERS)
PeerBaseUrlOpt = common.base_url_option(_PEERS)
JudgeBackendOpt = common.backend_option(_JUDGE, "--judge-backend")
JudgeModelOpt = common.model_option(_JUDGE, "--judge-model")
JudgeBaseUrlOpt = common.base_url_option(_JUDGE, "--judge-base-url")
QuietOpt = common.quiet_option("the output folder")


@user_errors
def rewards(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory (holds run.db)",
                                            show_default=False)],
    judge_backend: JudgeBackendOpt = None,
    judge_model: JudgeModelOpt = None,
    judge_base_url: JudgeBaseUrlOpt = None,
    backend: PeerBackendOpt = None,
    model: PeerModelOpt = None,
    base_url: PeerBaseUrlOpt = None,
    peer_critique: Annotated[bool, typer.Option(
        help="CoMAS-style: the listener critiques each line and a third agent scores it")] = False,
    export: Annotated[Optional[Path], typer.Option(
        help="write training data (JSON Lines, per agent and for the town) into this folder")] = None,
    fmt: Annotated[str, typer.Option("--format", help="export format: trl")] = "trl",
    export_only: Annotated[bool, typer.Option(
        help="export the rewards already in run.db without judging again")] = False,
    sft_top: Annotated[float, typer.Option(min=0.01, max=1.0, help="SFT: share of each agent's best turns")] = 0.25,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of every judge and peer request")] = 0,
    limit: Annotated[Optional[int], typer.Option(min=1, help="judge only the first N turns")] = None,
    temperature: Annotated[float, typer.Option(min=0, max=2, help="critic and scorer sampling temperature")] = 0.7,
    judge_temperature: Annotated[float, typer.Option(min=0, max=2, help="judge's sampling temperature")] = 0.0,
    cache: CacheOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Judge every utterance and decided action of a run into a rewards table in run.db; optionally export
    TRL training data. Prints the export folder (or the run directory)."""
    from simulation.evaluation import targets as targets_mod
    from simulation.llm import factory, registry
    from simulation.rewards import engine, export as export_mod, store

    db_path = _run_db(run_dir)
    if fmt not in export_mod.FORMATS:
        raise InputError(Problem("--format", f"unknown format {fmt!r}; choose from "
                                             f"{', '.join(export_mod.FORMATS)}"))
    if export_only and export is None:
        raise InputError(Problem("--export-only", "needs --export DIR"))
    if export is not None and (export / "manifest.json").exists():
        raise InputError(Problem(str(export), "already holds an export (manifest.json); choose another --export"))
    if export_only:
        done = export_mod.export(db_path, export, fmt, sft_top)
        if not quiet:
            common.console.print(f"{sum(done.files.values())} rows in {len(done.files)} files", highlight=False)
        print(export)
        return
    agent_choice = common.backend_choice(backend, model, base_url, cache)
    judge_choice = common.backend_choice(judge_backend, judge_model, judge_base_url, cache, prefix="--judge-")
    found = targets_mod.resolve([db_path])
    personas = {t.agent_id: t.persona for t in found}
    base = found[0].llm or registry.default_settings()
    base_dir = found[0].llm_base or Path.cwd()
    agent_settings = agent_choice.apply(base)
    judge_settings = judge_choice.apply(agent_settings)
    facts = _run_facts(db_path)
    show = common.show_progress(quiet)
    if facts["status"] == "running" and not quiet:
        common.err.print("[yellow]note:[/] the run is still running; judging the ticks committed so far",
                         highlight=False)
    with common.status("loading model...", show):
        judge = factory.build_backend(judge_settings, base_dir)
        try:
            peers = None
            if peer_critique:
                peers = judge if agent_settings == judge_settings else factory.build_backend(agent_settings, base_dir)
        except BaseException:
            judge.close()
            raise
    options = engine.RewardOptions(seed=seed, peer_critique=peer_critique, judge_temperature=judge_temperature,
                                   temperature=temperature, limit=limit)
    bar = common.CallsBar("judging", show)
    try:
        with bar.live():
            result = engine.label(db_path, personas, judge, peers, options, on_progress=bar.on_llm,
                                  on_plan=bar.plan)
    finally:
        judge.close()
        if peers is not None and peers is not judge:
            peers.close()
    store.write(db_path, result)
    exported = export_mod.export(db_path, export, fmt, sft_top) if export is not None else None
    if not quiet:
        _show(result, {t.agent_id: t.persona.name for t in found}, facts["hours"], exported)
    print(export if export is not None else run_dir)


def _run_db(run_dir: Path) -> Path:
    """The run's run.db; a missing directory or one without run.db is bad input."""
    if not run_dir.exists():
        raise InputError(Problem(str(run_dir), "run directory not found"))
    if run_dir.is_file() and run_dir.suffix == ".db":
        return run_dir
    if not (run_dir / "run.db").is_file():
        raise InputError(Problem(str(run_dir), "not a run directory (no run.db inside)"))
    return run_dir / "run.db"


def _run_facts(db_path: Path) -> dict[str, Any]:
    """Status and game hours of the run (for the per-game-hour figures and a warning on a live run)."""
    from simulation.rewards.turns import connect_ro

    con = connect_ro(db_path)
    try:
        row = con.execute("select status, ticks_done, tick_minutes from runs limit 1").fetchone()
    finally:
        con.close()
    return {"status": row["status"], "hours": (row["ticks_done"] or 0) * (row["tick_minutes"] or 0) / 60}


def _show(result: Any, names: dict[str, str], hours: float, exported: Any) -> None:
    from collections import defaultdict

    from rich import box
    from rich.markup import escape
    from rich.table import Table

    console = common.console
    counts = result.counts()
    peer = result.options.peer_critique
    table = Table(title=f"Rewards · judge {escape(result.judge['model'])}", title_justify="left",
                  box=box.SIMPLE_HEAD)
    cols = ["agent", "usable", "reward", "total"]
    if peer:
        cols += ["speaker", "critic", "scorer"]
    if exported is not None:
        cols += ["SFT/KTO/DPO/GRPO"]
    for c in cols:
        table.add_column(c, justify="left" if c == "agent" else "right", no_wrap=c == "agent")
    earned: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in result.rows:
        earned[(r.agent_id, r.role)].append(r.reward)

    def mean(xs: list[float]) -> str:
        return f"{sum(xs) / len(xs):.2f}" if xs else "–"

    for agent in sorted(result.counts_by_agent):
        c = result.counts_by_agent[agent]
        actor = earned[(agent, "actor")]
        cells = [escape(names.get(agent, agent)), f"{c['usable']}/{c['turns']}", mean(actor), f"{sum(actor):.2f}"]
        if peer:
            cells += [mean(earned[(agent, role)]) for role in ("speaker", "critic", "scorer")]
        if exported is not None:
            rows = exported.per_agent.get(agent, {})
            cells.append("/".join(str(rows.get(k, 0)) for k in ("sft", "kto", "dpo", "grpo")))
        table.add_row(*cells)
    console.print(table)
    share = counts["usable"] / counts["turns"] if counts["turns"] else 0.0
    per_hour = f" ({counts['calls'] / hours:.1f} per game hour)" if hours else ""
    console.print(f"{counts['turns']} turns judged, a usable score for {counts['usable']} ({share:.0%}); "
                  f"{counts['dropped']} dropped as unparsable after a retry. {counts['calls']} LLM calls{per_hour}, "
                  f"{(counts['prompt_tokens'] + counts['completion_tokens']) / 1000:.1f}k tokens, "
                  f"{result.wall_s:.0f} s.", highlight=False)
    if peer:
        console.print(f"Peer critique: {counts['critiqued']} lines; unparsable scorer answers "
                      f"{counts['scorer_dropped']} (scorer -1), unparsable critiques {counts['critic_dropped']} "
                      "(critic -1); "
                      f"{counts['no_peers']} lines had no third agent to score them.", highlight=False)
    console.print(f"{counts['exportable']} of {counts['turns']} turns have the agent's own LLM answer behind them "
                  "(exportable).", highlight=False)
    if exported is not None:
        console.print(f"Export: {len(exported.files)} files in {escape(str(exported.out))}", highlight=False)
