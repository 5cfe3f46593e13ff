"""A person's lean to start a conversation (cognition.sociability): extraversion and the tie
scale the odds of the talk option; the model's probabilities still decide."""

from __future__ import annotations

import math

import pytest

from simulation.cognition.sociability import talk_odds, weighted
from simulation.formats.persona import BigFive
from simulation.world.relationships import Tie


def five(extraversion: float) -> BigFive:
    return BigFive(openness=0.5, conscientiousness=0.5, extraversion=extraversion, agreeableness=0.5,
                   neuroticism=0.5)


def test_an_average_person_meeting_a_stranger_leaves_the_choice_to_the_model():
    assert talk_odds(five(0.5), None, 1.0) == 1.0


def test_outgoing_people_and_friends_lean_to_talk_reserved_ones_meeting_strangers_do_not():
    friend = Tie(conversations=2, sentiment=0.4, view="an old friend")
    outgoing_friend = talk_odds(five(0.85), friend, 1.0)
    reserved_stranger = talk_odds(five(0.2), None, 1.0)
    assert outgoing_friend == pytest.approx(math.exp(0.7 + 0.5 + 0.2))
    assert reserved_stranger == pytest.approx(math.exp(-0.6)) and reserved_stranger < 1 < outgoing_friend
    disliked = Tie(conversations=1, sentiment=-1.0, view="a rival")
    assert talk_odds(five(0.5), disliked, 1.0) == pytest.approx(1.0), "known but disliked: no lean"


@pytest.mark.parametrize("extraversion", [0.1, 0.5, 0.9])
def test_strength_zero_turns_the_lean_off(extraversion):
    assert talk_odds(five(extraversion), Tie(conversations=0, sentiment=1.0, view=""), 0.0) == 1.0


def test_factors_scale_the_odds_and_keep_a_distribution():
    p = weighted([0.25, 0.5, 0.25], [3.0, 1.0, 1.0])
    assert sum(p) == pytest.approx(1.0) and p[0] / p[1] == pytest.approx(3 * 0.25 / 0.5)
    assert weighted([1.0, 0.0], [0.1, 5.0]) == [1.0, 0.0], "an option the model rules out stays out"
    assert weighted([0.3, 0.7], None) == [0.3, 0.7]
