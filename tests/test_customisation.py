"""The customisation suite: a judge that reads only a person's lines picks their aspiration and
skills out of four; a favourite position earns nothing; calibration and the stock distractors."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from simulation.evaluation import customisation, engine, report
from simulation.evaluation.session import EvalOptions
from simulation.evaluation.targets import Behaviour, Target
from simulation.formats.persona import Persona
from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest
from simulation.testing import AnsweringBackend

ROOT = Path(__file__).resolve().parents[1]
CUES = {"boat": "fishing boat", "bread": "bakery", "read": "teach", "oar": "regatta",
        "net": "net mending", "dough": "baking", "story": "reading aloud", "row": "rowing"}
"""A word in the lines -> a word of the option it gives away (the judge double's only skill)."""


def _choices(text: str) -> list[str]:
    return re.findall(r"^\d\. (.*)$", text, re.M)


class CueJudge(AnsweringBackend):
    """Puts 0.7 on the option a cue word in the lines points to and 0.1 on the others; with no cue
    (or the lines blanked) it answers by habit: 0.7 on "1"."""

    name = "judge"
    model_id = "cue-judge-v1"

    def answer(self, req: LLMRequest) -> str:
        assert req.purpose.startswith("cu_") and req.options == ["1", "2", "3", "4"]
        assert all("Name:" not in m["content"] for m in req.messages), "the judge never sees the persona"
        lines = req.messages[-2]["content"]
        options = _choices(req.messages[-1]["content"])
        hit = next((k for k, o in enumerate(options) for cue, word in CUES.items()
                    if re.search(rf"\b{cue}\b", lines) and word in o), 0)
        p = [0.1] * 4
        p[hit] = 0.7
        return ScoredOptions([math.log(x) for x in p], exact=True).to_text()


class HabitJudge(AnsweringBackend):
    """Always prefers the first position, whatever it reads."""

    name = "judge"
    model_id = "habit-v1"

    def answer(self, req: LLMRequest) -> str:
        return ScoredOptions([math.log(x) for x in (0.55, 0.15, 0.15, 0.15)], exact=True).to_text()


def person(pid: str, aspiration: str, skills: list[str], lines: list[str]) -> Target:
    base = yaml.safe_load((ROOT / "personas" / "walter_hughes.yaml").read_text())
    base.update(id=pid, name=pid.capitalize() + " Test", relationships={}, aspiration=aspiration, skills=skills)
    p = Persona.model_validate(base)
    behaviour = [Behaviour(i, i, "2023-02-13 08:00", "utterance", f'{p.name} to Someone Else: "{line}"')
                 for i, line in enumerate(lines)]
    return Target(key=f"run/{pid}", persona=p, source="test", run_id="run", behaviour=behaviour)


def town() -> list[Target]:
    return [person("ann", "to own a fishing boat", ["net mending", "sailing"],
                   ["My boat needs paint.", "The net tore."]),
            person("bob", "to open a bakery", ["baking"], ["Fresh bread today!", "The dough rose well."]),
            person("cat", "to teach children to read", ["reading aloud"], ["I read to them.", "What a story."]),
            person("dan", "to win the regatta", ["rowing"], ["My oar cracked.", "We row at dawn."]),
            person("eve", "", [], ["Hello.", "Goodbye."]),
            person("fay", "to sing in the choir", ["singing"], ["Only one line."])]


def test_the_judge_picks_the_persons_own_aspiration_and_skills_from_their_lines(tmp_path):
    result = engine.evaluate(town(), CueJudge(), CueJudge(), EvalOptions(suites=("customisation",), calibrate=False))
    look = report.Lookup(result.metrics)
    both = look.get("customisation", "success")
    assert both.value == 1.0 and both.details["n"] == 8 and both.details["chance"] == 0.25
    assert both.details["people"] == 4 and both.details["too_few_lines"] == 1
    assert both.details["unwritten"] == {"aspiration": 1, "skills": 1}
    ann = look.get("customisation", "p_own_aspiration", "run/ann")
    assert ann.details["options"][ann.details["own"]] == "to own a fishing boat"
    assert ann.value == pytest.approx(0.7)  # in every rotation the cue finds it wherever it stands
    assert len(set(ann.details["options"])) == 4
    assert not any(c["target"] == customisation.FREE for c in result.calls), "no content-free question uncalibrated"
    report.write(result, tmp_path / "cu")
    md = (tmp_path / "cu" / "report.md").read_text()
    assert "## Customisation" in md and "| aspiration | 1.00" in md
    assert (tmp_path / "cu" / "customisation.html").is_file()


def test_every_option_stands_once_in_every_position():
    result = engine.evaluate(town()[:4], CueJudge(), CueJudge(), EvalOptions(suites=("customisation",),
                                                                              calibrate=False))
    asked = [json.loads(c["messages"]) for c in result.calls
             if c["target"] == "run/bob" and c["purpose"].startswith("cu_aspiration")]
    assert len(asked) == 4
    positions = [_choices(m[-1]["content"]) for m in asked]
    for option in positions[0]:
        assert sorted(p.index(option) for p in positions) == [0, 1, 2, 3]
    # the lines are a message of their own, the same in every rotation (read once by the llama.cpp backend)
    assert len({m[-2]["content"] for m in asked}) == 1 and '"Fresh bread today!"' in asked[0][-2]["content"]


def test_a_favourite_position_earns_nothing():
    result = engine.evaluate(town(), HabitJudge(), HabitJudge(), EvalOptions(suites=("customisation",),
                                                                              calibrate=False))
    look = report.Lookup(result.metrics)
    assert look.get("customisation", "success").details["n"] == 0, "a habit has no verdict once rotated"
    assert look.value("customisation", "p_own_aspiration", "run/ann") == pytest.approx(0.25)


def test_calibration_divides_by_the_answer_to_blank_lines():
    result = engine.evaluate(town(), CueJudge(), CueJudge(), EvalOptions(suites=("customisation",)))
    free = [c for c in result.calls if c["target"] == customisation.FREE]
    assert free and all('"N/A"' in json.loads(c["messages"])[-2]["content"] for c in free)
    look = report.Lookup(result.metrics)
    # blank lines get the habit (0.7 on "1"): divided out, the cue still wins everywhere
    assert look.value("customisation", "success") == 1.0
    assert look.value("customisation", "uncalibrated_success") == 1.0


def test_too_few_people_take_stock_distractors():
    t = person("ann", "to own a fishing boat", ["net mending"], ["My boat.", "The net."])
    options = customisation.options_for(t, "aspiration", [customisation.written(t, "aspiration")], seed=3)
    assert len(options) == 4 and "to own a fishing boat" in options
    assert sum(o in customisation.FALLBACK["aspiration"] for o in options) == 3
    assert options == customisation.options_for(t, "aspiration", ["to own a fishing boat"], seed=3), "deterministic"


def test_the_suite_needs_a_run():
    t = town()[0]
    t.run_id = None
    from simulation.errors import InputError

    with pytest.raises(InputError, match="customisation needs a run directory"):
        engine.evaluate([t], CueJudge(), CueJudge(), EvalOptions(suites=("customisation",)))
