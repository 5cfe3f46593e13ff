"""Behaviour benchmarks side by side, judged by paired per-seed differences.

A change to prompts, cognition or models is judged by its numbers against the previous ones over
the same seeds, with intervals, including what got worse. ``compare`` reads the
``behaviour.json`` of two or more ``agora bench behaviour`` reports (the first is the reference)
that ran the same seeds, and for each metric gives each report's mean and 95 % interval and,
for every later report, the mean of the per-seed differences from the reference with its own 95 %
interval (``rundb.intervals.paired``). A seed fixes much of a run (who meets whom when), so two
engines on the same seeds differ less from each other than two seeds do: the paired interval
sees a change that two overlapping five-seed intervals would call "not moved". *moved* says
whether the last report's difference lies wholly above (``higher``) or below (``lower``) zero,
``same`` (every seed equal), or ``overlap``. Which direction is better depends on the metric, so
the words say only which way it moved. Reports of different seeds are refused: unpaired numbers
are not a comparison this command makes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from simulation.benchmark.behaviour import Estimate, estimate, metric_order
from simulation.errors import InputError, Problem
from simulation.rundb.intervals import cell, difference_cell, paired, verdict_of

__all__ = ["Comparison", "Report", "cell", "compare", "difference_cell", "load_report", "markdown"]


@dataclass(frozen=True)
class Report:
    label: str
    path: Path
    scenario: str
    seeds: list[int]
    ticks: int | None
    model: str
    values: dict[str, list[float | None]]
    """metric -> the value of each seed, in ``seeds`` order (None where the seed's run gave none)."""
    engine: str = ""
    scenario_sha256: str = ""
    cpu: str = ""
    """The kind of CPU its runs were made on (``benchmark.host``; '' in reports before it was recorded)."""

    def by_seed(self, name: str, seeds: list[int]) -> list[float | None]:
        """``name``'s values in the order of ``seeds``."""
        values = dict(zip(self.seeds, self.values.get(name, [None] * len(self.seeds)), strict=True))
        return [values.get(s) for s in seeds]

    def only(self, seeds: list[int]) -> "Report":
        """This report cut to ``seeds`` (every one of which it must have run): pairs a longer
        benchmark with an older, shorter one on the seeds they share."""
        missing = [s for s in seeds if s not in self.seeds]
        if missing:
            raise InputError(Problem(str(self.path), f"did not run seed {', '.join(map(str, missing))} "
                                     f"(it ran {', '.join(map(str, self.seeds))})"))
        return replace(self, seeds=list(seeds), values={n: self.by_seed(n, seeds) for n in self.values})


@dataclass(frozen=True)
class Comparison:
    metric: str
    estimates: list[Estimate]
    """One per report, in the reports' order."""
    differences: list[Estimate]
    """One per later report: its per-seed difference from the first, paired by seed."""
    moved: str
    """The last report's paired difference from the first: ``higher``, ``lower``, ``same``, ``overlap``
    or ``–`` where a side has no value."""


def load_report(path: Path, label: str | None = None) -> Report:
    """A benchmark report: its directory (holding behaviour.json) or the behaviour.json itself."""
    file = path / "behaviour.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text("utf-8"))
        runs = data["runs"]
        names = sorted({name for run in runs for name in run["metrics"]})
        values = {name: [run["metrics"].get(name) for run in runs] for name in names}
        return Report(label or path.name, file, data["scenario"], [int(r["seed"]) for r in runs], data.get("ticks"),
                      data.get("model", ""), values, data.get("engine", ""), data.get("scenario_sha256", ""),
                      str(data.get("cpu") or ""))
    except FileNotFoundError:
        raise InputError(Problem(str(file), "not found: give a report directory of agora bench behaviour")) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(Problem(str(file), f"not a behaviour benchmark report: {exc}")) from None


def compare(reports: list[Report]) -> list[Comparison]:
    """Every metric any report has, in the report's usual order. The reports must have run the
    same seeds (``InputError`` otherwise: the comparison is paired)."""
    seeds = sorted(reports[0].seeds)
    for r in reports[1:]:
        if sorted(r.seeds) != seeds:
            raise InputError(Problem(str(r.path), f"ran seeds {', '.join(map(str, sorted(r.seeds)))}, the reference "
                                     f"{reports[0].label} ran {', '.join(map(str, seeds))}: a paired comparison needs "
                                     "the same seeds (run the benchmark again with --seeds, or compare only the seeds both ran "
                                     "with agora bench compare --seeds)"))
    names = sorted({n for r in reports for n in r.values}, key=metric_order)
    out = []
    for name in names:
        columns = [r.by_seed(name, seeds) for r in reports]
        estimates = [estimate(c, name) for c in columns]
        differences = [paired(columns[0], c) for c in columns[1:]]
        out.append(Comparison(name, estimates, differences, verdict_of(differences[-1])))
    return out


def cpu_note(reports: list[Report]) -> list[str]:
    """A warning when the reports' runs were made on different kinds of CPU, or on a kind not recorded:
    llama.cpp is compiled for its host, so the same seed makes another town there, and the Δ are
    then differences between unpaired runs (``benchmark.host``)."""
    kinds = {r.cpu for r in reports}
    if len(kinds) == 1 and "" not in kinds:
        return []
    if kinds == {""}:
        return ["", "Note: none of the reports records the kind of CPU its runs were made on; a seed is a paired "
                "replicate only on the same kind (docs/behaviour.md)."]
    said = "; ".join(f"{r.label}: {r.cpu or 'not recorded'}" for r in reports)
    return ["", f"**Note: the reports' runs were made on different or unrecorded kinds of CPU ({said}).** llama.cpp is "
            "compiled for its host, and the same engine, model and seed make another town on another kind: "
            "seeds are paired replicates only on the same kind (docs/behaviour.md)."]


def markdown(reports: list[Report], rows: list[Comparison]) -> str:
    """The comparison as a markdown table, with what each report is."""
    lines = ["| report | scenario | seeds | ticks | model | engine |", "|---|---|---|---:|---|---|"]
    lines += [f"| {r.label} | {r.scenario} | {', '.join(map(str, r.seeds))} | {r.ticks or '–'} | `{r.model}` | "
              f"`{r.engine or '–'}` |" for r in reports]
    if len({r.scenario_sha256 for r in reports if r.scenario_sha256}) > 1:
        lines += ["", "Note: the reports ran different scenario content (their scenario files' sha256 differ)."]
    lines += cpu_note(reports)
    first = reports[0].label
    lines += ["", "Mean [95 % interval] over seeds; Δ: the mean of the per-seed differences from "
              f"{first} (same seeds) and its 95 % interval; *moved*: the last Δ wholly above zero (`higher`), below "
              "(`lower`), zero in every seed (`same`), or `overlap`.", "",
              "| metric | " + " | ".join(r.label for r in reports) + " | "
              + " | ".join(f"Δ {r.label} − {first}" for r in reports[1:]) + " | moved |",
              "|---|" + "---:|" * (2 * len(reports) - 1) + "---|"]
    for row in rows:
        lines.append(f"| `{row.metric}` | " + " | ".join(cell(e) for e in row.estimates) + " | "
                     + " | ".join(difference_cell(d) for d in row.differences) + f" | {row.moved} |")
    return "\n".join(lines) + "\n"
