"""bench/layouts.py: the rewrites ``bench/reuse.py --what-if`` counts keep the text a person is
shown (moved or split), so what they save is the layout's, not lost content."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import layouts  # noqa: E402

SYSTEM = {"role": "system", "content": "<persona>\nName: Ann Test\n</persona>"}
SITUATION = ("<situation>\nIt is Monday 13 February, 08:10. Ann Test is at the Square.\nAnn remembers:\n"
             "- (Mon 07:00) Plan for Monday: 07:00 breakfast; 08:00 a walk\n"
             "- (Mon 07:00) Ann likes the fountain.\n- (Mon 08:00) Ann Test is walking\n"
             "Ann sees Bob Test (baker), who is buying bread.\nWhat Ann thinks of Bob: a friend.\n</situation>")
QUESTION = {"role": "user", "content": "What does Ann do now?\n<choices>\n1. carry on\n2. talk to Bob\n</choices>"}


def _call(content: str = SITUATION, purpose: str = "react") -> SimpleNamespace:
    return SimpleNamespace(purpose=purpose, messages=[SYSTEM, {"role": "user", "content": content}, QUESTION])


def _words(messages: list[dict[str, str]]) -> list[str]:
    tags = {"<situation>", "</situation>", "<memories>", "</memories>"}
    return sorted(w for m in messages for w in m["content"].split() if w not in tags)


def test_split_turn_ends_the_situation_before_what_is_particular_to_the_question():
    [call] = layouts.rewrite([_call()], ["split-turn"])
    assert len(call.messages) == 4
    assert call.messages[1]["content"].endswith("Ann Test is walking\n</situation>")
    assert call.messages[2]["content"].startswith("<situation>\nAnn sees Bob Test")
    assert call.messages[-1] == QUESTION
    assert _words(call.messages) == _words(_call().messages)


def test_day_apart_moves_the_days_first_memories_after_the_persona():
    calls = [_call(), _call(SITUATION.replace("Ann likes the fountain.", "Ann owns a cat."))]
    out = layouts.rewrite(calls, ["day-apart"])
    day = out[0].messages[1]["content"]
    assert "Plan for Monday" in day and "Ann likes the fountain." in day and "Ann owns a cat." in day
    assert out[0].messages[1] == out[1].messages[1], "the same message for all of the day's questions"
    assert "(Mon 07:00)" not in out[0].messages[2]["content"] and "(Mon 08:00)" in out[0].messages[2]["content"]
    assert calls[0].messages[1]["content"] == SITUATION, "the recorded calls are left as they were"


def test_no_plan_drops_only_the_plan_and_probes_keep_their_layout():
    out = layouts.rewrite([_call(), _call(purpose="probe0")], ["no-plan"])
    assert "Plan for Monday" not in out[0].messages[1]["content"]
    assert "Ann likes the fountain." in out[0].messages[1]["content"]
    assert out[1].messages[1]["content"] == SITUATION
