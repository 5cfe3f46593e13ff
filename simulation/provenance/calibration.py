"""Choosing and checking the conveys thresholds on a labelled set (``tests/data/conveys_labelled.yaml``).

``calibrate`` picks the (similarity, margin) pair with the best F1 on a set; ``held_out``
picks it on all facts but one and scores the fact left out, for each fact in turn, so the
precision and recall it reports are of thresholds that never saw that fact's examples.
``tools/calibrate_conveys.py`` prints both; tests/test_conveys.py checks the shipped ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from simulation.provenance.conveys import ConveysDetector, FactText
from simulation.provenance.details import Detail

if TYPE_CHECKING:
    from simulation.memory.embeddings import Embedder

SIMILARITIES = np.round(np.arange(0.30, 0.651, 0.01), 2)
MARGINS = np.round(np.arange(-0.15, 0.151, 0.01), 2)


@dataclass(frozen=True)
class Example:
    fact: str
    text: str
    conveys: bool


@dataclass(frozen=True)
class Scores:
    """Each example's similarity and margin to its own fact."""

    facts: list[str]
    labels: np.ndarray
    similarity: np.ndarray
    margin: np.ndarray


@dataclass(frozen=True)
class Quality:
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: Quality) -> Quality:
        return Quality(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn)


_SAID = re.compile(r'^[^"]+ said to [^"]+: "(.*)"$')


def _as_checked(text: str) -> str:
    """What the tracker checks: for a line said or heard (the engine's 'X said to Y: "..."'), the words alone."""
    m = _SAID.match(text)
    return m.group(1) if m else text


def load_labelled(path: Path) -> tuple[list[FactText], dict[str, str], list[str], list[Example]]:
    """(facts, place id -> name, the town's people, examples) from a labelled-set file."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    places = {pid: str(pair[0]) for pid, pair in (data.get("places") or {}).items()}
    people = [str(p) for p in data.get("people") or []]
    facts = [FactText(f["id"], f["text"], tuple(Detail(d["name"], d["kind"], str(d["value"]), tuple(d.get("aliases", ())))
                                                for d in f.get("details", ())))
             for f in data["facts"]]
    examples = [Example(e["fact"], _as_checked(e["text"]), bool(e["conveys"])) for e in data["examples"]]
    return facts, places, people, examples


def score(embedder: Embedder, facts: list[FactText], places: dict[str, str], people: list[str],
          examples: list[Example]) -> Scores:
    detector = ConveysDetector(embedder, facts, places, people)
    similarity, margin = detector.scores([e.text for e in examples])
    column = {f.id: j for j, f in enumerate(facts)}
    rows = np.arange(len(examples))
    cols = np.array([column[e.fact] for e in examples])
    return Scores([e.fact for e in examples], np.array([e.conveys for e in examples]),
                  similarity[rows, cols], margin[rows, cols])


def quality(scores: Scores, similarity: float, margin: float, mask: np.ndarray | None = None) -> Quality:
    keep = np.ones(len(scores.labels), bool) if mask is None else mask
    said = (scores.similarity >= similarity) & (scores.margin >= margin)
    truth = scores.labels
    return Quality(int((said & truth & keep).sum()), int((said & ~truth & keep).sum()),
                   int((~said & truth & keep).sum()), int((~said & ~truth & keep).sum()))


def calibrate(scores: Scores, mask: np.ndarray | None = None) -> tuple[float, float, Quality]:
    """The (similarity, margin) with the best F1 on the examples in ``mask``; ties go to the
    middle of the best region (the most room on either side), then to the lower thresholds."""
    grid = np.array([[quality(scores, s, m, mask).f1 for m in MARGINS] for s in SIMILARITIES])
    best = grid.max()
    cells = np.argwhere(np.isclose(grid, best))
    centre = cells.mean(axis=0)
    i, j = min(cells, key=lambda c: (float(np.abs(c - centre).sum()), c[0], c[1]))
    s, m = float(SIMILARITIES[i]), float(MARGINS[j])
    return s, m, quality(scores, s, m, mask)


def held_out(scores: Scores) -> tuple[Quality, dict[str, tuple[float, float, Quality]]]:
    """Leave one fact out: thresholds from the others, quality on it; summed over the facts."""
    facts = np.array(scores.facts)
    total = Quality(0, 0, 0, 0)
    per: dict[str, tuple[float, float, Quality]] = {}
    for fact in dict.fromkeys(scores.facts):
        s, m, _ = calibrate(scores, facts != fact)
        q = quality(scores, s, m, facts == fact)
        per[fact] = (s, m, q)
        total = total + q
    return total, per
