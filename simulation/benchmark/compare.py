"""Behaviour benchmarks side by side: each metric's mean and 95 % interval per report, and the change.

A change to prompts, cognition or models is judged by its numbers against the previous ones,
over several seeds, with intervals, including what got worse. ``compare`` reads the
``behaviour.json`` of two or more ``agora bench behaviour`` reports (the first is the
reference), recomputes each metric's estimate from the per-seed values (so a metric an older
report did not have shows as missing, not as zero), and says for each metric whether the last
report's interval lies wholly above or below the first's (``higher`` / ``lower``) or overlaps it
(``overlap``: within what five seeds can tell apart). Which direction is better depends on the
metric, so the words say only which way it moved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from simulation.benchmark.behaviour import Estimate, format_value, metric_order, estimate
from simulation.errors import InputError, Problem

__all__ = ["Comparison", "Report", "cell", "compare", "load_report", "markdown"]


@dataclass(frozen=True)
class Report:
    label: str
    path: Path
    scenario: str
    seeds: list[int]
    ticks: int | None
    model: str
    values: dict[str, list[float | None]]
    """metric -> the value of each seed (None where the seed's run gave none or did not have it)."""


@dataclass(frozen=True)
class Comparison:
    metric: str
    estimates: list[Estimate]
    """One per report, in the reports' order."""
    moved: str
    """``higher``, ``lower`` or ``overlap`` (last report against the first), or ``–`` without both."""


def load_report(path: Path, label: str | None = None) -> Report:
    """A benchmark report: its directory (holding behaviour.json) or the behaviour.json itself."""
    file = path / "behaviour.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text("utf-8"))
        runs = data["runs"]
        names = sorted({name for run in runs for name in run["metrics"]})
        values = {name: [run["metrics"].get(name) for run in runs] for name in names}
        return Report(label or path.name, file, data["scenario"], [int(r["seed"]) for r in runs], data.get("ticks"),
                      data.get("model", ""), values)
    except FileNotFoundError:
        raise InputError(Problem(str(file), "not found: give a report directory of agora bench behaviour")) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(Problem(str(file), f"not a behaviour benchmark report: {exc}")) from None


def _moved(first: Estimate, last: Estimate) -> str:
    if first.mean is None or last.mean is None:
        return "–"
    if last.low is not None and first.high is not None and last.low > first.high:
        return "higher"
    if last.high is not None and first.low is not None and last.high < first.low:
        return "lower"
    return "overlap"


def compare(reports: list[Report]) -> list[Comparison]:
    """Every metric any report has, in the report's usual order."""
    names = sorted({n for r in reports for n in r.values}, key=metric_order)
    out = []
    for name in names:
        estimates = [estimate(r.values.get(name, []), name) for r in reports]
        out.append(Comparison(name, estimates, _moved(estimates[0], estimates[-1])))
    return out


def cell(e: Estimate) -> str:
    """"mean [low–high]" (the mean alone without an interval, – without a value)."""
    if e.mean is None:
        return "–"
    if e.n > 1 and e.low is not None and e.high is not None:
        return f"{format_value(e.mean)} [{format_value(e.low)}–{format_value(e.high)}]"
    return format_value(e.mean)


def markdown(reports: list[Report], rows: list[Comparison]) -> str:
    """The comparison as a markdown table, with what each report is."""
    lines = ["| report | scenario | seeds | ticks | model |", "|---|---|---|---:|---|"]
    lines += [f"| {r.label} | {r.scenario} | {', '.join(map(str, r.seeds))} | {r.ticks or '–'} | `{r.model}` |"
              for r in reports]
    lines += ["", "Mean [95 % interval] over seeds; *moved*: the last report's interval wholly above (`higher`) "
              "or below (`lower`) the first's, or `overlap`.", "",
              "| metric | " + " | ".join(r.label for r in reports) + " | moved |",
              "|---|" + "---:|" * len(reports) + "---|"]
    for row in rows:
        lines.append(f"| `{row.metric}` | " + " | ".join(cell(e) for e in row.estimates) + f" | {row.moved} |")
    return "\n".join(lines) + "\n"
