"""Ranking conditions by believability (Generative Agents 6.2): Bradley–Terry strengths checked by
hand, a judge's preference found, a judge's habit of answering "1" no preference, a missing
answer lost without asking, and bad input located."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import agora

from simulation.evaluation import ranking
from simulation.evaluation.believability import CATEGORIES
from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest
from simulation.testing import AnsweringBackend

ROOT = Path(__file__).resolve().parents[1]


def test_bradley_terry_by_hand():
    # A beat B three times: wins A = 3 + 0.5 (prior), B = 0.5, so s_A / s_B = 7
    log = ranking.bradley_terry(2, [(0, 1, 1.0)] * 3)
    assert log[0] == pytest.approx(math.log(7) / 2) and log[1] == pytest.approx(-math.log(7) / 2)
    even = ranking.bradley_terry(3, [(0, 1, 0.5), (1, 2, 0.5), (0, 2, 0.5)])
    assert np.allclose(even, 0)
    chain = ranking.bradley_terry(3, [(0, 1, 0.9), (1, 2, 0.9), (0, 2, 0.9)] * 4)
    assert chain[0] > chain[1] > chain[2]


def _condition(folder: Path, answers: dict[str, str], missing: tuple[str, ...] = ()) -> Path:
    """An eval folder whose believability rows hold ``answers[agent]`` for every question."""
    persona = yaml.safe_load((ROOT / "personas" / "walter_hughes.yaml").read_text())
    metrics = []
    for agent, text in answers.items():
        for c in CATEGORIES:
            qa = [{"question": f"{c} question {i}?", "answer": "" if (agent, c) in missing else f"{text} ({c} {i})"}
                  for i in range(5)]
            metrics.append({"suite": "believability", "metric": f"answered_{c}", "agent_id": agent, "value": 1.0,
                            "details": {"qa": qa}})
        metrics.append({"suite": "believability", "metric": "failed", "agent_id": agent, "value": 0.0,
                        "details": {"persona": {**persona, "id": agent}}})
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"suites": {"believability": list(answers)},
                                                     "metrics": metrics}))
    return folder


class VividJudge(AnsweringBackend):
    """Prefers an answer with "vivid" in it; between two alike, always answers "1" (a habit)."""

    name = "judge"
    model_id = "vivid-v1"

    def answer(self, req: LLMRequest) -> str:
        assert req.options == ["1", "2"] and req.purpose.startswith("rank_")
        assert "Walter" in req.messages[0]["content"], "the judge sees the persona"
        text = req.messages[-1]["content"]
        one, two = (re.search(rf"^{n}\. (.*)$", text, re.M).group(1) for n in (1, 2))
        p = 0.9 if "vivid" in one and "vivid" not in two else 0.1 if "vivid" in two and "vivid" not in one else 0.8
        return ScoredOptions([math.log(p), math.log(1 - p)], exact=True).to_text()


def test_the_judges_preference_ranks_first_and_a_habit_is_no_preference(tmp_path):
    agents = [f"agent_{i}" for i in range(4)]
    full = ranking.read_condition("full", _condition(tmp_path / "full", {a: "A vivid answer" for a in agents}))
    bare = ranking.read_condition("bare", _condition(tmp_path / "bare", {a: "An answer" for a in agents}))
    same = ranking.read_condition("same", _condition(tmp_path / "same", {a: "An answer" for a in agents}))
    result = ranking.rank([full, bare, same], VividJudge(), bootstrap=200)
    assert len(result.comparisons) == 4 * 25 * 3 and all(c.asked for c in result.comparisons)
    assert len(result.calls) == 2 * len(result.comparisons), "both orders asked"
    assert result.win_rate(0, 1) == pytest.approx(0.9) and result.win_rate(1, 2) == pytest.approx(0.5)
    assert result.strength[0] > 0 > result.strength[1] and result.low[0] > result.high[1]
    assert result.strength[1] == pytest.approx(result.strength[2]), "a habit of answering 1 prefers nobody"
    assert result.first_share[0] == 1.0


def test_a_missing_answer_loses_without_asking(tmp_path):
    a = ranking.read_condition("a", _condition(tmp_path / "a", {"x": "An answer"}, missing=(("x", "plans"),)))
    b = ranking.read_condition("b", _condition(tmp_path / "b", {"x": "An answer"}))
    result = ranking.rank([a, b], VividJudge(), bootstrap=0)
    decided = [c for c in result.comparisons if not c.asked]
    assert len(decided) == 5 and all(c.category == "plans" and c.p_first == 0.0 for c in decided)
    assert result.strength[1] > result.strength[0]


def test_the_report_and_files_are_written(tmp_path):
    a = ranking.read_condition("full", _condition(tmp_path / "a", {"x": "A vivid answer"}))
    b = ranking.read_condition("bare", _condition(tmp_path / "b", {"x": "An answer"}))
    result = ranking.rank([a, b], VividJudge(), bootstrap=50, per_category=1)
    assert len(result.comparisons) == 5
    ranking.write(result, tmp_path / "out", "judge-v1", "agora rank full=a bare=b")
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| 1 | full |" in text and "| 2 | bare |" in text
    assert json.loads((tmp_path / "out" / "ranking.json").read_text())["judged"] == 5
    assert (tmp_path / "out" / "comparisons.csv").read_text().count("\n") == 6


def test_bad_input_is_located(tmp_path):
    res = agora("rank", "full", "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "expected LABEL=EVAL_DIR" in res.output and "Traceback" not in res.output
    res = agora("rank", f"a={tmp_path}", f"b={tmp_path}", "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "no results.json" in res.output
    _condition(tmp_path / "one", {"x": "An answer"})
    res = agora("rank", f"a={tmp_path / 'one'}", "--out", str(tmp_path / "r"), "--judge-backend", "control")
    assert res.exit_code == 2 and "at least two conditions" in res.output
