"""Props (``world.props``): an object's state, shown to everyone at its place, changed by a scheduled
``prop`` event that the people there notice, and kept across a resume."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from conftest import step_run
from pydantic import ValidationError

from simulation.rundb import connect_ro
from simulation.scenario import Place, ScheduledEvent
from simulation.world.props import Props


def test_an_object_shows_its_state_once_it_has_one():
    props = Props([Place(id="cafe", name="Cafe", kind="cafe", objects=["counter", "piano"],
                         states={"piano": "out of tune"})])
    assert props.shown("cafe") == ["counter", "piano (out of tune)"]
    assert props.set("cafe", "counter", "decorated with red hearts") is None
    assert props.set("cafe", "piano", "tuned") == "out of tune"
    assert props.shown("cafe") == ["counter (decorated with red hearts)", "piano (tuned)"]
    with pytest.raises(KeyError):
        props.set("cafe", "harp", "broken")


def test_a_state_is_for_an_object_of_the_place_and_a_prop_event_names_one():
    with pytest.raises(ValidationError, match="'harp' is not one of this place's objects"):
        Place(id="cafe", name="Cafe", kind="cafe", objects=["piano"], states={"harp": "broken"})
    with pytest.raises(ValidationError, match="a prop event needs 'place'"):
        ScheduledEvent(at=datetime(2023, 2, 13, 8), kind="prop", place="cafe", text="broken")
    with pytest.raises(ValidationError, match="'object' belongs to a prop event"):
        ScheduledEvent(at=datetime(2023, 2, 13, 8), kind="whisper", to="ann", object="piano", text="hm")


DECORATED = "decorated with red hearts"


def _with_prop(flagship):
    sc = flagship.scenario.model_copy(deep=True)
    sc.events.append(ScheduledEvent(at=datetime(2023, 2, 13, 7, 20), kind="prop", place="hobbs_cafe",
                                    object="counter", text=DECORATED))
    return flagship.model_copy(update={"scenario": sc})


def _shown_after(run_dir, tick: int) -> tuple[list[str], list[str]]:
    """(the 'There:' lines of Hobbs Cafe prompts at ``tick`` and later, those before)."""
    con = connect_ro(run_dir / "run.db")
    later, before = [], []
    for t, messages in con.execute("select tick, messages from llm_calls order by id"):
        for m in json.loads(messages):
            for line in m["content"].splitlines():
                if line.startswith("There: counter"):
                    (later if t >= tick else before).append(line)
    con.close()
    return later, before


def test_a_scripted_run_shows_the_change_and_its_people_notice_it(make_run, scripted, flagship):
    run = step_run(make_run(scripted, ticks=6, loaded=_with_prop(flagship)))
    run.close()
    later, before = _shown_after(run.run_dir, 2)
    assert later and all(line.startswith(f"There: counter ({DECORATED}), espresso machine") for line in later)
    assert before and not any(DECORATED in line for line in before)
    con = connect_ro(run.run_dir / "run.db")
    (tick, text, data), = con.execute("select tick, text, data from events where kind = 'prop'").fetchall()
    there = {a for a, in con.execute("select agent_id from agent_states where tick = 2 and place = 'hobbs_cafe' "
                                     "and status != 'walking'")}
    noticed = {a for a, in con.execute("select agent_id from memories where text = ? and source = 'perceived'",
                                       [f"At Hobbs Cafe: {text}"])}
    con.close()
    assert tick == 2 and text == f"The counter is now {DECORATED}."
    assert json.loads(data) == {"object": "counter", "state": DECORATED, "was": None}
    assert there and there <= noticed, "whoever was at the cafe noticed the change"


def test_a_resumed_run_keeps_the_state(make_run, scripted, flagship, tmp_path):
    from simulation import Simulation

    run = step_run(make_run(scripted, ticks=8, loaded=_with_prop(flagship), out=tmp_path / "first"), n=4)
    run.close("interrupted")
    run.store.close()
    resumed = Simulation.resume(run.run_dir, backend=scripted)
    assert resumed.model.props.shown("hobbs_cafe")[0] == f"counter ({DECORATED})"
    step_run(resumed)
    resumed.close("finished")
    later, _ = _shown_after(resumed.run_dir, 4)
    assert later and all(DECORATED in line for line in later)
