"""Choose the conveys-a-fact thresholds on the labelled set and report precision and recall.

    python tools/calibrate_conveys.py [tests/data/conveys_labelled.yaml]

Prints the quality of the shipped thresholds (simulation/provenance/conveys.py), the best
thresholds on the whole set, and leave-one-fact-out figures (thresholds chosen without the
fact they are scored on), which are the honest ones to quote.
"""

from __future__ import annotations

import sys
from pathlib import Path

from simulation.memory.embeddings import get_embedder
from simulation.provenance import conveys
from simulation.provenance.calibration import calibrate, held_out, load_labelled, quality, score


def main(path: str = "tests/data/conveys_labelled.yaml") -> None:
    facts, places, people, examples = load_labelled(Path(path))
    scores = score(get_embedder(), facts, places, people, examples)
    positives = int(scores.labels.sum())
    print(f"{len(examples)} examples ({positives} convey, {len(examples) - positives} do not), {len(facts)} facts")
    q = quality(scores, conveys.SIMILARITY, conveys.MARGIN)
    print(f"shipped  similarity >= {conveys.SIMILARITY:.2f}, margin >= {conveys.MARGIN:+.2f}: "
          f"precision {q.precision:.3f} recall {q.recall:.3f} F1 {q.f1:.3f}  (tp {q.tp} fp {q.fp} fn {q.fn})")
    s, m, q = calibrate(scores)
    print(f"best     similarity >= {s:.2f}, margin >= {m:+.2f}: "
          f"precision {q.precision:.3f} recall {q.recall:.3f} F1 {q.f1:.3f}")
    total, per = held_out(scores)
    for fact, (s, m, q) in per.items():
        print(f"held out {fact:<8} thresholds {s:.2f} / {m:+.2f}: precision {q.precision:.3f} recall {q.recall:.3f} "
              f"(tp {q.tp} fp {q.fp} fn {q.fn})")
    print(f"held out, all facts: precision {total.precision:.3f} recall {total.recall:.3f} F1 {total.f1:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
