"""A scripted test-double backend: schema-valid answers by purpose, with no model at all.

It reads what it needs from the request's JSON schema (place enums, how many ratings or
hour blocks, which statement numbers an insight may cite) and from the prompt (the
memories to rate), picks with the request seed, so runs differ by seed but are
reproducible, records every batch it was handed, and can be told to answer some purposes
with garbage to exercise the client's retry and fallback path.

Importance: a memory mentioning the party is an 8, anything else a 3 (``importance``), with all
the probability on that option; other ratings put it on an option picked with the seed.
Reactions: ``react`` is the decision when someone can be talked to ("talk" by default,
or "continue"/"react"); with nobody to talk to, the decision is ``react_alone``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from simulation.llm.backend import OnDone
from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest, RawCompletion, asked


def _defs(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [schema, *schema.get("$defs", {}).values()]


def _prop(schema: dict[str, Any], name: str) -> dict[str, Any]:
    for definition in _defs(schema):
        prop = definition.get("properties", {}).get(name)
        if prop is not None:
            return prop
    raise KeyError(name)


def _enum(schema: dict[str, Any], name: str) -> list[Any]:
    prop = _prop(schema, name)
    if "const" in prop:  # a Literal of one value
        return [prop["const"]]
    return prop["enum"] if "enum" in prop else prop["items"]["enum"]


_NUMBERED = re.compile(r"^(\d+)\. (.*)$", re.MULTILINE)
_MEMORY = re.compile(r"^<memory>\n(.*?)\n</memory>$", re.MULTILINE | re.DOTALL)
_NOW_LINE = re.compile(r"^Now \S+ (.*)$", re.MULTILINE)


def _turns(prompt: str) -> int:
    """Lines said so far in the conversation a prompt shows."""
    so_far = prompt.split("The conversation so far:")[-1].split("</situation>")[0]
    return sum(line.startswith("- ") for line in so_far.splitlines())


class AnsweringBackend:
    """A test-double backend: ``answer(request)`` gives each text; records every batch it was handed."""

    batches: list[list[LLMRequest]]
    closed: bool

    def answer(self, req: LLMRequest) -> str:
        raise NotImplementedError

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


class ScriptedBackend(AnsweringBackend):
    name = "scripted"
    model_id = "scripted-v1"

    def __init__(self, garbage: set[str] | None = None, talk: bool = True, end_after: int = 4,
                 react: str | None = None, react_alone: str = "continue", importance=None,
                 prefer: tuple[str, ...] = ()):
        self.garbage = garbage or set()
        self.react = react or ("talk" if talk else "continue")
        self.react_alone = react_alone
        self.end_after = end_after
        self.prefer = prefer
        self.importance = importance or (lambda text: 8 if "party" in text.lower() else 3)
        self.batches: list[list[LLMRequest]] = []
        self.closed = False

    def rated(self, prompt: str, options: Sequence[str], seed: int) -> str:
        """The option a rating question gets all the probability on: importance by the memory's
        words (``importance``), anything else picked with the seed."""
        memory = _MEMORY.search(prompt)
        if memory is not None and str(self.importance(memory.group(1))) in options:
            return str(self.importance(memory.group(1)))
        return random.Random(seed).choice(list(options))

    def aim(self, prompt: str, options: Sequence[str], rng: random.Random) -> str:
        """A conversation's next move: goodbye as line ``end_after`` (or the first line after it where
        goodbye is offered), else the first option starting with a word of ``prefer``, else any
        other option, picked with the seed."""
        labels = dict(_NUMBERED.findall(prompt.split("<choices>")[-1]))
        goodbye = [n for n, text in labels.items() if text.startswith("say goodbye") and n in options]
        others = [o for o in options if o not in goodbye]
        if goodbye and (_turns(prompt) + 1 >= self.end_after or not others):
            return goodbye[0]
        for word in self.prefer:
            for n, text in labels.items():
                if n in others and text.startswith(word):
                    return n
        if _turns(prompt) + 2 >= self.end_after:  # nothing that must be answered just before the goodbye
            open_ended = [n for n, text in labels.items() if n in others and not text.startswith(("ask", "invite"))]
            others = open_ended or others
        return rng.choice(others)

    def answer(self, req: LLMRequest) -> str:
        rng = random.Random(req.seed)
        if req.purpose in self.garbage:
            return "I am not JSON {"
        schema = req.json_schema or {}
        prompt = asked(req.messages)
        if req.options is not None and req.purpose == "aim":
            picked = self.aim(prompt, req.options, rng)
            return ScoredOptions([0.0 if o == picked else None for o in req.options], exact=True).to_text()
        if req.options is not None:
            picked = self.rated(prompt, req.options, req.seed)
            return ScoredOptions([0.0 if o == picked else None for o in req.options], exact=True).to_text()
        if req.purpose == "plan":
            numbers, hours = _enum(schema, "choice"), _enum(schema, "hour")
            start = rng.randrange(min(2, len(hours)))
            plan = [{"hour": hours[j], "choice": rng.choice(numbers)} for j in range(start, len(hours), 2)][:4]
            answer: dict[str, Any] = {"plan": plan}
            if "yesterday" in schema.get("properties", {}):
                answer = {"yesterday": "A busy day of errands and talk about the party.", **answer}
            return json.dumps(answer)
        if req.purpose == "react":
            choices = _enum(schema, "decision")
            decision = self.react if "talk" in choices else self.react_alone
            detail = {"talk": "Hello there! Have you heard about the party?", "react": "going over to have a look",
                      "continue": ""}[decision]
            return json.dumps({"decision": decision, "detail": detail})
        if req.purpose == "utterance":
            turns = _turns(prompt) + 1
            now = _NOW_LINE.search(prompt)
            doing = now.group(1) if now else ""
            return json.dumps({"say": f"Line {turns} (tick {req.tick}): the party is at Hobbs Cafe. {doing[:90]}"
                                      + ("?" if " asks " in f" {doing}" else "")})
        if req.purpose == "recap":
            return json.dumps({"summary": "We talked about the party at Hobbs Cafe.",
                               "view": "A friendly neighbour who likes parties.", "feeling": 3, "importance": 6})
        if req.purpose == "questions":
            return json.dumps({"questions": ["What is on my mind?", "Who do I talk to?", "What about the party?"]})
        if req.purpose == "insights":
            numbers = _enum(schema, "evidence")
            cited = numbers[:2]
            return json.dumps({"insights": [{"insight": f"An insight resting on {len(cited)} statements",
                                             "evidence": cited},
                                            {"insight": "A second insight", "evidence": numbers[-1:]}]})
        if req.purpose.startswith("probe"):
            return json.dumps({"answer": "I heard there is a party at Hobbs Cafe."})
        # a question of a phase of one's own: every text field it requires, answered
        props = schema.get("properties", {})
        return json.dumps({k: f"A scripted answer to the {req.purpose} question." for k in schema.get("required", [])
                           if props.get(k, {}).get("type") == "string"})
