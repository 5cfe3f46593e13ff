"""Yes-or-no choices (cognition/yesno.py): calibration divides out a habit of saying "Yes", a
prior scales the odds of yes, the draw follows the probabilities over seeds and replays the same
for one seed, a model that cannot be asked gives the default, and the seek question is asked as
"Yes"/"No" about one person."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from simulation.cognition.yesno import ANSWERS, choose_yes, yes_probability
from simulation.llm.client import Rating
from simulation.testing import ScriptedBackend


def test_calibration_divides_out_the_habit_and_the_factor_scales_the_odds():
    assert yes_probability([0.8, 0.2], [0.8, 0.2], 1.0) == pytest.approx([0.5, 0.5])
    assert yes_probability([0.5, 0.5], None, 3.0) == pytest.approx([0.75, 0.25])
    # a model that says yes more here than it does to the blank question leans yes
    p = yes_probability([0.9, 0.1], [0.6, 0.4], 1.0)
    assert p[0] == pytest.approx((0.9 / 0.6) / (0.9 / 0.6 + 0.1 / 0.4))


class _Mind:
    """Just what choose_yes asks of a mind: a rating, a content-free baseline and the settings."""

    def __init__(self, probabilities, baseline=None, calibrate=True, temperature=1.0, choices="sample"):
        self.probabilities = probabilities
        self._baseline = baseline
        self.settings = SimpleNamespace(calibrate=calibrate, choices=choices)
        self._temperature = temperature
        self.asked = []

    def settings_of(self, me):
        return SimpleNamespace(temperature=self._temperature)

    async def ask_rating(self, me, msgs, options, values, *, default, purpose):
        self.asked.append(list(options))
        if not self.probabilities:
            return Rating(value=default, probabilities=[], ok=False, seed=me)
        return Rating(value=self.probabilities[0], probabilities=list(self.probabilities), ok=True, seed=me, call_id=7)

    async def baseline(self, me, msgs, options):
        return self._baseline


_ASK = {"template": "seek.j2", "purpose": "seek", "other_first": "N/A", "there": "N/A"}


def _share_yes(mind, factor=1.0, n=2000):
    yes = sum(asyncio.run(choose_yes(seed, mind, [], **_ASK, factor=factor))[0]
              for seed in range(n))
    return yes / n


def test_the_draw_follows_the_calibrated_probability_over_seeds():
    assert _share_yes(_Mind([0.7, 0.3])) == pytest.approx(0.7, abs=0.04)
    assert _share_yes(_Mind([0.7, 0.3], baseline=[0.7, 0.3])) == pytest.approx(0.5, abs=0.04)
    assert _share_yes(_Mind([0.5, 0.5]), factor=3.0) == pytest.approx(0.75, abs=0.04)
    assert _share_yes(_Mind([0.7, 0.3], baseline=[0.7, 0.3], calibrate=False)) == pytest.approx(0.7, abs=0.04)


def test_one_seed_replays_the_same_answer_and_argmax_takes_the_likelier():
    mind = _Mind([0.55, 0.45])
    assert {asyncio.run(choose_yes(11, mind, [], **_ASK)) for _ in range(5)} \
        == {asyncio.run(choose_yes(11, mind, [], **_ASK))}
    argmax = _Mind([0.55, 0.45], choices="argmax")
    assert all(asyncio.run(choose_yes(s, argmax, [], **_ASK))[0] for s in range(50))
    assert mind.asked[0] == list(ANSWERS)


def test_a_model_that_cannot_be_asked_gives_the_default():
    assert asyncio.run(choose_yes(1, _Mind([]), [], **_ASK, default=True))[0] is True
    assert asyncio.run(choose_yes(1, _Mind([]), [], **_ASK))[0] is False


def test_the_seek_question_is_yes_or_no_about_one_person(make_run):
    backend = ScriptedBackend(seek=True)
    run = make_run(backend, ticks=24)
    for _ in range(24):
        run.model.step()
    asked = [r for batch in backend.batches for r in batch if r.purpose == "seek"]
    assert asked, "someone with news was asked"
    people = [p.state for p in run.model.people.values()]
    for req in asked:
        assert list(req.options) == list(ANSWERS)
        question = req.messages[-1]["content"]
        assert "Answer Yes or No." in question and "<choices>" not in question
        named = [p for p in people if f"find {p.first_name} and tell" in question]
        assert len(named) == 1, "one person per question"
