"""The no-LLM control: a backend that answers every question the way the engine's script would.

A behaviour number means little until one knows how much of it the engine produces on its own:
the menus it builds, the example line each prompt shows, the usual day a plan starts from. The
control answers with no model at all, so a benchmark run with it beside the LLM's shows what the
LLM adds above the script (``agora bench behaviour --control``, docs/behaviour.md):

- a question the engine sends with its script's answer (``LLMRequest.script``: a conversation
  line made from its move's template, which no prompt shows) is answered with it;
- a question whose prompt shows an example answer (``Example: {...}``, as every cognition prompt
  that the engine parses does) is answered with that example, copied: a line is the example line,
  a plan is the usual day;
- a scored question (options, e.g. whether to talk, the move to make in a conversation or an
  importance rating) puts all its probability on the first option the prompt lists: the
  reaction or move listed first (the engine lists them in a fixed shuffled order, so this is an
  arbitrary one of those offered, the same in every seed), importance 1, and "Yes" to a yes-or-no
  question (whether to go and find someone with news: the control sets out whenever offered);
- what a person who stopped for something does instead (no example shown) is "takes a look
  around";
- a question with no example (a probe) is answered "I don't know." in every text field its
  schema requires: the constant guess, honest by construction.

It is deterministic and ignores the seed: every seed of the control is the same run, which a
report says ("1 distinct trajectory").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulation.llm.backend import OnDone
from simulation.llm.scoring import ScoredOptions
from simulation.llm.settings import ControlSettings
from simulation.llm.types import LLMRequest, RawCompletion

__all__ = ["ControlBackend", "DONT_KNOW"]

DONT_KNOW = "I don't know."
REACTION = "takes a look around"
"""What a person who stopped for something does instead, in the control (the question shows no
example, and "I don't know." would become a half-hour action)."""
_EXAMPLE = re.compile(r"^Example: (\{.*\})\s*$", re.MULTILINE)
_UNLIKELY = -30.0
"""The log-probability of every option but the first (e**-30: nothing a draw ever picks)."""


class ControlBackend:
    name = "control"
    scripted = True
    """Its option "probabilities" are its rule, not a model's (``LLMClient.reads_probabilities``)."""
    model_id = "control"

    @classmethod
    def from_settings(cls, settings: ControlSettings, base_dir: Path) -> ControlBackend:
        return cls()

    @classmethod
    def replay_id(cls, settings: ControlSettings, base_dir: Path) -> str | None:
        return cls.model_id

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        out = []
        for i, request in enumerate(requests):
            completion = RawCompletion(text=self.answer(request), finish_reason="stop")
            out.append(completion)
            if on_done is not None:
                on_done(i, completion)
        return out

    def answer(self, request: LLMRequest) -> str:
        """The script's answer to one request (see the module's docstring)."""
        if request.options is not None:
            logprobs = [0.0] + [_UNLIKELY] * (len(request.options) - 1)
            return ScoredOptions(logprobs, exact=True).to_text()
        if request.script is not None:
            return request.script
        example = _example(request.messages)
        if example is not None:
            return example
        if request.purpose == "react":  # what a person who stopped does instead: the script's plain action
            return json.dumps({"detail": REACTION})
        return json.dumps(_dont_know(request.json_schema or {}))

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "no LLM: examples copied, first options taken"


def _example(messages: list[dict[str, str]]) -> str | None:
    """The last example answer any message of the prompt shows (the original question's, not a retry's)."""
    found = None
    for message in messages:
        for match in _EXAMPLE.finditer(message.get("content", "")):
            found = match.group(1)
    return found


def _dont_know(schema: dict[str, Any]) -> dict[str, Any]:
    """An answer that claims nothing: "I don't know." in every required text field."""
    properties = schema.get("properties", {})
    return {name: DONT_KNOW for name in schema.get("required", list(properties))
            if properties.get(name, {}).get("type") == "string"}
