"""The benchmark's evidence as small CSV files, so every number of a committed report can be checked.

A report's shares are counts of verdicts and tellings; these files hold the rows they count:

- ``probes.csv``: every probe answer with whether its person was aware, whether the model gave an
  answer at all (``ok``), the verdict and what each detail was read as;
- ``fact_memories.csv``: every memory that carries one of the scenario's facts (the provenance
  tracker's rows), with its text, its source, who was behind it, whether it is an awareness
  source and whether it is its person's first, and whether the line behind it was the prompt's
  example (the engine's words) rather than the model's own;
- ``tellings.csv``: for each person told a fact, who told them, at what depth of the cascade,
  whether the teller was aware themselves, and whether the line was the model's own words;
- ``attendance.csv``: for each happening whose window a run passed (``rundb.attendance``), everyone
  who came, was invited, knew of it when it began or planned its day knowing it, with which of
  those they were (written only when some run has such a happening).

Each row names its seed and run, so a reader can open the run (``agora ui``) and find it.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulation.benchmark.behaviour import BenchmarkResult

__all__ = ["write_audit"]

PROBE_COLUMNS = ["seed", "run_id", "agent_id", "name", "fact_id", "aware", "ok", "verdict", "details", "question",
                 "answer"]
FACT_COLUMNS = ["seed", "run_id", "fact_id", "tick", "sim_time", "agent_id", "name", "source", "aware_source",
                "first", "from_agent", "from_name", "utterance_id", "example_line", "declared", "similarity", "kept",
                "lost", "changed", "text"]
TELLING_COLUMNS = ["seed", "run_id", "fact_id", "tick", "sim_time", "agent_id", "name", "told_by", "told_by_name",
                   "depth", "teller_aware", "own_words", "utterance_id", "kept", "lost", "changed"]

ATTENDANCE_COLUMNS = ["seed", "run_id", "fact_id", "place", "starts", "ends", "agent_id", "name", "came", "invited",
                      "aware_at_start", "planned_day_knowing", "planned"]


def write_audit(result: BenchmarkResult, out: Path) -> list[Path]:
    """Write the CSVs for ``result``'s runs into ``out``; returns their paths."""
    from simulation.provenance.rules import AWARE_SOURCES
    from simulation.rundb import connect_ro
    from simulation.rundb.attendance import attendance
    from simulation.rundb.examples import example_utterances
    from simulation.rundb.facts import first_aware
    from simulation.rundb.metrics import people

    probes: list[dict[str, Any]] = []
    memories: list[dict[str, Any]] = []
    tellings: list[dict[str, Any]] = []
    turnout: list[dict[str, Any]] = []
    for run in result.runs:
        con = connect_ro(run.run_dir / "run.db")
        try:
            rid = run.run_id
            names = people(con, rid)
            copied = example_utterances(con, rid)[0]
            for row in con.execute("select agent_id, fact_id, aware, ok, verdict, details, question, answer "
                                   "from probes where run_id = ? order by id", [rid]):
                probes.append({"seed": run.seed, "run_id": rid, "name": names.get(row["agent_id"], ""), **dict(row)})
            learned = first_aware(con, rid)
            firsts = {(f, i.memory_id) for f, items in learned.items() for i in items}
            for row in con.execute(
                    "select f.fact_id, f.tick, f.sim_time, f.agent_id, f.source, f.from_agent, f.utterance_id, "
                    "f.declared, f.similarity, f.kept, f.lost, f.changed, f.memory_id, m.text from fact_memories f "
                    "join memories m on m.id = f.memory_id and m.run_id = f.run_id where f.run_id = ? order by f.id",
                    [rid]):
                r = dict(row)
                memories.append({
                    "seed": run.seed, "run_id": rid, **{k: r[k] for k in r if k != "memory_id"},
                    "name": names.get(r["agent_id"], ""), "from_name": names.get(r["from_agent"] or "", ""),
                    "aware_source": int(r["source"] in AWARE_SOURCES),
                    "first": int((r["fact_id"], r["memory_id"]) in firsts),
                    "example_line": "" if r["utterance_id"] is None else int(r["utterance_id"] in copied)})
            for fact_id, items in learned.items():
                for i in items:
                    if i.parent is None:
                        continue
                    tellings.append({
                        "seed": run.seed, "run_id": rid, "fact_id": fact_id, "tick": i.tick, "sim_time": i.sim_time,
                        "agent_id": i.agent_id, "name": i.name, "told_by": i.parent,
                        "told_by_name": names.get(i.parent, ""), "depth": i.depth, "teller_aware": int(i.teller_aware),
                        "own_words": int(i.utterance_id not in copied), "utterance_id": i.utterance_id,
                        "kept": i.kept, "lost": i.lost, "changed": i.changed})
            for fact_id, a in attendance(con, rid).items():
                h = a.happening
                for agent_id in sorted(set(a.attended) | set(a.invited) | set(a.aware) | set(a.planners)):
                    turnout.append({
                        "seed": run.seed, "run_id": rid, "fact_id": fact_id, "place": h.place, "starts": h.starts,
                        "ends": h.ends, "agent_id": agent_id, "name": names.get(agent_id, ""),
                        "came": int(agent_id in a.attended), "invited": int(agent_id in a.invited),
                        "aware_at_start": int(agent_id in a.aware),
                        "planned_day_knowing": int(agent_id in a.planners), "planned": int(agent_id in a.planned)})
        finally:
            con.close()
    files = [out / "probes.csv", out / "fact_memories.csv", out / "tellings.csv"]
    tables = [(PROBE_COLUMNS, probes), (FACT_COLUMNS, memories), (TELLING_COLUMNS, tellings)]
    if turnout:
        files.append(out / "attendance.csv")
        tables.append((ATTENDANCE_COLUMNS, turnout))
    for path, (columns, rows) in zip(files, tables, strict=True):
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return files
