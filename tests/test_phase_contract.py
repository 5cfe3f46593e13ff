"""The phase contract: a phase declares the tick's notes it reads and writes; a list in a wrong
order is bad input when the scenario is loaded (located, exit 2), and a phase that touches a note
it did not declare fails the first time it runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import MINIMAL, agora

from simulation.cognition import Phase, TickNotes
from simulation.cognition.mind import ContractError
from simulation.cognition.phases import checked, default_phases, order_problems
from simulation.errors import InputError


def _scenario(tmp_path: Path, phases: str) -> Path:
    text = MINIMAL.read_text(encoding="utf-8").replace("personas:\n", "cognition:\n  phases: " + phases
                                                        + "\npersonas:\n", 1)
    path = tmp_path / "phases.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_default_list_is_in_an_order_that_works():
    assert order_problems(default_phases()) == []


def test_decide_before_perceive_is_bad_input_naming_the_phase_and_what_it_lacks(tmp_path):
    path = _scenario(tmp_path, "[decide, perceive, converse]")
    res = agora("validate", str(path))
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "phases:" in text)
    assert f"phases.yaml:{line}:" in res.output and "cognition.phases[0]" in res.output
    assert "'decide' reads notes.deciding" in res.output and "put 'perceive' before 'decide'" in res.output
    run = agora("run", str(path), "--ticks", "1", "--out", str(tmp_path / "runs"), "--backend", "control")
    assert run.exit_code == 2 and "cognition.phases[0]" in run.output and "Traceback" not in run.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "no run left behind"


def test_a_missing_phase_that_writes_a_needed_note_is_named(tmp_path):
    from simulation import scenario
    from simulation.cognition.phases import scenario_phases

    loaded = scenario.load(_scenario(tmp_path, "[importance, decide, converse, recap, reflect]"))
    with pytest.raises(InputError) as caught:
        scenario_phases(loaded.scenario.cognition.phases, loaded)
    text = str(caught.value)
    assert "'importance' needs notes.deciding, which no phase before it writes ('perceive' does)" in text
    assert "cognition.phases[0]" in text and "cognition.phases[1]" in text and "cognition.phases[4]" in text


def test_a_town_without_conversations_may_reflect():
    """Reflection counts the people who talked when a phase says who did; without one, nobody did."""
    phases = [p for p in default_phases() if p.name not in ("converse", "recap")]
    assert order_problems(phases) == []
    wrong = [p for p in default_phases() if p.name != "converse"] + [p for p in default_phases() if p.name == "converse"]
    assert [i for i, _ in order_problems(wrong)] == [4]  # reflect, before converse writes who talked


def test_phases_given_from_python_are_checked_too():
    perceive, importance, decide, *rest = default_phases()
    with pytest.raises(InputError, match=r"phases\[0\].*'decide' reads notes.deciding"):
        checked([decide, perceive, importance, *rest])


class Sneaky(Phase):
    """Reads who decides this tick without saying so."""

    name = "sneaky"

    async def run(self, me, mind):
        pass

    def finish(self, mind):
        mind.notes.deciding  # noqa: B018


class Scribbler(Phase):
    name = "scribbler"
    reads = frozenset({"deciding"})

    async def run(self, me, mind):
        pass

    def finish(self, mind):
        mind.notes.talking = ["ann"]


def test_a_phase_that_touches_an_undeclared_note_fails_the_first_time_it_runs(make_run, scripted):
    from conftest import step_run

    notes = TickNotes(deciding=["ann"])
    with pytest.raises(ContractError, match="'sneaky' reads notes.deciding but does not declare it"):
        Sneaky().finish(type("M", (), {"notes": notes.for_phase("sneaky", Sneaky.reads, Sneaky.writes)})())
    view = notes.for_phase("scribbler", Scribbler.reads, Scribbler.writes)
    assert view.deciding == ["ann"]
    with pytest.raises(ContractError, match="'scribbler' reads notes.thinking"):  # who decided and who talked
        view.thinking  # noqa: B018
    with pytest.raises(ContractError, match="'scribbler' writes notes.talking"):
        Scribbler().finish(type("M", (), {"notes": view})())
    run = make_run(scripted, ticks=2, phases=[*default_phases()[:1], Sneaky()])
    with pytest.raises(ContractError):
        step_run(run)


def test_a_question_phase_is_a_name_and_a_question():
    from simulation.cognition import Question

    mood = Question(name="mood", question="How does {first} feel?", every_hours=2)
    assert (mood.name, mood.every_hours, Question.name) == ("mood", 2, "question")
    assert mood.reads == mood.writes == frozenset(), "it needs no note of the tick"
    with pytest.raises(TypeError, match="no setting 'colour'"):
        Question(colour="red")
