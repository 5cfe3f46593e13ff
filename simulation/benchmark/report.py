"""The behaviour benchmark's report: report.md, behaviour.json, audit CSVs and plots.

What a reader needs to trust a number is beside it: how many distinct trajectories the seeds
produced and how many distinct values each metric took; the no-LLM control's value (the
engine's script alone, ``simulation.llm.control``) and the LLM's margin over it, paired by seed;
which parts of cognition failed (a purpose whose questions fell back to the safe default half the
time or more is flagged at the top); and the rows every share counts (``benchmark.audit``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulation.benchmark.audit import write_audit
from simulation.benchmark.behaviour import BenchmarkResult
from simulation.rundb.behaviour import FAILING, failing_purposes
from simulation.rundb.intervals import Estimate, cell, format_value, paired, verdict_of

__all__ = ["HEADLINE", "failing", "write_report"]

HEADLINE = [
    "talk.conversations", "talk.example_share", "talk.name_errors", "talk.garbled_share", "talk.encounters_per_agent_hour",
    "talk.two_line_share",
    "llm.fallback_share", "memory.insights", "relationships.density_end",
]
"""Metrics drawn in the summary plot (the per-fact ones are added per scenario)."""
VERDICTS = ("right", "partial", "mixed", "wrong", "missed", "honest", "invented", "failed")


def failing(result: BenchmarkResult) -> list[tuple[str, float]]:
    """Purposes whose fallback share, averaged over the seeds, is ``FAILING`` or more."""
    table = result.table()
    return failing_purposes({k: e.mean for k, e in table.items()})


def _summary(result: BenchmarkResult) -> dict[str, Any]:
    return {k: {**vars(e), "distinct": result.distinct(k)} for k, e in result.table().items()}


def _runs(result: BenchmarkResult) -> list[dict[str, Any]]:
    return [{"seed": r.seed, "run_dir": str(r.run_dir), "run_id": r.run_id, "wall_s": round(r.wall_s, 1),
             "trajectory": r.trajectory, "metrics": r.metrics, "verdicts": r.verdicts,
             "awareness": {f: [c[2] for c in curve] for f, curve in r.curves.items()}} for r in result.runs]


def margins(result: BenchmarkResult, control: BenchmarkResult) -> dict[str, Estimate]:
    """metric -> the LLM's value minus the control's, paired by seed (same seeds on both sides)."""
    by_seed = {r.seed: r for r in control.runs}
    out = {}
    for name in result.metric_names():
        mine = [r.metrics.get(name) for r in result.runs]
        theirs = [by_seed[r.seed].metrics.get(name) if r.seed in by_seed else None for r in result.runs]
        out[name] = paired(theirs, mine)
    return out


def _document(result: BenchmarkResult, control: BenchmarkResult | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "scenario": result.scenario, "seeds": result.seeds, "ticks": result.ticks, "backend": result.backend,
        "model": result.model, "command": result.command, "engine": result.engine,
        "scenario_sha256": result.scenario_sha256, "scored_by": result.scored_by or result.engine, "cpu": result.cpu,
        "trajectories": result.trajectories,
        "failing": [[p, v] for p, v in failing(result)], "summary": _summary(result), "runs": _runs(result),
    }
    if control is not None:
        doc["control"] = {"backend": control.backend, "model": control.model, "trajectories": control.trajectories,
                          "summary": _summary(control), "runs": _runs(control)}
        doc["margin"] = {k: {**vars(e), "moved": verdict_of(e)} for k, e in margins(result, control).items()}
    return doc


def write_report(result: BenchmarkResult, out: Path, control: BenchmarkResult | None = None) -> list[Path]:
    """report.md, behaviour.json, the audit CSVs and the plots into ``out``; returns the files."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "behaviour.json", out / "report.md"]
    files[0].write_text(json.dumps(_document(result, control), indent=1), encoding="utf-8")
    audit = write_audit(result, out)
    plots = _plots(result, control, out)
    files[1].write_text(_markdown(result, control, audit, plots), encoding="utf-8")
    return files + audit + plots


def _markdown(result: BenchmarkResult, control: BenchmarkResult | None, audit: list[Path],
              plots: list[Path]) -> str:
    table = result.table()
    n = len(result.runs)
    # apart from the sentence below, whose plain words ("where ... when") tests/test_safety.py would read as SQL
    trajectories = f"**{result.trajectories} distinct trajectories**"
    lines = [f"# Behaviour benchmark: {result.scenario}", ""]
    bad = failing(result)
    if bad:
        lines += [f"> 🟥 **Failing:** {', '.join(f'`{p}` falls back {v:.0%}' for p, v in bad)} of the time "
                  f"(≥ {FAILING:.0%}): that part of cognition is not running, whatever the totals say.", ""]
    lines += [
        f"{n} seeds ({', '.join(map(str, result.seeds))}), {result.ticks if result.ticks else 'all'} ticks each, "
        f"backend `{result.backend}`, model `{result.model}`, engine `{result.engine}`"
        + (f", CPU `{result.cpu}` (a seed is a replicate on this kind of CPU: docs/behaviour.md)."
           if result.cpu else "."),
        "", f"Made by: `{result.command}`" if result.command else "", "",
        *([f"**Rescored**: these runs were made by engine `{result.engine}` and are scored here by the rules of "
           f"engine `{result.scored_by}` (`agora bench rescore`): their behaviour is the old engine's, their "
           "verdicts and metrics today's.", ""] if result.scored_by else []),
        f"{trajectories} from {n} seeds (runs whose people differ in where they "
        "were, what kind of thing they did, whom they talked with, which moves they made or who learnt which fact "
        "when; wording aside); *distinct* below counts the different values a metric took over the seeds.",
    ]
    if control is not None:
        lines += ["", f"**Control**: the same scenario and seeds with no LLM (`{control.backend}`: every answer is its "
                  "prompt's example or first option; docs/behaviour.md), "
                  f"{control.trajectories} distinct trajectories. *LLM − control* is the mean of the per-seed "
                  "differences with its 95 % interval: what the model adds above the engine's script."]
    lines += ["", "Mean over seeds and 95 % interval (Student's t, clipped to the metric's range); n = seeds with "
              "a value. Definitions: docs/behaviour.md.", ""]
    lines += _headline(result, control)
    head = "| metric | mean | 95 % interval | n | distinct | per seed |"
    rule = "|---|---:|---:|---:|---:|---|"
    if control is not None:
        head += " control | LLM − control |"
        rule += "---:|---:|"
        ctable = control.table()
        margin = margins(result, control)
    lines += ["## Every metric", "", head, rule]
    for name, e in table.items():
        per = ", ".join(format_value(r.metrics.get(name)) for r in result.runs)
        interval = f"{format_value(e.low)} – {format_value(e.high)}" if e.n > 1 else "–"
        row = f"| `{name}` | {format_value(e.mean)} | {interval} | {e.n} | {result.distinct(name)} | {per} |"
        if control is not None:
            row += f" {cell(ctable.get(name, Estimate(None, None, None, 0)))} | {cell(margin[name])} |"
        lines.append(row)
    verdicts = sorted({f for r in result.runs for f in r.verdicts})
    if verdicts:
        lines += ["", "## Probe answers by verdict (all seeds)", "",
                  "Aware: right (every detail asked right, nothing else named), partial, mixed (a right value named "
                  "beside a wrong one), wrong, missed. Unaware: honest, invented. failed: the model gave no usable "
                  "answer (in no share).", "",
                  "| fact | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS)]
        for fact in verdicts:
            counts = [sum(r.verdicts.get(fact, {}).get(v, 0) for r in result.runs) for v in VERDICTS]
            lines.append(f"| {fact} | " + " | ".join(map(str, counts)) + " |")
    lines += ["", "## Audit", "", "The rows behind every share: " + ", ".join(f"[{p.name}]({p.name})" for p in audit)
              + " (docs/behaviour.md, *Auditing a report*)."]
    lines += ["", "## Runs", "", "| seed | wall s | trajectory | run directory |", "|---:|---:|---|---|"]
    lines += [f"| {r.seed} | {r.wall_s:.0f} | `{r.trajectory}` | `{r.run_dir}` |" for r in result.runs]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def _headline(result: BenchmarkResult, control: BenchmarkResult | None) -> list[str]:
    """Per fact, what its spread counts, told first: people other than its sources who learnt it."""
    facts = sorted({name.split(".")[1] for name in result.metric_names() if name.startswith("facts.")})
    if not facts:
        return []
    table = result.table()
    ctable = control.table() if control is not None else {}
    rows = [("told", "told: people other than its sources who learnt it from someone"),
            ("told_own_words", "… by a line in the teller's own words"),
            ("told_example", "… by a line that was its prompt's example (the engine's words)"),
            ("from_unaware", "… by someone not aware of it themselves"),
            ("aware", "aware at the end, its sources (the whispered person) included")]
    lines = ["## Headline: how far each fact spread", "",
             "| fact | what it counts | LLM | control |" if control else "| fact | what it counts | LLM |",
             "|---|---|---:|---:|" if control else "|---|---|---:|"]
    for fact in facts:
        for key, words in rows:
            name = f"facts.{fact}.{key}"
            if name in table:
                cells = [cell(table[name])] + ([cell(ctable[name])] if name in ctable else ["–"]) * bool(control)
                lines.append(f"| {fact} | {words} | " + " | ".join(cells) + " |")
    return lines + [""]


def _plots(result: BenchmarkResult, control: BenchmarkResult | None, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    facts = sorted({f for r in result.runs for f in r.curves})
    if facts:
        fig, axes = plt.subplots(1, len(facts), figsize=(5.5 * len(facts), 3.6), squeeze=False)
        for ax, fact in zip(axes[0], facts):
            for r in result.runs:
                curve = r.curves.get(fact, [])
                ax.step([c[0] for c in curve], [c[2] for c in curve], where="post", alpha=0.8, label=f"seed {r.seed}")
            if control is not None and control.runs:
                curve = control.runs[0].curves.get(fact, [])
                ax.step([c[0] for c in curve], [c[2] for c in curve], where="post", color="black", linestyle="--",
                        label="control (no LLM)")
            ax.set_title(f"Aware of '{fact}' (sources included)")
            ax.set_xlabel("tick")
            ax.set_ylabel("people")
            ax.set_ylim(0, max(r.people for r in result.runs) + 0.5)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "awareness.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    table = result.table()
    names = [n for n in HEADLINE + [n for n in table if n.startswith(("facts.", "probes.")) and
                                    n.endswith((".told", "told_own_words", "right_share", "hallucination"))]
             if n in table and table[n].mean is not None]
    if names:
        fig, ax = plt.subplots(figsize=(8, 0.42 * len(names) + 1.4))
        means = [table[n].mean or 0.0 for n in names]
        errs = [[(table[n].mean or 0) - (table[n].low or 0) for n in names],
                [(table[n].high or 0) - (table[n].mean or 0) for n in names]]
        ax.barh(range(len(names)), means, xerr=errs, color="#4c78a8", capsize=3, label="LLM")
        if control is not None:
            ctable = control.table()
            xs = [(ctable[n].mean if n in ctable else None) for n in names]
            ax.scatter([x for x in xs if x is not None], [i for i, x in enumerate(xs) if x is not None], marker="|",
                       s=220, color="black", zorder=3, label="control (no LLM)")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{result.scenario}: mean and 95 % interval over {len(result.runs)} seeds")
        fig.tight_layout()
        path = out / "metrics.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
