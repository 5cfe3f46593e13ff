"""The conveys-a-fact method against its labelled set (tests/data/conveys_labelled.yaml).

Precision and recall of the shipped thresholds on the whole set, and with each fact held out
of the choice of thresholds (the honest figure, quoted in docs/provenance.md). The shipped
thresholds must be the ones calibration picks, so editing the set without recalibrating fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulation.provenance import conveys
from simulation.provenance.calibration import calibrate, held_out, load_labelled, quality, score

LABELLED = Path(__file__).parent / "data" / "conveys_labelled.yaml"


@pytest.fixture(scope="module")
def scores(embedder):
    facts, places, people, examples = load_labelled(LABELLED)
    return score(embedder, facts, places, people, examples)


def test_the_set_is_balanced_and_covers_three_facts():
    facts, _, _, examples = load_labelled(LABELLED)
    assert len(facts) == 3 and len(examples) >= 110
    positives = sum(e.conveys for e in examples)
    assert 0.4 <= positives / len(examples) <= 0.6
    assert {e.fact for e in examples} == {f.id for f in facts}


def test_shipped_thresholds_are_the_calibrated_ones(scores):
    s, m, _ = calibrate(scores)
    assert (conveys.SIMILARITY, conveys.MARGIN) == (s, m)


def test_precision_and_recall_on_the_labelled_set(scores):
    q = quality(scores, conveys.SIMILARITY, conveys.MARGIN)
    assert q.precision >= 0.95 and q.recall >= 0.9, q


def test_precision_and_recall_with_each_fact_held_out(scores):
    total, per = held_out(scores)
    assert total.precision >= 0.85 and total.recall >= 0.9, per
    for fact, (_, _, q) in per.items():
        assert q.tp + q.fn > 0 and q.recall >= 0.8, (fact, q)


def test_similarity_alone_would_not_do(scores):
    """The margin earns its place: at the similarity threshold alone, near misses get through."""
    q = quality(scores, conveys.SIMILARITY, -1.0)
    assert q.fp > 0


def test_the_detector_names_the_facts_a_text_conveys(embedder):
    facts, places, people, _ = load_labelled(LABELLED)
    detector = conveys.ConveysDetector(embedder, facts, places, people)
    found = detector.conveyed(["Come to the Valentine's party at Hobbs Cafe tomorrow at five!",
                               "The coffee at Hobbs Cafe is lovely.",
                               "A pipe burst and the Ville Library is shut on Wednesday."])
    assert [[f for f, _ in row] for row in found] == [["party"], [], ["leak"]]
