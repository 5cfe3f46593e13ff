"""Content-free calibration of scored choices (``simulation.cognition.calibrate``)."""

import pytest

from simulation.cognition.calibrate import BLANK, calibrated, content_free


def test_a_habit_is_divided_out():
    # the model puts 80 % on the last option whatever it says; here it puts 60 % there
    assert calibrated([0.2, 0.2, 0.6], [0.1, 0.1, 0.8]) == pytest.approx([2 / 4.75, 2 / 4.75, 0.75 / 4.75])


def test_without_a_baseline_the_probabilities_stand():
    assert calibrated([0.2, 0.8], None) == [0.2, 0.8]
    assert calibrated([0.2, 0.8], [0.5, 0.3, 0.2]) == [0.2, 0.8]  # a baseline for another menu length


def test_the_content_free_question_blanks_everything_a_person_supplies():
    for template in ("react.j2", "aim.j2"):
        msgs = content_free(template, 3)
        text = "\n".join(m["content"] for m in msgs)
        assert "<persona>" not in text
        assert f"1. {BLANK}\n2. {BLANK}\n3. {BLANK}\n" in text
        assert f"<situation>\n{BLANK}\n</situation>" in text
        assert content_free(template, 3) == msgs  # one question per template and length: asked once a run
