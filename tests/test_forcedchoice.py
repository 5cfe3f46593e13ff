"""The forcedchoice suite: a factor's raising statement set against a lowering one, so agreeing
with everything (acquiescence) scores 0.5, a habit of answering "1" cancels over both orders, and a
persona who picks the raising statement scores high; calibration divides out a pair's pull."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
from eval_support import EvalDouble

from simulation.evaluation import engine, forcedchoice, ipip, report, targets
from simulation.evaluation.ipip import FACTORS
from simulation.evaluation.session import EvalOptions
from simulation.llm.scoring import ScoredOptions

PERSONAS = Path(__file__).resolve().parents[1] / "personas"
ISABELLA = PERSONAS / "isabella_rodriguez.yaml"  # extraversion 0.92
THEO = PERSONAS / "theo_lindqvist.yaml"  # extraversion 0.12


def _value(result, metric: str, target: str | None = None):
    return next(m.value for m in result.metrics if m.suite == "forcedchoice" and m.metric == metric
                and m.target == target and (target is not None or m.details.get("scope") == "all"))


def test_every_pair_sets_a_raising_statement_against_a_lowering_one_of_its_factor():
    pairs = forcedchoice.pairs()
    assert all(p.raising.factor == p.lowering.factor == p.factor for p in pairs)
    assert all(p.raising.sign > 0 > p.lowering.sign for p in pairs)
    asked = Counter(i.id for p in pairs for i in (p.raising, p.lowering))
    assert set(asked) == {i.id for i in ipip.items()}, "every IPIP item is asked at least once"
    per = Counter(p.factor for p in pairs)
    # the longer side of each factor: E 5/5, A 6/4, C 6/4, O 7/3, N 8/2 (emotional stability reversed)
    assert per == {"extraversion": 5, "agreeableness": 6, "conscientiousness": 6, "openness": 7, "neuroticism": 8}


class _Agent(EvalDouble):
    """Chooses by the persona: an outgoing one (Isabella's "outgoing" trait) the raising extraversion
    statement with 0.9, anyone else with 0.2; on other factors it agrees with whichever statement
    comes first (p 0.7), a position habit. With the persona blanked, it prefers the first statement
    with 0.6 on every pair."""

    def answer(self, req):  # type: ignore[no-untyped-def]
        if req.options is not None and req.purpose.startswith("fc"):
            system, user = req.messages[0]["content"], req.messages[-1]["content"]
            pair, order = req.purpose[2:].split("_")[:2]
            raising_first = order == "0"
            first = re.search(r'^1\. "(.*)"$', user, re.M).group(1)
            assert (first in _RAISING) == raising_first, "order 0 shows the raising statement first"
            if "<persona>\nN/A\n</persona>" in system:
                p_first = 0.6
            elif pair in _E_PAIRS:
                p_raising = 0.9 if "outgoing" in system else 0.2
                p_first = p_raising if raising_first else 1 - p_raising
            else:
                p_first = 0.7
            return ScoredOptions([math.log(p_first), math.log(1 - p_first)], exact=True).to_text()
        return super().answer(req)


_E_PAIRS = {p.key() for p in forcedchoice.pairs() if p.factor == "extraversion"}
_RAISING = {p.raising.statement for p in forcedchoice.pairs()}


def test_the_persona_moves_the_choice_a_position_habit_cancels_and_calibration_divides_out_the_pull(tmp_path):
    ts = targets.resolve([ISABELLA, THEO])
    agent = _Agent()
    result = engine.evaluate(ts, agent, agent, EvalOptions(suites=("forcedchoice",), bootstrap=200))
    isabella, theo = (t.key for t in ts)
    # raw: 0.9 and 0.2 for the raising statement in both orders
    raw_i = next(m for m in result.metrics if m.metric == "extraversion" and m.target == isabella).details
    assert raw_i["uncalibrated"] == pytest.approx(0.9)
    # calibrated, order 0 (raising first, blank 0.6 on "1"): 0.9/0.6 vs 0.1/0.4 -> 0.857; order 1
    # (raising second, blank 0.4 on it): 0.9/0.4 vs 0.1/0.6 -> 0.931; mean 0.894
    assert _value(result, "extraversion", isabella) == pytest.approx((0.9 / 0.6 / (0.9 / 0.6 + 0.1 / 0.4)
                                                                     + 0.9 / 0.4 / (0.9 / 0.4 + 0.1 / 0.6)) / 2)
    assert _value(result, "extraversion", theo) < 0.25
    # a habit of choosing the first statement (0.7) is no verdict once both orders are averaged
    for f in ("openness", "conscientiousness", "agreeableness", "neuroticism"):
        assert next(m for m in result.metrics if m.metric == f and m.target == isabella
                    ).details["uncalibrated"] == pytest.approx(0.5)
    n_questions = 2 * len(forcedchoice.pairs())
    assert len(result.calls) == n_questions * 2 + n_questions  # two personas, and the content-free ones once
    free = [c for c in result.calls if c["target"] == "content-free"]
    assert all("Isabella" not in c["messages"] and "N/A" in json.loads(c["messages"])[0]["content"] for c in free)
    report.write(result, tmp_path / "fc")
    md = (tmp_path / "fc" / "report.md").read_text()
    assert "## Big Five (IPIP-50 statements as forced choices)" in md and "| Isabella Rodriguez | " in md
    assert (tmp_path / "fc" / "forcedchoice.html").is_file()
    assert set(FACTORS) <= {m.metric for m in result.metrics if m.target == isabella}
