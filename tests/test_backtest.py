"""The back-test suite: a judge who never sees the persona names each factor's side from the
person's lines; a judge's habit of answering "1" earns nothing; Wilson intervals are right."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from simulation.evaluation import backtest, engine, report
from simulation.evaluation.session import EvalOptions
from simulation.evaluation.targets import Behaviour, Target
from simulation.formats.persona import Persona
from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest
from simulation.testing import AnsweringBackend

ROOT = Path(__file__).resolve().parents[1]


class ExclaimingJudge(AnsweringBackend):
    """Reads one cue: lines with "!" are outgoing. On every other factor it always answers "1"."""

    name = "judge"
    model_id = "judge-v1"

    def answer(self, req: LLMRequest) -> str:
        assert req.options == ["1", "2"] and req.purpose.startswith("bt_")
        text = req.messages[-1]["content"]
        assert "Name:" not in req.messages[0]["content"], "the judge never sees the persona"
        if req.purpose.startswith("bt_extraversion"):
            first = re.search(r"^1\. (.*)$", text, re.M).group(1)
            says_high = "!" in text.split("</behaviour>")[0]
            first_is_high = "people" in first  # the high anchor: "seeks out people constantly"
            p_first = 0.9 if says_high == first_is_high else 0.1
        else:
            p_first = 0.8
        return ScoredOptions([math.log(p_first), math.log(1 - p_first)], exact=True).to_text()


def person(pid: str, extraversion: float, lines: list[str]) -> Target:
    base = yaml.safe_load((ROOT / "personas" / "walter_hughes.yaml").read_text())
    base.update(id=pid, name=pid.capitalize() + " Test", relationships={})
    base["big_five"] = {**base["big_five"], "extraversion": extraversion}
    p = Persona.model_validate(base)
    behaviour = [Behaviour(i, i, "2023-02-13 08:00", "utterance", f'{p.name} to Someone Else: "{line}"')
                 for i, line in enumerate(lines)]
    return Target(key=f"run/{pid}", persona=p, source="test", run_id="run", behaviour=behaviour)


def test_the_judge_names_the_written_side_from_lines_alone_and_a_habit_earns_nothing(tmp_path):
    ts = [person("ann", 0.9, ["Hello there!", "What a day!"]), person("bob", 0.8, ["Great news!", "Come along!"]),
          person("cat", 0.1, ["Fine.", "I suppose."]), person("dan", 0.5, ["Hi!", "Yes!"]),
          person("eve", 0.2, ["Only one line."])]
    judge = ExclaimingJudge()
    # raw answers: this judge reads blank lines ("N/A") exactly as cat's, which calibration would leave sideless
    result = engine.evaluate(ts, judge, judge, EvalOptions(suites=("backtest",), calibrate=False))
    look = report.Lookup(result.metrics)
    assert not any(c["target"] == backtest.FREE for c in result.calls), "no content-free question uncalibrated"
    ext = look.get("backtest", "success_extraversion")
    # ann, bob (high) and cat (low) are right; dan is at 0.5 (no side); eve said one line (left out)
    assert ext.value == 1.0 and ext.details["n"] == 3 and ext.details["constant_guess"] == pytest.approx(2 / 3)
    assert look.value("backtest", "success_extraversion_low") == 1.0
    assert look.value("backtest", "success_extraversion_high") == 1.0
    assert look.value("backtest", "lines", "run/eve") == 1.0
    # a judge that always answers "1" has no verdict once both orders are averaged
    assert look.get("backtest", "success_openness").details["n"] == 0
    assert look.value("backtest", "p_high_openness", "run/ann") == pytest.approx(0.5)
    assert look.get("backtest", "success").details["too_few_lines"] == 1
    report.write(result, tmp_path / "bt")
    md = (tmp_path / "bt" / "report.md").read_text()
    assert "## Back-test" in md and "| extraversion | 1.00" in md
    assert (tmp_path / "bt" / "backtest.html").is_file()


def test_the_lines_are_the_persons_words_without_who_to_whom():
    t = person("ann", 0.9, ['She said "hi" to me.', "Fine."])
    assert backtest.lines_of(t) == ['She said "hi" to me.', "Fine."]


def test_wilson_interval():
    lo, hi = backtest.wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    assert backtest.wilson(0, 0) == (None, None)


def test_the_backtest_needs_a_run():
    t = person("ann", 0.9, ["Hi!", "Yo!"])
    t.run_id = None
    from simulation.errors import InputError

    with pytest.raises(InputError, match="backtest needs a run directory"):
        engine.evaluate([t], ExclaimingJudge(), ExclaimingJudge(), EvalOptions(suites=("backtest",)))


class LeaningJudge(AnsweringBackend):
    """Names the high pole of extraversion for everybody, but surer for lines with "!" (and
    with nothing to read, 0.6); on every other factor it cannot tell anyone apart (the same
    probability for all)."""

    name = "judge"
    model_id = "leaning-v1"

    def answer(self, req: LLMRequest) -> str:
        text = req.messages[-1]["content"]
        first = re.search(r"^1\. (.*)$", text, re.M).group(1)
        if req.purpose.startswith("bt_extraversion"):
            said = text.split("</behaviour>")[0]
            p_high = 0.9 if "!" in said else 0.6 if '"N/A"' in said else 0.55
            first_is_high = "people" in first
        else:
            p_high, first_is_high = 0.7, req.purpose.endswith("_1")
        p_first = p_high if first_is_high else 1 - p_high
        return ScoredOptions([math.log(p_first), math.log(1 - p_first)], exact=True).to_text()


def test_the_auc_tells_a_leaning_judge_from_lines_that_show_nothing(tmp_path):
    ts = [person("ann", 0.9, ["Hello there!", "What a day!"]), person("bob", 0.8, ["Great news!", "Come along!"]),
          person("cat", 0.1, ["Fine.", "I suppose."]), person("dan", 0.2, ["Maybe.", "No."])]
    judge = LeaningJudge()
    result = engine.evaluate(ts, judge, judge, EvalOptions(suites=("backtest",), bootstrap=200))
    look = report.Lookup(result.metrics)
    # everyone is read as outgoing: in the raw answers the two written low are failures, so the share is at
    # chance ...
    assert look.value("backtest", "uncalibrated_success_extraversion") == pytest.approx(0.5)
    # ... and measured from what the judge answers with nothing to read (0.6), the quiet two read low
    assert look.value("backtest", "success_extraversion") == pytest.approx(1.0)
    free = [c for c in result.calls if c["target"] == backtest.FREE]
    assert len(free) == 10, "one content-free question per factor and order, shared by everyone"
    assert all('"N/A"' in json.loads(c["messages"])[-1]["content"] for c in free)
    ann = look.get("backtest", "p_high_extraversion", "run/ann")
    assert ann.details["p_high_raw"] == pytest.approx(0.9) and ann.value == pytest.approx(0.9 / 0.6 / (
        0.9 / 0.6 + 0.1 / 0.4))
    # ... yet the judge's probabilities put both outgoing people above both reserved ones
    auc = look.get("backtest", "auc_extraversion")
    assert auc.value == pytest.approx(1.0) and auc.details["n"] == 4
    # everyone here was written low on openness (Walter's persona): there is no one to rank above anyone
    assert look.value("backtest", "auc_openness") is None
    assert look.value("backtest", "auc") == pytest.approx(1.0)
    report.write(result, tmp_path / "bt")
    assert "| AUC |" in (tmp_path / "bt" / "report.md").read_text()


def test_rank_auc_by_hand():
    from simulation.evaluation.stats import rank_auc

    # pairs (positive, negative): 0.9>0.4, 0.9>0.6, 0.6>0.4, 0.6=0.6 (half) -> 3.5 of 4
    assert rank_auc([0.9, 0.4, 0.6, 0.6], [True, False, True, False]) == pytest.approx(0.875)
    assert rank_auc([0.9, 0.4], [True, True]) is None
    assert rank_auc([0.7, 0.7, 0.7], [True, False, False]) == pytest.approx(0.5), "one probability for all: chance"
