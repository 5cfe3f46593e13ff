"""Does a text convey a fact? Embedding similarity to the fact, beyond its details alone.

The method (docs/provenance.md has the numbers):

* ``similarity``: cosine between the text and the fact's canonical text (all-MiniLM-L6-v2,
  the embedder retrieval uses, so no second model);
* ``margin``: that similarity minus the text's highest similarity to the fact's who and where
  without its what: each detail on its own ("Hobbs Cafe", "Valentine's Day", "February 14",
  "Tuesday"), each person of the town the fact names ("Isabella Rodriguez"), and each such
  person at each place it names ("Isabella Rodriguez at Hobbs Cafe"). A text about coffee at
  Hobbs Cafe, Isabella serving at the counter, or Valentine's Day in general, is nearer one of
  those than the whole; a text that passes the fact on is nearer the whole.

A text conveys the fact when ``similarity >= SIMILARITY`` and ``margin >= MARGIN``. Both
thresholds were chosen on the labelled set ``tests/data/conveys_labelled.yaml`` (three
facts, hand-labelled memory texts: invitations, recaps, plans, near misses, small-model
noise) by ``tools/calibrate_conveys.py``, which also reports precision and recall with each
fact held out in turn; tests/test_conveys.py checks the shipped thresholds against the set.

Similarity alone cannot tell "the coffee at Hobbs Cafe" (0.42) from "come to my party at
the cafe on Tuesday" (0.43); keyword matching counts "I'm not a party person". A judge
model would be better and slower; on a 135M model it would also be noise. On the labelled
set, with each fact held out of the choice of thresholds: precision 0.90, recall 0.96.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

import numpy as np

from simulation.provenance.details import Detail

if TYPE_CHECKING:
    from simulation.memory.embeddings import Embedder

SIMILARITY = 0.41
"""Least cosine similarity to the fact's text."""
MARGIN = -0.07
"""Least (similarity to the fact) - (highest similarity to one of its details alone)."""

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


@dataclass(frozen=True)
class FactText:
    """What detection needs of a fact: its id, its text, its details."""

    id: str
    text: str
    details: tuple[Detail, ...] = ()


def anchors(fact: FactText, place_names: dict[str, str], people: Sequence[str]) -> list[str]:
    """The fact's who and where without its what (see the module's docstring)."""
    out = [p for d in fact.details for p in detail_phrases(d, place_names)]
    low = fact.text.lower()
    named = [name for name in people if name and name.lower() in low]
    places = [place_names.get(d.value, d.value) for d in fact.details if d.kind == "place"]
    out += named + [f"{name} at {place}" for name in named for place in places]
    return list(dict.fromkeys(out))


def detail_phrases(detail: Detail, place_names: dict[str, str]) -> list[str]:
    """A detail on its own, in the words a text would use: the place's name, the date as
    "February 14" and its weekday, and the detail's aliases (times are not anchors: a clock time
    alone says nothing about what happens then)."""
    out = list(detail.aliases)
    if detail.kind == "place":
        out.append(place_names.get(detail.value, detail.value))
    elif detail.kind == "date":
        day = date.fromisoformat(detail.value)
        out += [f"{_MONTHS[day.month - 1]} {day.day}", day.strftime("%A")]
    return out


class ConveysDetector:
    """Scores texts against a scenario's facts with one embedding call per batch of texts."""

    def __init__(self, embedder: Embedder, facts: Sequence[FactText], place_names: dict[str, str],
                 people: Sequence[str] = (), similarity: float = SIMILARITY, margin: float = MARGIN):
        self.facts = list(facts)
        self.similarity = similarity
        self.margin = margin
        self._embedder = embedder
        self._place_names = dict(place_names)
        self._people = list(people)
        self._fact_vectors = embedder.embed([f.text for f in self.facts]) if self.facts else np.zeros((0, 1))
        self._anchors = [self._anchors_of(f) for f in self.facts]

    def _anchors_of(self, fact: FactText) -> np.ndarray | None:
        phrases = anchors(fact, self._place_names, self._people)
        return self._embedder.embed(phrases) if phrases else None

    def replace(self, fact: FactText) -> None:
        """Fact ``fact.id`` corrected (a ``correction`` event): texts are scored against its new text
        and the who and where its new details and words name from now on."""
        j = next(k for k, f in enumerate(self.facts) if f.id == fact.id)
        self.facts[j] = fact
        self._fact_vectors = self._fact_vectors.copy()
        self._fact_vectors[j] = self._embedder.embed([fact.text])[0]
        self._anchors[j] = self._anchors_of(fact)

    def add_person(self, name: str) -> None:
        """Someone who arrived during the run: a fact that names them gets them among its anchors,
        as it would have had they been there from the start."""
        self._people.append(name)
        low = name.lower()
        for j, fact in enumerate(self.facts):
            if name and low in fact.text.lower():
                self._anchors[j] = self._anchors_of(fact)

    def scores(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(similarity, margin), each len(texts) x len(facts)."""
        if not texts or not self.facts:
            empty = np.zeros((len(texts), len(self.facts)), dtype=np.float32)
            return empty, empty
        vectors = self._embedder.embed(list(texts))
        similarity = vectors @ self._fact_vectors.T
        margin = similarity.copy()
        for j, anchors in enumerate(self._anchors):
            if anchors is not None:
                margin[:, j] -= (vectors @ anchors.T).max(axis=1)
        return similarity, margin

    def conveyed(self, texts: Sequence[str]) -> list[list[tuple[str, float]]]:
        """For each text, the facts it conveys with their similarity, in the facts' order."""
        similarity, margin = self.scores(texts)
        ok = (similarity >= self.similarity) & (margin >= self.margin)
        return [[(self.facts[j].id, round(float(similarity[i, j]), 4)) for j in np.flatnonzero(ok[i])]
                for i in range(len(texts))]
