"""An experiment's report: ``experiment.json`` (every run's metrics, seed by seed, and every
effect), ``report.md`` (per condition against the control: the metrics whose paired difference
is clear of zero first, then every metric) and ``effects.png`` (a forest plot of the headline
metrics' differences with their intervals)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

from simulation.experiment.effects import Effect
from simulation.experiment.runner import ExperimentResult
from simulation.rundb.intervals import cell, difference_cell, format_value

__all__ = ["write_report"]

CLEAR = ("higher", "lower")


def _d(value: float | None) -> str:
    if value is None:
        return "–"
    return ("+∞" if value > 0 else "−∞") if math.isinf(value) else f"{value:+.2f}"


def _rows(effects: list[Effect]) -> list[str]:
    return [f"| `{e.metric}` | {cell(e.control)} | {cell(e.condition)} | {difference_cell(e.difference)}"
            f"{' (risk difference)' if e.share else ''} | {_d(e.d)} | {e.verdict} |" for e in effects]


def markdown(result: ExperimentResult) -> str:
    spec = result.spec
    lines = [f"# Experiment: {spec.name}", "",
             f"Scenario `{result.scenario.name}`; seeds {', '.join(map(str, spec.seeds))} for every condition"
             f"{f'; {spec.ticks} ticks' if spec.ticks else ''}; control: **{result.control}**.", ""]
    if result.command:
        lines += [f"Made by: `{result.command}`", ""]
    lines += ["Each condition ran the same seeds as the control, so each seed is a matched pair. *Difference*:",
              "the mean of the per-seed differences (condition − control) with its 95 % t-interval (for a share,",
              "the risk difference); *d*: Cohen's d for paired samples (mean difference / standard deviation of",
              "the differences); *clear*: the interval lies wholly above (higher) or below (lower) zero.", "",
              "*Distinct runs*: how many different runs a condition's seeds made (what happened, wording aside);",
              "seeds that made the same run are not replicates, and a difference between two such conditions is",
              "clear of zero by construction.", "",
              "| condition | overrides | runs | distinct runs |", "|---|---|---:|---:|"]
    for c in spec.conditions:
        overrides = ", ".join(f"`{k}` = `{json.dumps(v)}`" for k, v in c.overrides.items()) or "(the scenario as it is)"
        if c.fork is not None:
            f = c.fork
            said = "; ".join([*f.whisper, *f.event, *f.set, *(f"remove {r}" for r in f.remove),
                              *(f"add {a}" for a in f.add), *(f"correct {t}" for t in f.correct),
                              *(f"detail {d}" for d in f.detail)]) or "no intervention"
            overrides = f"{c.fork.of}'s runs forked at tick {c.fork.at}: {said}"
        res = result.results[c.name]
        lines.append(f"| {c.name} | {overrides} | {len(res.runs)} | {res.trajectories} |")
    for c in spec.conditions:
        if c.name == result.control:
            continue
        effects = result.effects(c.name)
        clear = [e for e in effects if e.verdict in CLEAR]
        lines += ["", f"## {c.name} against {result.control}", ""]
        lines += (["Clear of zero: " + "; ".join(f"`{e.metric}` {e.verdict} by {format_value(abs(e.difference.mean))}"
                                                  for e in clear if e.difference.mean is not None) + "."]
                  if clear else ["No metric's difference is clear of zero with these seeds."])
        lines += ["", "| metric | control | condition | difference | d | clear |", "|---|---:|---:|---:|---:|---|"]
        lines += _rows(effects)
    if result.ranking is not None:
        r = result.ranking
        lines += ["", "## Believability (Generative Agents' interview, ranked by a judge)", "",
                  f"Every run's people answered the 25 interview questions; the judge compared each pair of "
                  f"conditions' answers of the same person and seed ({len(r.comparisons)} comparisons of "
                  f"{len(r.agents)} people). Bradley–Terry log-strength with its 95 % bootstrap interval over "
                  "people; details in [believability/report.md](believability/report.md).", "",
                  "| condition | log-strength | 95 % interval | first |", "|---|---:|---|---:|"]
        for i in sorted(range(len(r.labels)), key=lambda i: -r.strength[i]):
            lines.append(f"| {r.labels[i]} | {r.strength[i]:+.2f} | [{r.low[i]:+.2f}, {r.high[i]:+.2f}] | "
                         f"{r.first_share[i]:.2f} |")
    return "\n".join(lines) + "\n"


def plot(result: ExperimentResult, path: Path, metrics: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [c.name for c in result.spec.conditions if c.name != result.control]
    effects = {name: {e.metric: e for e in result.effects(name)} for name in others}  # once per condition
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 0.6 + 0.5 * len(others)), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for y, name in enumerate(others):
            e = effects[name][metric]
            if e.difference.mean is None:
                continue
            low, high = e.difference.low, e.difference.high
            ax.errorbar([e.difference.mean], [y], xerr=[[e.difference.mean - low], [high - e.difference.mean]],
                        fmt="o", color="tab:red" if e.verdict in CLEAR else "tab:gray", capsize=3)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(others)), others)
        ax.set_title(metric, fontsize=8)
    fig.suptitle(f"{result.spec.name}: difference to {result.control} (95 % interval)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result: ExperimentResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "name": result.spec.name, "scenario": str(result.scenario), "seeds": result.spec.seeds,
        "ticks": result.spec.ticks, "control": result.control, "command": result.command,
        "conditions": [{"name": c.name, "overrides": c.overrides,
                        "fork": c.fork.model_dump() if c.fork is not None else None,
                        "engine": result.results[c.name].engine,
                        "distinct_runs": result.results[c.name].trajectories,
                        "runs": [{"seed": r.seed, "run_dir": str(r.run_dir), "metrics": r.metrics}
                                 for r in result.results[c.name].runs]} for c in result.spec.conditions],
        "effects": {c.name: [asdict(e) for e in result.effects(c.name)]
                    for c in result.spec.conditions if c.name != result.control},
        "believability": None if result.ranking is None else {
            label: {"log_strength": float(result.ranking.strength[i]), "low": float(result.ranking.low[i]),
                    "high": float(result.ranking.high[i]), "first_share": float(result.ranking.first_share[i])}
            for i, label in enumerate(result.ranking.labels)},
    }
    files = [out / "experiment.json", out / "report.md"]
    files[0].write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    files[1].write_text(markdown(result), encoding="utf-8")
    headline = [m for m in result.metric_names() if m.endswith(".told") or m == "talk.conversations"][:4]
    if headline and len(result.spec.conditions) > 1:
        files.append(out / "effects.png")
        plot(result, files[-1], headline)
    return files
