"""simulation.testing: the scripted double answers by purpose and schema, the same whatever a
template's wording, the same from a fresh double (it keeps no state), and answers a phase of
one's own with what it is told or with a valid value for every field."""

from __future__ import annotations

import json
import re

import pytest
from conftest import MINIMAL
from pydantic import BaseModel, Field

from simulation.llm.types import LLMRequest
from simulation.testing import ScriptedBackend
from simulation.testing.scripted import conversation_lines, fill, move_of, shown


@pytest.fixture(scope="module")
def asked(tmp_path_factory, flagship, embedder) -> list[LLMRequest]:
    """Every request of an 8-tick scripted run of the small flagship (conversations included)."""
    from simulation import Simulation

    backend = ScriptedBackend(end_after=5)
    with Simulation.from_scenario(flagship, backend=backend, out=tmp_path_factory.mktemp("runs"), ticks=8) as sim:
        sim.run()
    return [r for batch in backend.batches for r in batch]


def test_a_fresh_double_answers_every_request_as_the_run_got_it(asked):
    """No state: a resumed run, a replay cache or a double per HTTP request gets the same answers."""
    purposes = {r.purpose for r in asked}
    assert {"importance", "plan", "react", "aim", "utterance", "recap"} <= purposes
    ran, fresh = ScriptedBackend(end_after=5), ScriptedBackend(end_after=5)
    assert [ran.answer(r) for r in asked] == [fresh.answer(r) for r in reversed(asked)][::-1]


_DATA = re.compile(r"(<([a-z]+)>.*?</\2>)", re.DOTALL)


def _reworded(text: str) -> str:
    """The same question in other words: every sentence outside the data blocks changed, and the
    headings inside them too; the data (memories, options, lines said, the example) kept."""
    def outside(part: str) -> str:
        return (part.replace("What does", "Which move will").replace("Answer with the number of one choice.",
                                                                       "Reply with one number only.")
                .replace("Example:", "An answer could be:").replace("Write only what", "Give just what")
                .replace("On a scale of 1 to 10", "From 1 (nothing) to 10 (everything)"))

    def inside(block: str) -> str:
        return (block.replace("The conversation so far:", "Said until now:").replace(" remembers:", " recalls:")
                .replace("It is ", "The time: ").replace("Now ", "Next, "))

    parts = _DATA.split(text)
    out, i = [], 0
    while i < len(parts):
        out.append(outside(parts[i]))
        if i + 1 < len(parts):
            out.append(inside(parts[i + 1]))
        i += 3
    return "".join(out)


def test_answers_do_not_depend_on_the_templates_wording(asked):
    double = ScriptedBackend(end_after=5, prefer=("invite",))
    checked = 0
    for req in asked:
        messages = [m if m["role"] != "user" else {**m, "content": _reworded(m["content"])} for m in req.messages]
        if messages == req.messages:
            continue
        assert double.answer(req.model_copy(update={"messages": messages})) == double.answer(req), req.purpose
        checked += 1
    assert checked > 20


def test_what_the_double_reads_from_a_question(asked):
    aims = [r for r in asked if r.purpose == "aim"]
    assert aims and all(move_of(label.split(". ", 1)[1]) is not None
                        for r in aims for label in shown(r, "choices")[-1].splitlines())
    assert max(conversation_lines(r) for r in asked if r.purpose == "utterance") >= 2
    importance = [r for r in asked if r.purpose == "importance"]
    party = [r for r in importance if "party" in shown(r, "memory")[-1].lower()]
    assert party and {ScriptedBackend().choose(r) for r in party} == {"8"}
    with pytest.raises(ValueError, match="data block"):
        shown(importance[0], "prompt")


def test_goodbye_comes_as_line_end_after_where_it_is_offered(asked):
    """The flagship offers a goodbye from a conversation's 4th line on: told ``end_after=4``, the
    double takes it there (3 lines said), and never before."""
    end_after, said = 4, {}
    for req in (r for r in asked if r.purpose == "aim"):
        labels = dict(line.split(". ", 1) for line in shown(req, "choices")[-1].splitlines())
        goodbye = move_of(labels[ScriptedBackend(end_after=end_after).choose(req)]) == "end"
        said[conversation_lines(req)] = goodbye
        if any(move_of(text) == "end" for text in labels.values()):
            assert goodbye == (conversation_lines(req) + 1 >= end_after)
    assert said.get(end_after - 1) is True, said


class _Verdict(BaseModel):
    mood: str = Field(max_length=12)
    score: int = Field(ge=1, le=5)
    tags: list[str] = Field(min_length=2)
    kind: str = Field(json_schema_extra={"enum": ["calm", "upset"]})
    sure: bool


def test_a_question_of_ones_own_gets_a_valid_answer_or_the_one_it_is_given():
    req = LLMRequest(messages=[{"role": "user", "content": "How is it going?"}], purpose="verdict",
                     json_schema=_Verdict.model_json_schema())
    answered = _Verdict.model_validate_json(ScriptedBackend().answer(req))
    assert 1 <= answered.score <= 5 and len(answered.tags) == 2 and answered.kind == "calm"
    assert fill({"type": "object", "properties": {"n": {"type": "number", "minimum": 2, "maximum": 4}},
                 "required": ["n"]}, "x") == {"n": 3}
    told = ScriptedBackend(answers={"verdict": {"mood": "fine", "score": 5, "tags": ["a", "b"], "kind": "upset",
                                                "sure": False}})
    assert json.loads(told.answer(req))["kind"] == "upset"
    by_seed = ScriptedBackend(answers={"verdict": lambda r: json.dumps({"seed": r.seed})})
    assert by_seed.answer(req.model_copy(update={"seed": 7})) == '{"seed": 7}'
    assert ScriptedBackend(garbage={"verdict"}).answer(req) == "I am not JSON {"
    with pytest.raises(ValueError, match="moves"):
        ScriptedBackend(prefer=("tell",))


def test_a_phase_of_ones_own_is_answered_in_a_run(tmp_path, embedder):
    from simulation import Simulation
    from simulation.cognition import Question, default_phases

    mood = Question(name="mood", question="How does {first} feel?", importance=5.0)
    backend = ScriptedBackend(answers={"mood": {"answer": "Cheerful: the bread came out well."}})
    phases = [*default_phases()[:3], mood, *default_phases()[3:]]
    with Simulation.from_yaml(MINIMAL, backend=backend, out=tmp_path, ticks=7, phases=phases) as sim:
        sim.run()
        kept = sim.db.execute("select count(*) from memories where text = 'Cheerful: the bread came out well.'"
                              ).fetchone()[0]
    assert kept > 0
    assert any(r.purpose == "mood" for batch in backend.batches for r in batch)
