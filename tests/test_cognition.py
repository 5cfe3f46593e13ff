"""Cognition helpers that need no model: utterance checks, echo repair, the routine plan."""

from __future__ import annotations

import pytest

from simulation.cognition.converse import check_line, strip_echo


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Good morning, Isabella! I am so glad you are here.", "I am so glad you are here."),
        ("good morning isabella, the party is tomorrow at five", "the party is tomorrow at five"),
        ("Good morning, Isabella! Hi", "Good morning, Isabella! Hi"),  # too little left to keep
        ("Hello Fiona, lovely day.", "Hello Fiona, lovely day."),
    ],
)
def test_strip_echo_keeps_what_is_new(text, expected):
    assert strip_echo(text, ["Good morning, Isabella!"]) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("...", "says nothing"),
        ("Good morning, Isabella!", "repeats an earlier line"),
        ("good morning isabella", "repeats an earlier line"),
        ("Good morning, Isabella! Lovely to see you", "repeats an earlier line"),
        ("Lovely to see you at the cafe.", None),
    ],
)
def test_check_line(text, problem):
    assert check_line(text, ["Good morning, Isabella!"]) == problem


def test_routine_plan_is_a_plain_day_and_respects_bedtime(make_run, scripted, monkeypatch):
    from datetime import datetime, time

    from simulation.cognition.plan import routine_plan

    run = make_run(scripted, ticks=1)
    m = run.model
    isabella = m.people["isabella_rodriguez"]
    m.now = datetime(2023, 2, 13, 7, 0)
    plan = routine_plan(isabella)
    assert [(p.hour, p.place) for p in plan] == [(7, isabella.home), (9, "hobbs_cafe"), (17, m.hub), (19, isabella.home)]
    monkeypatch.setattr(isabella.persona.routine, "sleep", time(18, 0))  # the persona is shared
    assert [p.hour for p in routine_plan(isabella)] == [7, 9, 17]
    monkeypatch.setattr(isabella.persona.routine, "sleep", time(1, 0))  # after midnight: evening is awake time
    assert [p.hour for p in routine_plan(isabella)] == [7, 9, 17, 19]
    assert m.hub == "town_square"
