"""A scripted test-double backend: schema-valid answers by purpose, with no model at all.

It picks places from the request's JSON-schema enum with the request seed, so runs differ by
seed but are reproducible, records every batch it was handed, and can be told to answer
some purposes with garbage to exercise the client's retry and fallback path.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from simulation.llm.backend import OnDone
from simulation.llm.types import LLMRequest, RawCompletion


def _enum(schema: dict[str, Any], name: str) -> list[str]:
    for definition in [schema, *schema.get("$defs", {}).values()]:
        prop = definition.get("properties", {}).get(name)
        if prop and "enum" in prop:
            return prop["enum"]
    raise KeyError(name)


class ScriptedBackend:
    name = "scripted"
    model_id = "scripted-v1"

    def __init__(self, garbage: set[str] | None = None, talk: bool = True, end_after: int = 4):
        self.garbage = garbage or set()
        self.talk = talk
        self.end_after = end_after
        self.batches: list[list[LLMRequest]] = []
        self.closed = False

    def answer(self, req: LLMRequest) -> str:
        rng = random.Random(req.seed)
        if req.purpose in self.garbage:
            return "I am not JSON {"
        schema = req.json_schema or {}
        if req.purpose == "plan":
            places = _enum(schema, "place")
            hour = 7 + rng.randrange(3)
            plan = [{"hour": hour + 2 * i, "activity": f"doing errand {i}", "place": rng.choice(places)} for i in range(4)]
            return json.dumps({"plan": plan})
        if req.purpose == "action":
            return json.dumps({"action": "working on something", "place": rng.choice(_enum(schema, "place")),
                               "minutes": rng.choice([10, 20, 30, 60])})
        if req.purpose == "react":
            return json.dumps({"talk": self.talk, "greeting": "Hello there! Have you heard about the party?"})
        if req.purpose == "utterance":
            turns = req.messages[-1]["content"].count('"\n') + 1
            return json.dumps({"say": f"Line {turns} (tick {req.tick}): the party is at Hobbs Cafe.",
                               "end_conversation": turns >= self.end_after})
        if req.purpose.startswith("probe"):
            return json.dumps({"answer": "I heard there is a party at Hobbs Cafe."})
        return json.dumps({})

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        self.batches.append(list(requests))
        out = []
        for i, req in enumerate(requests):
            text = self.answer(req)
            c = RawCompletion(text=text, prompt_tokens=len(json.dumps(req.messages)) // 4,
                              completion_tokens=len(text) // 4, latency_s=0.001, finish_reason="stop")
            out.append(c)
            if on_done:
                on_done(i, c)
        return out

    def close(self) -> None:
        self.closed = True
