"""The fact detector measured on text from real runs: a labelled sample, precision and recall.

    python tools/label_facts.py sample RUN_DIR... --out labels.csv [--positives 100] [--negatives 100] [--seed 1]
    python tools/label_facts.py score labels.csv

The detector (``simulation/provenance/conveys.py``) decides whether a memory's text conveys one
of the scenario's facts; its thresholds were chosen on 117 hand-written texts. This measures it
where it works: on the texts runs actually produce.

``sample`` draws, from the runs given (of one or several models), a stratified sample to label
by hand:

- **detected**: ``fact_memories`` rows the detector made (not declared by a whisper, event or
  seed), sampled evenly over the runs' models: their labels give the precision;
- **not detected**: the runs' other memory texts (the words the detector judged: a line's words,
  a recap's summary, a memory's text; seeds and declared memories excepted), scored against
  every fact, in two strata per model and fact, near (similarity >= 0.30, where a miss is
  likely) and far (the rest). Each row records its stratum's size and how many were drawn, so
  ``score`` weights the misses found to the whole pool: the recall.

Each row names its model, run, memory, fact, source and the exact text. Fill the ``label``
column with 1 (the text tells someone this fact: that it happens, or where or when) or 0, and
optionally a ``note``. ``score`` prints precision and recall overall and per model, with 95 %
Wilson intervals for precision and a stratified estimate for recall.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

NEAR = 0.30
COLUMNS = ["row", "model", "run_id", "memory_id", "fact_id", "source", "detected", "similarity", "margin", "stratum",
           "stratum_size", "stratum_drawn", "text", "label", "note"]


def _model_name(model: str) -> str:
    return "measurement-1.5B" if "qwen" in model.lower() or "cc324af0" in model else (
        "bundled-135M" if model else "unknown")


def _judged_text(con: sqlite3.Connection, run_id: str, memory_id: int, source: str, text: str,
                 utterance_id: int | None) -> str:
    """The words the tracker checked: a line's own words, a recap's summary, else the memory's text."""
    if utterance_id is not None:
        row = con.execute("select text from utterances where run_id = ? and id = ?", (run_id, utterance_id)).fetchone()
        if row is not None:
            return row[0]
    if source == "recapped" and ": " in text:
        return text.split(": ", 1)[1]
    return text


def sample(runs: list[Path], out: Path, positives: int, negatives: int, seed: int) -> None:
    from simulation.memory.embeddings import get_embedder
    from simulation.provenance.conveys import ConveysDetector, FactText
    from simulation.provenance.details import Detail
    from simulation.rundb.facts import facts as run_facts

    rng = random.Random(seed)
    detected: dict[str, list[dict]] = defaultdict(list)
    pool: dict[str, list[dict]] = defaultdict(list)
    detectors: dict[tuple, ConveysDetector] = {}
    embedder = get_embedder()
    for run_dir in runs:
        con = sqlite3.connect(run_dir / "run.db")
        run_id, model = con.execute("select run_id, model from runs").fetchone()
        name = _model_name(model)
        places = {pid: n for pid, n in con.execute("select place_id, name from places where run_id = ?", (run_id,))}
        people = [n for n, in con.execute("select name from agents where run_id = ?", (run_id,))]
        known = run_facts(con, run_id)
        texts = [FactText(f.id, f.text, tuple(Detail(d["name"], d["kind"], d["value"], tuple(d.get("aliases") or ()))
                                               for d in f.details)) for f in known.values()]
        key = (tuple(f.id for f in texts), tuple(sorted(places.items())))
        if key not in detectors:
            detectors[key] = ConveysDetector(embedder, texts, places, people)
        detector = detectors[key]
        flagged = set()
        for memory_id, fact_id, source, similarity, utterance_id, text in con.execute(
                "select f.memory_id, f.fact_id, f.source, f.similarity, f.utterance_id, m.text from fact_memories f "
                "join memories m on m.id = f.memory_id and m.run_id = f.run_id where f.run_id = ? and f.declared = 0",
                (run_id,)):
            flagged.add((memory_id, fact_id))
            detected[name].append({"model": name, "run_id": run_id, "memory_id": memory_id, "fact_id": fact_id,
                                   "source": source, "detected": 1, "similarity": similarity,
                                   "text": _judged_text(con, run_id, memory_id, source, text, utterance_id)})
        declared = {m for m, in con.execute("select memory_id from fact_memories where run_id = ? and declared = 1",
                                            (run_id,))}
        rows = con.execute("select id, source, text, utterance_id from memories where run_id = ? and kind != 'seed' "
                           "and source is not null", (run_id,)).fetchall()
        candidates = [(mid, src, _judged_text(con, run_id, mid, src, text, utt)) for mid, src, text, utt in rows
                      if mid not in declared]
        judged = [c[2] for c in candidates]
        similarity, margin = detector.scores(judged)
        for i, (mid, src, text) in enumerate(candidates):
            for j, fact in enumerate(detector.facts):
                if (mid, fact.id) in flagged:
                    continue
                pool[name].append({"model": name, "run_id": run_id, "memory_id": mid, "fact_id": fact.id,
                                   "source": src, "detected": 0, "similarity": round(float(similarity[i, j]), 4),
                                   "margin": round(float(margin[i, j]), 4), "text": text})
        con.close()
    chosen: list[dict] = []
    models = sorted(set(detected) | set(pool))
    for name in models:
        items = detected[name]
        take = rng.sample(items, min(len(items), positives // len(models)))
        chosen += [{**r, "stratum": f"{name}/detected", "stratum_size": len(items), "stratum_drawn": len(take)}
                   for r in take]
        strata: dict[str, list[dict]] = defaultdict(list)
        for r in pool[name]:  # one text can be a candidate for several facts: each is its own question
            strata[f"{name}/{r['fact_id']}/{'near' if r['similarity'] >= NEAR else 'far'}"].append(r)
        quota = negatives // len(models)
        near = [k for k in strata if k.endswith("near")]
        far = [k for k in strata if k.endswith("far")]
        for keys, share in ((near, 0.6), (far, 0.4)):
            per = max(1, round(quota * share / max(1, len(keys))))
            for k in sorted(keys):
                take = rng.sample(strata[k], min(len(strata[k]), per))
                chosen += [{**r, "stratum": k, "stratum_size": len(strata[k]), "stratum_drawn": len(take)}
                           for r in take]
    rng.shuffle(chosen)  # the labeller does not see which stratum a row came from by its place
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for i, r in enumerate(chosen, 1):
            writer.writerow({**r, "row": i, "label": "", "note": ""})
    print(f"{len(chosen)} rows to label in {out}: " + ", ".join(
        f"{m}: {sum(r['model'] == m and r['detected'] for r in chosen)} detected, "
        f"{sum(r['model'] == m and not r['detected'] for r in chosen)} not" for m in models))


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    z = 1.96
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def score(path: Path) -> None:
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    unlabelled = [r["row"] for r in rows if r["label"] not in ("0", "1")]
    if unlabelled:
        sys.exit(f"{len(unlabelled)} rows have no label (0 or 1), e.g. row {unlabelled[0]}")
    for name in ["all"] + sorted({r["model"] for r in rows}):
        mine = [r for r in rows if name == "all" or r["model"] == name]
        det = [r for r in mine if r["detected"] == "1"]
        tp_sample = sum(r["label"] == "1" for r in det)
        precision = tp_sample / len(det) if det else math.nan
        low, high = wilson(tp_sample, len(det))
        # the detected pool's true positives, and the misses in each not-detected stratum, weighted
        strata = defaultdict(list)
        for r in mine:
            strata[r["stratum"]].append(r)
        tp = fn = 0.0
        for key, items in strata.items():
            size, drawn = int(items[0]["stratum_size"]), len(items)
            hits = sum(r["label"] == "1" for r in items)
            if items[0]["detected"] == "1":
                tp += hits / drawn * size
            else:
                fn += hits / drawn * size
        recall = tp / (tp + fn) if tp + fn else math.nan
        misses = sum(r["label"] == "1" for r in mine if r["detected"] == "0")
        print(f"{name:>17}: precision {precision:.2f} [{low:.2f}-{high:.2f}] ({tp_sample} of {len(det)} detected "
              f"rows convey their fact); recall {recall:.2f} (stratified: {misses} of "
              f"{sum(r['detected'] == '0' for r in mine)} sampled undetected rows convey it; estimated "
              f"{tp:.0f} conveyed and found, {fn:.0f} missed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("runs", nargs="+", type=Path)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--positives", type=int, default=100)
    s.add_argument("--negatives", type=int, default=100)
    s.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("score")
    c.add_argument("labels", type=Path)
    args = parser.parse_args()
    if args.command == "sample":
        sample(args.runs, args.out, args.positives, args.negatives, args.seed)
    else:
        score(args.labels)


if __name__ == "__main__":
    main()
