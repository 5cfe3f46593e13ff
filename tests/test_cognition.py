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
    me = isabella.state
    monkeypatch.setattr(me.persona.routine, "day", [])  # no habits: the plain day (the persona is shared)
    plan = routine_plan(me, 7, m.hub)
    assert [(p.hour, p.place) for p in plan] == [(7, me.home), (9, "hobbs_cafe"), (17, m.hub), (19, me.home)]
    monkeypatch.setattr(me.persona.routine, "sleep", time(18, 0))
    assert [p.hour for p in routine_plan(me, 7, m.hub)] == [7, 9, 17]
    monkeypatch.setattr(me.persona.routine, "sleep", time(1, 0))  # after midnight: evening is awake time
    assert [p.hour for p in routine_plan(me, 7, m.hub)] == [7, 9, 17, 19]
    assert m.hub == "town_square"


# ---------------------------------------------------------------------- plan decomposition


def test_waking_chooses_the_day_then_does_the_hours_activity(make_run, scripted):
    import json

    run = make_run(scripted, ticks=1)
    run.model.step()
    db = run.store.db
    m = run.model
    awake = [a for a in m.order if a.state.awake_at(m.clock.start)]
    for agent in awake:
        assert agent.state.plan and agent.state.plan_day == m.now.date()
        steps = list(db.query("select * from schedules where agent_id = ? and level = 'steps'", [agent.agent_id]))
        assert len(steps) == 1
        items = json.loads(steps[0]["items"])
        assert sum(i["minutes"] for i in items) == 60, "the hour's activity fills the rest of the hour"
        assert agent.state.steps_key == (m.now.date(), m.now.hour)
        assert agent.state.status in ("acting", "walking"), "the first step started in the act phase"
        assert 7 in agent.state.hours
    purposes = {r["purpose"] for r in db.query("select distinct purpose from llm_calls")}
    assert "plan" in purposes and not purposes & {"hours", "steps"}, "no question below the day's plan"


def test_the_plan_item_in_force_is_the_hours_activity(make_run, scripted):
    from datetime import datetime

    from simulation.cognition.plan import hour_block
    from simulation.core import PlanItem

    run = make_run(scripted, ticks=1)
    m = run.model
    agent = m.people["walter_hughes"]
    m.now = datetime(2023, 2, 13, 8, 0)
    agent.state.plan = [PlanItem(hour=7, activity="breakfast", place=agent.state.home),
                        PlanItem(hour=8, activity="working in the shop", place="harvey_oak_supply"),
                        PlanItem(hour=11, activity="lunch", place="hobbs_cafe")]
    agent.state.hours = {}
    calls = len(scripted.batches)
    for hour, expected in ((8, "working in the shop"), (10, "working in the shop"), (11, "lunch")):
        m.now = datetime(2023, 2, 13, hour, 0)
        block = m.loop.run_until_complete(hour_block(agent.state, m.mind))
        assert block.activity == expected
    assert len(scripted.batches) == calls, "no question asked"


def test_steps_run_back_to_back_within_a_tick_and_lapse_with_the_hour(make_run, scripted):
    from datetime import datetime

    from simulation.core import Action, Status

    run = make_run(scripted, ticks=1)
    m = run.model
    agent = m.people["isabella_rodriguez"]
    m.now = datetime(2023, 2, 13, 9, 0)
    agent.state.status, agent.state.action = Status.IDLE, None
    here = agent.state.place
    agent.state.steps = [Action("stretching", here, 5), Action("tidying up", here, 10), Action("reading", here, 20)]
    agent.state.steps_key = (m.now.date(), 9)
    agent.start_action(agent.state.next_step(m.now))
    agent.advance(10)
    assert agent.state.status == Status.ACTING and agent.state.action.text == "tidying up"
    assert agent.state.action.ends == datetime(2023, 2, 13, 9, 15)
    m.now = datetime(2023, 2, 13, 9, 10)
    agent.advance(10)
    assert agent.state.action.text == "reading" and agent.state.action.ends == datetime(2023, 2, 13, 9, 35)
    texts = [n.text for n in m.memory.stream(agent.agent_id).recent(3)]
    assert [t.split(" is ")[1].split(" at ")[0] for t in texts] == ["stretching", "tidying up", "reading"]
    agent.state.steps = [Action("more reading", here, 30)]
    m.now = datetime(2023, 2, 13, 9, 50)
    agent.state.action.ends = datetime(2023, 2, 13, 10, 0)
    agent.advance(10)
    assert agent.state.status == Status.IDLE and not agent.state.steps, "steps of an hour that is over are dropped"


def test_reacting_takes_up_to_half_an_hour_then_the_hour_goes_on(make_run):
    import json

    from simulation.testing import ScriptedBackend

    backend = ScriptedBackend(react="react", react_alone="react")
    run = make_run(backend, ticks=24)
    m = run.model
    for _ in range(24):
        m.step()
        if m.store.db.execute("select count(*) from events where kind = 'reaction'").fetchone()[0]:
            break
    db = run.store.db
    reaction = next(db.query("select * from events where kind = 'reaction' order by id"))
    assert "going over to have a look" in reaction["text"]
    row = next(db.query("select * from schedules where level = 'steps' and agent_id = ? and tick = ?",
                        [reaction["agent_id"], reaction["tick"]]))
    items = json.loads(row["items"])
    assert "going over to have a look" in items[0]["action"] and items[0]["minutes"] <= 30
    minute = int(reaction["sim_time"][-2:])
    assert sum(i["minutes"] for i in items) == 60 - minute, "from now to the end of the hour"
    started = db.execute("select count(*) from events where kind in ('action', 'move') and agent_id = ? and tick = ?",
                         [reaction["agent_id"], reaction["tick"]]).fetchone()[0]
    assert started >= 1, "the old action was dropped and the reaction started"


# ---------------------------------------------------------------------- conversations


@pytest.mark.parametrize(("end_after", "ender"), [(4, "listener"), (5, "initiator")])
def test_either_side_can_end_a_conversation(make_run, end_after, ender):
    import json

    from simulation.testing import ScriptedBackend

    run = make_run(ScriptedBackend(end_after=end_after), ticks=24)
    for _ in range(24):
        run.model.step()
    db = run.store.db
    ended = list(db.query("select * from conversations where end_reason = 'goodbye'"))
    assert any(conv["turns"] == end_after for conv in ended)
    for conv in ended:
        initiator, listener = json.loads(conv["participants"])
        last = db.execute("select speaker_id from utterances where conversation_id = ? order by turn desc limit 1",
                          [conv["id"]]).fetchone()[0]
        # a question or an invitation just before is answered first, so the goodbye may come later
        assert conv["turns"] >= end_after
        if conv["turns"] == end_after:
            assert last == (listener if ender == "listener" else initiator)
        for agent_id in (initiator, listener):
            recap = db.execute("select text from memories where kind = 'conversation' and agent_id = ? and tick = ?",
                               [agent_id, conv["ended_tick"]]).fetchone()
            assert recap and "party at Hobbs Cafe" in recap[0]
