"""The co-evolution loop: run a town, reward it, train the agents' model, run again on held-out seeds.

Round 0 measures the starting model on the held-out seeds. Each round k >= 1 then:

1. runs the scenario on the training seeds with the model of round k-1;
2. judges every turn of those runs (``rewards.engine.label``) with the judge, which is never the
   model being trained (the frozen base, or a model the caller names);
3. trains the model of round k from round k-1's weights on those runs (``trainer.train``);
4. runs the held-out seeds with the new model, and judges them too.

Every held-out run is scored by the behaviour benchmark's deterministic metrics and by the
judge's rubric items (the mean per dimension over its turns), so a round is compared with round
0 per metric and per dimension, with intervals over seeds. ``evolve.db`` keeps the lineage: which
runs trained which model, from which parent, and every number. Prosocial measures (invitations,
information passed on, ties) are reported beside the rewards, and a round that loses them while
its rewards rise is flagged: multi-agent training on LLMs tends to drift to self-interest.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.errors import InputError, Problem
from simulation.rundb.lineage import (DB_NAME, PROSOCIAL, LineageUnreadable, RoundResult, create, read, record,
                                      round_table)

if TYPE_CHECKING:
    from simulation.llm.backend import Backend
    from simulation.scenario import LoadedScenario
    from simulation.training.trainer import TrainOptions, TrainResult

__all__ = ["PROSOCIAL", "EvolveOptions", "RoundResult", "evolve", "round_table"]

@dataclass(frozen=True)
class EvolveOptions:
    rounds: int = 2
    seeds: tuple[int, ...] = (1, 2, 3)
    """Training runs of each round."""
    held_out: tuple[int, ...] = (101, 102, 103)
    """Seeds never trained on: every round's model is measured on them."""
    ticks: int | None = None
    reward_seed: int = 0

    def __post_init__(self) -> None:
        both = sorted(set(self.seeds) & set(self.held_out))
        if both:
            raise InputError(Problem("--held-out", f"seeds {both} are also training seeds: held-out seeds must be "
                                                   "new to every model"))


def _reward_dimensions(db: Path) -> dict[str, float]:
    """Mean of each rubric item, and of the reward, over a judged run's own turns; and of each
    measured dimension (``rewards.measured``) over its lines."""
    from simulation.rewards.measured import measured
    from simulation.rundb import connect_ro

    con = connect_ro(db)
    try:
        rows = con.execute("select scores, reward from rewards where role = 'actor'").fetchall()
        run = con.execute("select run_id from runs limit 1").fetchone()
        did = measured(con, run[0]) if run else {}
    finally:
        con.close()
    items: dict[str, list[float]] = {}
    rewards = []
    for scores, reward in rows:
        rewards.append(float(reward))
        for item, value in (json.loads(scores) if scores else {}).items():
            if isinstance(value, (int, float)):
                items.setdefault(item, []).append(float(value))
    out = {f"reward.{item}": statistics.fmean(v) for item, v in sorted(items.items())}
    if rewards:
        out["reward.mean"] = statistics.fmean(rewards)
    for name in ("informed", "tie"):
        values = [d[name] for d in did.values()]
        if values:
            out[f"reward.{name}"] = statistics.fmean(values)
    return out


def _judged(db: Path) -> bool:
    from simulation.rundb import connect_ro, table_names

    con = connect_ro(db)
    try:
        return "reward_passes" in table_names(con) and con.execute("select count(*) from reward_passes").fetchone()[0] > 0
    finally:
        con.close()


def _judge(run_dirs: list[Path], judge: Backend, seed: int) -> None:
    from simulation.evaluation import targets
    from simulation.rewards import engine, store

    for run_dir in run_dirs:
        db = run_dir / "run.db"
        if _judged(db):
            continue  # a resumed loop: judged before the interruption (a pass is written whole)
        personas = {t.agent_id: t.persona for t in targets.resolve([run_dir])}
        store.write(db, engine.label(db, personas, judge, None, engine.RewardOptions(seed=seed)))


def _runs(loaded: LoadedScenario, seeds: Sequence[int], out: Path, ticks: int | None, agents: Any) -> Any:
    """The scenario once per seed (``run_benchmark``: resumable, behaviour metrics read back);
    ``agents`` is a ``BackendChoice`` or a backend object."""
    from simulation.benchmark.behaviour import run_benchmark
    from simulation.llm.factory import BackendChoice

    how = {"llm": agents} if isinstance(agents, BackendChoice) else {"backend": agents}
    return run_benchmark(loaded, seeds, out, ticks=ticks, **how)


def evolve(loaded: LoadedScenario, out: Path, options: EvolveOptions, train_options: TrainOptions, *,
           base: str, judge: Backend, agents_for: Callable[[str], Any], cache: Path,
           on_stage: Callable[[str], None] | None = None) -> list[RoundResult]:
    """Run the loop into ``out`` (``round-K/`` folders and ``evolve.db``). ``agents_for(model)``
    gives the agents' LLM for a model path (a ``BackendChoice`` or a backend object); ``judge``
    judges every run."""
    from simulation.training.base import resolve_base
    from simulation.training.trainer import train

    say = on_stage or (lambda _: None)
    out = out.resolve()  # evolve.db names runs and models by absolute path, readable from anywhere
    hf, template, label = resolve_base(base, cache)
    model = str(template) if template is not None else str(hf)
    results = _recorded(out, options, label)
    if results:
        say(f"resuming after round {results[-1].round} (recorded in {out / DB_NAME})")
        if results[-1].round > 0:
            model, hf = results[-1].model, out / f"round-{results[-1].round}" / "model" / "hf"
    out.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(out / DB_NAME)
    create(db)
    try:
        if not results:
            say("round 0: the starting model on the held-out seeds")
            results.append(_held_out(loaded, out / "round-0", options, judge, agents_for(model), 0, label, None))
            record(db, results[-1])
        for k in range(len(results), options.rounds + 1):
            say(f"round {k}: training runs")
            trained_on = _runs(loaded, options.seeds, out / f"round-{k}" / "train", options.ticks, agents_for(model))
            dirs = [r.run_dir for r in trained_on.runs]
            say(f"round {k}: judging {len(dirs)} run(s)")
            _judge(dirs, judge, options.reward_seed)
            say(f"round {k}: training")
            made = _trained(out / f"round-{k}" / "model") or train(
                dirs, hf, out / f"round-{k}" / "model", train_options, template_gguf=template,
                base_label=f"{label} round {k}")
            parent, hf = model, made.hf_dir
            model = str(made.gguf) if made.gguf is not None else str(made.hf_dir)
            say(f"round {k}: held-out runs")
            result = _held_out(loaded, out / f"round-{k}", options, judge, agents_for(model), k, model, parent)
            result.trained_on = [str(d) for d in dirs]
            results.append(result)
            record(db, result)
    finally:
        db.close()
    return results


def _recorded(out: Path, options: EvolveOptions, label: str) -> list[RoundResult]:
    """The rounds an interrupted loop in ``out`` recorded (empty for a new ``out``); a finished
    loop, or one started from another model, is refused."""
    if not (out / DB_NAME).exists():
        return []
    try:
        done = read(out)
    except LineageUnreadable as exc:
        raise InputError(Problem(str(out / DB_NAME), str(exc))) from None
    if len(done) > options.rounds:
        raise InputError(Problem(str(out), f"already holds a finished evolve run ({len(done) - 1} round(s) in "
                                           f"{DB_NAME}); choose another --out"))
    if done and done[0].model != label:
        raise InputError(Problem(str(out), f"holds an evolve run started from {done[0].model}, not {label}; "
                                           "choose another --out"))
    return done


def _trained(folder: Path) -> TrainResult | None:
    """A round's model that training finished before the loop was interrupted (``train.json`` is
    written last), so a resumed loop does not train it again."""
    from simulation.training.trainer import TrainResult

    if not (folder / "train.json").is_file():
        return None
    manifest = json.loads((folder / "train.json").read_text(encoding="utf-8"))
    gguf = manifest.get("outputs", {}).get("gguf")
    return TrainResult(out=folder, hf_dir=folder / "hf", gguf=folder / gguf if gguf else None,
                       rows=manifest.get("rows", 0), skipped_long=manifest.get("skipped_long", 0),
                       steps=manifest.get("steps", 0))


def _held_out(loaded: LoadedScenario, out: Path, options: EvolveOptions, judge: Backend, agents: Any, k: int,
              model: str, parent: str | None) -> RoundResult:
    runs = _runs(loaded, options.held_out, out / "held-out", options.ticks, agents)
    dirs = [r.run_dir for r in runs.runs]
    _judge(dirs, judge, options.reward_seed)
    result = RoundResult(k, model, parent, held_out_runs=[str(d) for d in dirs])
    per_seed = [{**r.metrics, **_reward_dimensions(r.run_dir / "run.db")} for r in runs.runs]
    names = sorted({name for m in per_seed for name in m})
    result.metrics = {name: [m.get(name) for m in per_seed] for name in names}
    return result


def write_report(results: list[RoundResult], out: Path, command: str, judge_model: str) -> Path:
    """``report.md`` (the per-round table, what moved, prosocial trades) and ``rounds.png``."""
    from simulation.rundb.intervals import format_value

    rows = round_table(results)
    lines = [f"# Co-evolution: {len(results) - 1} round(s)", "", f"Made by: `{command}`", "",
             f"Judge (never the trained model): `{judge_model}`. Each round's model is measured on the same "
             f"held-out seeds; mean [95 % interval] over them. *moved*: the last round's interval wholly "
             "above or below round 0's.", "",
             "| round | model | parent | trained on |", "|---:|---|---|---:|"]
    for r in results:
        lines.append(f"| {r.round} | `{r.model}` | {f'`{r.parent}`' if r.parent else '–'} | {len(r.trained_on)} run(s) |")
    lines += ["", "| metric | " + " | ".join(f"round {r.round}" for r in results) + " | change | moved |",
              "|---|" + "---:|" * len(results) + "---:|---|"]
    for row in rows:
        cells = [f"{format_value(e.mean)} [{format_value(e.low)}–{format_value(e.high)}]" if e.mean is not None
                 else "–" for e in row["rounds"]]
        flag = " **traded away**" if row["traded"] else ""
        name = f"`{row['metric']}`" + (" (prosocial)" if row["prosocial"] else "")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {format_value(row['change'])} | {row['moved']}{flag} |")
    traded = [r["metric"] for r in rows if r["traded"]]
    lines += ["", ("**Prosocial measures that fell while the reward rose:** " + ", ".join(f"`{t}`" for t in traded))
              if traded else "No prosocial measure fell while the reward rose.", "", "![rounds](rounds.png)", ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    _plot(rows, len(results), out / "rounds.png")
    return out / "report.md"


def _plot(rows: list[dict[str, Any]], rounds: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r["metric"].startswith("reward.") or r["prosocial"]]
    cols = 4
    n = max(1, len(shown))
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(3.2 * cols, 2.4 * ((n + cols - 1) // cols)),
                             squeeze=False)
    for ax, row in zip(axes.flat, shown):
        xs = [i for i, e in enumerate(row["rounds"]) if e.mean is not None]
        means = [row["rounds"][i].mean for i in xs]
        lows = [row["rounds"][i].low if row["rounds"][i].low is not None else row["rounds"][i].mean for i in xs]
        highs = [row["rounds"][i].high if row["rounds"][i].high is not None else row["rounds"][i].mean for i in xs]
        ax.plot(xs, means, marker="o")
        ax.fill_between(xs, lows, highs, alpha=0.2)
        ax.set_title(row["metric"], fontsize=8)
        ax.set_xticks(range(rounds))
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
