"""The no-LLM control backend (``simulation.llm.control``): the engine's script with no model."""

from __future__ import annotations

import json

from simulation.llm.control import DONT_KNOW, REACTION, ControlBackend
from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest


def _ask(content: str, schema: dict | None = None, options: list[str] | None = None) -> str:
    request = LLMRequest(messages=[{"role": "system", "content": "You are Ann."}, {"role": "user", "content": content}],
                         json_schema=schema, options=options)
    return ControlBackend().generate([request])[0].text


def test_the_control_copies_the_example_takes_the_first_option_and_claims_nothing_else():
    shown = 'Say something.\nExample: {"say": "Hello, Bob! Nice to see you."}\nAnswer in JSON.'
    assert json.loads(_ask(shown)) == {"say": "Hello, Bob! Nice to see you."}
    scored = ScoredOptions.from_text(_ask("Pick one.", options=["1", "2", "3"]), 3)
    assert scored.probabilities()[0] > 0.999999
    probe = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    assert json.loads(_ask("Do you know of a party?", probe)) == {"answer": DONT_KNOW}


def test_a_person_who_stopped_for_something_takes_a_look_around_not_an_i_dont_know_action():
    detail = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
    request = LLMRequest(messages=[{"role": "user", "content": "Ann stops. What does Ann do instead?"}],
                         json_schema=detail, purpose="react")
    assert json.loads(ControlBackend().generate([request])[0].text) == {"detail": REACTION}


def test_a_retry_is_answered_with_the_original_questions_example():
    request = LLMRequest(messages=[
        {"role": "user", "content": 'Example: {"say": "Goodbye, Bob!"}'},
        {"role": "assistant", "content": '{"say": "Goodbye, Bob!"}'},
        {"role": "user", "content": "That answer is not usable: repeats an earlier line. Answer again, differently."}])
    assert json.loads(ControlBackend().generate([request])[0].text) == {"say": "Goodbye, Bob!"}


def test_control_is_a_backend_a_scenario_and_the_command_line_can_name(tmp_path):
    from simulation.llm import registry
    from simulation.llm.factory import BackendChoice

    settings = BackendChoice(backend="control", cache="off").apply(registry.default_settings())
    assert settings.backend == "control"
    assert registry.lookup("control", "--backend").build(settings, tmp_path).model_id == "control"
