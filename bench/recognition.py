"""Does recognition hold when the probe question is worded another way? Read from finished runs.

    .venv/bin/python bench/recognition.py docs/benchmarks/behaviour-measure-s7 docs/benchmarks/behaviour-s7 \
        docs/benchmarks/harbour-s7 --runs bench-out                # the runs of a bench report

A person recognises a question about news when one of their memories is like it (cosine
similarity of the embeddings, ``cognition/probe.py``): above a fixed threshold
(``cognition.recognition``), or a margin above what the town knew before the day, the 90th
percentile of the question's similarity to everyone's seeded memories
(``cognition.recognition_margin``). This re-asks every person of each run, at the time of
their probe, the scenario's question and the rewordings of ``bench/recognition-wordings.yaml``,
and prints per wording: the share of the aware and of the unaware (the instrument's
``probes.aware``) that each rule would let answer, and the AUC of the closest memory's
similarity (aware above unaware). No model is asked: the embedder alone decides, so this runs in
a minute. What it cannot say is what the model answers once asked (that is the behaviour
benchmark's). Because the instrument's "aware" is decided with the same embedder
(``provenance.conveys``), it also splits the people by a rule with no embedding in it: whether a
memory names every detail of the fact (the detail reader), and prints the same shares for that
split on the scenario's own question. The fixed threshold was chosen on the scenarios' own
questions (step 6's runs); the margin on these rewordings over step 7's runs, so step 6's runs
are its held-out check (the same scenarios and questions under an earlier engine, so held out in
engine only). ``--unit sentence`` reads each memory by its sentence most like the question
(``cognition.recognition_unit: sentence``, the default since issue 33 step 12; over all of a person's
memories, where the engine reads the 32 most like the question whole), the seeded ones too. Writes nothing.
"""

from __future__ import annotations

import argparse
import csv
import sqlite3
import sys
from datetime import date
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulation.memory.embeddings import get_embedder  # noqa: E402
from simulation.memory.sentences import sentences  # noqa: E402
from simulation.provenance.details import KEPT, DetailReader, place_aliases  # noqa: E402
from simulation.provenance.rescore import _details  # noqa: E402

WORDINGS = Path(__file__).with_name("recognition-wordings.yaml")


def closest_to(embedder, texts: list[str], q: np.ndarray, unit: str) -> np.ndarray:
    """Per question (columns of ``q``), each text's similarity (texts x questions): of the whole text
    (``memory``, recognition_unit: memory) or of its sentence most like the question (``sentence``)."""
    split = [sentences(t) if unit == "sentence" else [t] for t in texts]
    flat = [p for ps in split for p in ps]
    sims = embedder.embed(flat) @ q.T if flat else np.zeros((0, q.shape[0]))
    out, i = np.zeros((len(texts), q.shape[0])), 0
    for row, ps in enumerate(split):
        out[row] = sims[i:i + len(ps)].max(axis=0)
        i += len(ps)
    return out


def auc(pos: list[float], neg: list[float]) -> float:
    """P(an aware person's similarity > an unaware's), ties half."""
    if not pos or not neg:
        return float("nan")
    return float(np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg]))


def run_dir(report: Path, runs: Path | None, run_id: str) -> Path:
    """Where a report's run lives: its own runs/ folder, else ``--runs`` (a bench's --out)."""
    for base in (report / "runs", *(sorted(runs.glob("*/runs")) if runs else ())):
        if (base / run_id / "run.db").exists():
            return base / run_id
    elsewhere = f" or {runs}/*/runs" if runs else ""
    raise SystemExit(f"{report}: run {run_id} not found under {report / 'runs'}{elsewhere}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="bench behaviour --out folders (probes.csv and runs)")
    ap.add_argument("--runs", type=Path, help="a folder of bench outputs to find runs in, for a report without runs/")
    ap.add_argument("--threshold", type=float, default=0.46, help="the fixed threshold (cognition.recognition)")
    ap.add_argument("--margin", type=float, default=0.2, help="the margin (cognition.recognition_margin)")
    ap.add_argument("--unit", choices=("memory", "sentence"), default="memory",
                    help="compare the question with whole memories (the engine) or with each sentence of them")
    args = ap.parse_args()
    wordings: dict[str, list[str]] = yaml.safe_load(WORDINGS.read_text())
    embedder = get_embedder()
    print(f"| report | question | aware / unaware | AUC | fixed {args.threshold}: aware, unaware recognised "
          f"| margin {args.margin}: aware, unaware |\n|---|---|---|---:|---|---|")
    holders: list[str] = []
    for report in args.reports:
        rows = [r for r in csv.DictReader((report / "probes.csv").open()) if r["fact_id"]]
        sims: dict[str, tuple[list[float], list[float]]] = {}
        above: dict[str, tuple[list[float], list[float]]] = {}
        backstory: dict[str, np.ndarray] = {}
        by_details: tuple[list[float], list[float]] = ([], [])
        for r in rows:
            questions = [r["question"], *wordings.get(r["fact_id"], [])]
            db = sqlite3.connect(run_dir(report, args.runs, r["run_id"]) / "run.db")
            tick = db.execute("select tick from probes where agent_id = ? and fact_id = ?",
                              (r["agent_id"], r["fact_id"])).fetchone()[0]
            memories = [t for (t,) in db.execute("select text from memories where agent_id = ? and tick <= ?",
                                                 (r["agent_id"], tick))]
            q = embedder.embed(questions)
            if r["run_id"] not in backstory:
                seeds = [t for (t,) in db.execute("select text from memories where kind = 'seed'")]
                seeded = closest_to(embedder, seeds, q, args.unit) if seeds else np.zeros((1, len(questions)))
                backstory[r["run_id"]] = np.percentile(seeded, 90, axis=0)
            best = closest_to(embedder, memories, q, args.unit).max(axis=0) if memories else np.full(len(questions), -1.0)
            side = 0 if r["aware"] == "1" else 1
            by_details[0 if holds_details(db, r, memories) else 1].append(float(best[0] - backstory[r["run_id"]][0]))
            for j, question in enumerate(questions):
                sims.setdefault(question, ([], []))[side].append(float(best[j]))
                above.setdefault(question, ([], []))[side].append(float(best[j] - backstory[r["run_id"]][j]))
        for question, (pos, neg) in sims.items():
            fixed = (np.mean(np.array(pos) >= args.threshold), np.mean(np.array(neg) >= args.threshold))
            rel = above[question]
            margin = (np.mean(np.array(rel[0]) >= args.margin), np.mean(np.array(rel[1]) >= args.margin))
            print(f"| {report.name} | {question} | {len(pos)} / {len(neg)} | {auc(pos, neg):.2f} | "
                  f"{fixed[0]:.2f}, {fixed[1]:.2f} | {margin[0]:.2f}, {margin[1]:.2f} |")
        held, not_held = by_details
        shares = [np.mean(np.array(side) >= args.margin) for side in by_details]
        holders.append(f"| {report.name} | {len(held)} / {len(not_held)} | {auc(held, not_held):.2f} | "
                       f"{shares[0]:.2f}, {shares[1]:.2f} |")
    print("\nWithout the embedder: aware = holds a memory that names every detail of the fact (the instrument's "
          "detail reader, words and times, no embedding), the scenario's own question:\n")
    print(f"| report | holders / others | AUC | margin {args.margin}: holders, others recognised |\n|---|---|---:|---|")
    print("\n".join(holders))
    return 0


def holds_details(db: sqlite3.Connection, row: dict[str, str], memories: list[str]) -> bool:
    """Whether one of ``memories`` names every detail of the probe's fact (kept, by the detail
    reader): awareness decided without the embedder that recognition and ``provenance.conveys`` use."""
    doc = yaml.safe_load(db.execute("select scenario_yaml from runs").fetchone()[0]) or {}
    facts = [f for f in doc.get("facts") or [] if f.get("id") == row["fact_id"]]
    details = _details(facts[0].get("details") or []) if facts else ()
    places = {pid: (name, kind or "") for pid, name, kind in db.execute("select place_id, name, kind from places")}
    reader = DetailReader(place_aliases(places))
    when = date.fromisoformat(db.execute("select sim_time from probes where agent_id = ? and fact_id = ?",
                                         (row["agent_id"], row["fact_id"])).fetchone()[0][:10])
    return bool(details) and any(all(v == KEPT for v in reader.read_all(m, details, when).values()) for m in memories)


if __name__ == "__main__":
    raise SystemExit(main())
