"""A scripted test-double backend: schema-valid answers by purpose, with no model at all.

Every answer is a function of the request alone (its ``purpose``, ``json_schema``, ``options``,
``seed``, ``tick``), so a run on the double is reproducible per seed, a resumed run gets the same
answers as an uninterrupted one, and a replay cache or a fresh double per request changes
nothing. What it answers:

* ``importance`` (a rating): 8 for a memory that mentions a party, else 3 (``importance``), with
  all the probability on that option; any other rating: an option picked with the seed.
* ``aim`` (a conversation's next move): a goodbye as line ``end_after``, else a move of
  ``prefer``, else any other move, picked with the seed (``ScriptedBackend.aim``).
* ``plan``: every other hour from now, a choice picked with the seed (the schema's enums).
* ``react`` (a choice, then for a reaction what the person does): ``react`` when someone can be
  talked to ("talk" by default), else ``react_alone``; the detail "going over to have a look".
* ``seek`` (whether to go and find someone to tell them news, a yes-or-no question): "No", or
  with ``seek=True`` "Yes".
* ``go`` (whether to take up the story director's offer, a yes-or-no question): "Yes", or with
  ``go=False`` "No".
* ``utterance``: a numbered line about the party, then the question's own example line for the
  chosen move (so it does what the move is for: tells the news, asks with a "?").
* ``recap``, ``questions``, ``insights`` (citing the schema's statement numbers), ``probe*``:
  fixed answers that mention the party at Hobbs Cafe.
* any other purpose (a phase of one's own): ``answers[purpose]`` when given, else a value for
  every field the schema requires (strings: "A scripted answer to the <purpose> question.").

The request carries no conversation, no option labels and no memory text, and the double keeps
no state (a resumed run, a replay cache, or a fresh double per HTTP request must get the same
answers), so four facts are read from the question, each by one documented function and never
by a template's sentences: the memory an importance question rates (its ``<memory>`` data block,
``shown``); what each numbered move option stands for (the ``<choices>`` block, each label
recognised by the engine's own option wording, ``cognition.aims.option_text``: ``move_of``); how
many lines the conversation has had (the list its ``<situation>`` block ends with,
``conversation_lines``); and the example answer an utterance question shows (the JSON object in
it that has the schema's fields, ``example_answer``). tests/test_testing.py rewords every
question of a run and checks that no answer changes.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from simulation.cognition.aims import option_text
from simulation.cognition.prompts import DATA_TAGS
from simulation.cognition.react import CONTINUE, LABELS, TALK
from simulation.cognition.yesno import NO, YES
from simulation.core import Aim, Move, Purpose
from simulation.llm.backend import OnDone
from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest, RawCompletion, asked

__all__ = ["AnsweringBackend", "ScriptedBackend", "conversation_lines", "decision_of", "enum_values",
           "example_answer", "fill", "move_of", "option_labels", "shown"]


# ----------------------------------------------------------------------------- the answer's schema


def _defs(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [schema, *schema.get("$defs", {}).values()]


def _prop(schema: dict[str, Any], name: str) -> dict[str, Any]:
    for definition in _defs(schema):
        prop = definition.get("properties", {}).get(name)
        if prop is not None:
            return prop
    raise KeyError(name)


def enum_values(schema: dict[str, Any], name: str) -> list[Any]:
    """The values a field of an answer's schema (or its list's items) may take, e.g. a plan's hours."""
    prop = _prop(schema, name)
    if "const" in prop:  # a Literal of one value
        return [prop["const"]]
    return prop["enum"] if "enum" in prop else prop["items"]["enum"]


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(schema, schema.get("$defs", {})[ref.split("/")[-1]])
    return node


def fill(schema: dict[str, Any], text: str, node: dict[str, Any] | None = None) -> Any:
    """A value valid under ``node`` (default: the whole ``schema``): every required field, strings
    ``text`` (cut or padded to the allowed length), numbers in the middle of their bounds, the
    first of an enum, one item of a list (or its ``minItems``)."""
    node = _resolve(schema, schema if node is None else node)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return node["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if node.get(key):
            branches = [b for b in node[key] if _resolve(schema, b).get("type") != "null"] or node[key]
            return fill(schema, text, branches[0])
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in node):
        props = node.get("properties", {})
        return {k: fill(schema, text, props.get(k, {})) for k in node.get("required", list(props))}
    if kind == "array":
        return [fill(schema, text, node.get("items", {})) for _ in range(max(1, node.get("minItems", 1)))]
    if kind in ("integer", "number"):
        lo = node.get("minimum", node.get("exclusiveMinimum", 0))
        hi = node.get("maximum", node.get("exclusiveMaximum", lo + 2))
        middle = (lo + hi) / 2
        return int(middle) if kind == "integer" else middle
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    words = text[: node.get("maxLength", len(text))]
    return words + "." * max(0, node.get("minLength", 0) - len(words))


# ----------------------------------------------------------------------------- what only the prompt holds

_BLOCK = re.compile(r"<(?P<tag>[a-z]+)>\n?(?P<body>.*?)\n?</(?P=tag)>", re.DOTALL)


def shown(req: LLMRequest, tag: str) -> list[str]:
    """The contents of the ``<tag>`` data blocks of the request's question (the user messages of
    its last turn, ``llm.types.asked``), in order. These blocks hold the data a prompt shows
    (``cognition.prompts.DATA_TAGS``); no text inserted into a prompt can open or close one
    (``templating.neutralise``), so they are read by their tags, never by a template's wording."""
    if tag not in DATA_TAGS:
        raise ValueError(f"{tag!r} is not a data block of a cognition prompt ({', '.join(DATA_TAGS)})")
    return [m.group("body") for m in _BLOCK.finditer(asked(req.messages)) if m.group("tag") == tag]


def conversation_lines(req: LLMRequest) -> int:
    """How many lines of its conversation a move or utterance question shows: the list its (first)
    ``<situation>`` block ends with ("- " items; 0 when the block ends with none). The request
    carries no conversation id or turn, and the double keeps no state (a resumed run, a replay
    cache or a fresh double per request must get the same answers), so the prompt is the only
    place this is held. The engine shows at most the last ``converse.DIALOGUE_LINES``."""
    situations = shown(req, "situation")
    if not situations:
        return 0
    lines = situations[0].splitlines()
    n = 0
    while n < len(lines) and lines[len(lines) - 1 - n].startswith("- "):
        n += 1
    return n


@cache
def _option_heads() -> tuple[tuple[str, Aim], ...]:
    """Each move's option text up to its first variable part, from the engine's own wording
    (``aims.option_text``), longest first: "say goodbye to " is ``end``, "invite " is ``invite``."""
    blank = "\x00"
    heads = []
    for aim in Aim:
        text = option_text(Move(aim, "plans" if aim == Aim.ASK else blank), blank, blank).split(blank)[0]
        if text:
            heads.append((text, aim))
    return tuple(sorted(heads, key=lambda h: -len(h[0])))


def move_of(label: str) -> Aim | None:
    """The move an option of a move question stands for (its label in the ``<choices>`` block)."""
    return next((aim for head, aim in _option_heads() if label.startswith(head)), None)


def option_labels(req: LLMRequest) -> dict[str, str]:
    """Each option of a choice question (its number) and its words: the request carries only the
    numbers; what each is, is the numbered list of its ``<choices>`` block."""
    blocks = shown(req, "choices")
    labels = [line.split(". ", 1)[-1] for line in (blocks[-1].splitlines() if blocks else []) if line.strip()]
    return {o: (labels[i] if i < len(labels) else "") for i, o in enumerate(req.options or [])}


def _choices(req: LLMRequest) -> dict[str, Aim | None]:
    """Each option of a move question (its number) and the move it stands for."""
    return {o: move_of(label) for o, label in option_labels(req).items()}


def decision_of(label: str) -> str | None:
    """The decision an option of a reaction question stands for (``react.LABELS``)."""
    return next((d for d, head in LABELS.items() if label.startswith(head)), None)


def example_answer(req: LLMRequest) -> dict[str, Any] | None:
    """The engine's own answer to the question: its unseen script (``LLMRequest.script``: a line
    that does the chosen move), else the example the question shows (the last JSON object in it
    holding every field the answer's schema requires), or None."""
    if req.script is not None:
        return json.loads(req.script)
    text = asked(req.messages)
    required = set((req.json_schema or {}).get("required", []))
    decoder = json.JSONDecoder()
    for start in reversed([m.start() for m in re.finditer(r"\{", text)]):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and required <= set(value):
            return value
    return None


# ----------------------------------------------------------------------------- the backends


class AnsweringBackend:
    """A test-double backend: ``answer(request)`` gives each text; records every batch it was handed
    (``batches``) and whether it was closed."""

    name = "answering"
    model_id = "answering-v1"
    batches: list[list[LLMRequest]]
    closed: bool

    def answer(self, req: LLMRequest) -> str:
        raise NotImplementedError

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        if not hasattr(self, "batches"):
            self.batches = []
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


Scripted = Callable[[LLMRequest], Any] | Mapping[str, Any] | str


class ScriptedBackend(AnsweringBackend):
    """Test your own phases with ``ScriptedBackend``: a backend that answers every question the
    engine asks, by purpose and schema, with no model, deterministically per seed::

        from simulation import Simulation
        from simulation.testing import ScriptedBackend

        backend = ScriptedBackend(answers={"gossip": {"answer": "The juggler is at the square."}})
        with Simulation.from_yaml("town.yaml", backend=backend, out="runs", ticks=12) as sim:
            sim.run()
        assert any(r.purpose == "gossip" for batch in backend.batches for r in batch)

    ``answers``: what a purpose of one's own is answered (a dict, sent as JSON; a string, sent as
    is; or a function of the ``LLMRequest`` returning either); without it, every field the schema
    requires gets a valid value. ``garbage``: purposes answered with invalid JSON (to exercise
    retries and safe defaults). ``talk``/``react``/``react_alone``: the reaction's decision with and
    without someone to talk to. ``seek``: whether a person asked to go and find someone with news
    sets out ("Yes") or carries on ("No", the default). ``go``: whether a person the director offers an
    errand to takes it up ("Yes", the default). ``end_after``: the conversation line that says goodbye.
    ``prefer``: moves (``core.Aim`` values, e.g. ``("invite", "accept")``) chosen whenever offered.
    ``importance``: a memory's text to its rating (1-10). ``batches`` holds every batch asked.
    """

    name = "scripted"
    model_id = "scripted-v1"

    def __init__(self, garbage: set[str] | None = None, talk: bool = True, end_after: int = 4,
                 react: str | None = None, react_alone: str = "continue",
                 importance: Callable[[str], int] | None = None, prefer: Sequence[str] = (),
                 answers: Mapping[str, Scripted] | None = None, seek: bool = False, go: bool = True):
        unknown = [p for p in prefer if p not in {a.value for a in Aim}]
        if unknown:
            raise ValueError(f"prefer names moves ({', '.join(a.value for a in Aim)}), not {unknown}")
        self.garbage = set(garbage or ())
        self.react = react or ("talk" if talk else "continue")
        self.react_alone = react_alone
        self.seek = seek
        self.go = go
        self.end_after = end_after
        self.prefer = tuple(prefer)
        self.importance = importance or (lambda text: 8 if "party" in text.lower() else 3)
        self.answers = dict(answers or {})
        self.batches: list[list[LLMRequest]] = []
        self.closed = False

    # ------------------------------------------------------------------ scored options

    def choose(self, req: LLMRequest) -> str:
        """The option a scored question puts all the probability on: a move (``aim``), an
        importance by the memory's words (``importance``), anything else picked with the seed."""
        options = list(req.options or [])
        if req.purpose == Purpose.AIM:
            return self.aim(req, random.Random(req.seed))
        if req.purpose == Purpose.REACT:
            decisions = {decision_of(label): o for o, label in option_labels(req).items()}
            wanted = self.react if TALK in decisions else self.react_alone
            return decisions.get(wanted, options[0])
        if req.purpose == Purpose.SEEK:
            return YES if self.seek else NO
        if req.purpose == Purpose.GO:
            return YES if self.go else NO
        if req.purpose == Purpose.IMPORTANCE:
            memories = shown(req, "memory")
            if memories and str(self.importance(memories[-1])) in options:
                return str(self.importance(memories[-1]))
        return random.Random(req.seed).choice(options)

    def aim(self, req: LLMRequest, rng: random.Random) -> str:
        """A conversation's next move: goodbye as line ``end_after`` (or the first line after it where
        goodbye is offered), else the first option that is a move of ``prefer``, else any other
        option, picked with the seed (none that must be answered just before the goodbye)."""
        moves = _choices(req)
        goodbye = [o for o, aim in moves.items() if aim == Aim.END]
        others = [o for o in moves if o not in goodbye]
        said = conversation_lines(req)
        if goodbye and (said + 1 >= self.end_after or not others):
            return goodbye[0]
        for preferred in self.prefer:
            for o in others:
                if moves[o] == preferred:
                    return o
        if said + 2 >= self.end_after:
            open_ended = [o for o in others if moves[o] not in (Aim.ASK, Aim.INVITE)]
            others = open_ended or others
        return rng.choice(others)

    # ------------------------------------------------------------------ written answers

    def _scripted(self, req: LLMRequest) -> str:
        given = self.answers[req.purpose]
        value = given(req) if callable(given) else given
        return value if isinstance(value, str) else json.dumps(value)

    def answer(self, req: LLMRequest) -> str:
        if req.purpose in self.garbage:
            return "I am not JSON {"
        if req.options is not None:
            picked = self.choose(req)
            return ScoredOptions([0.0 if o == picked else None for o in req.options], exact=True).to_text()
        if req.purpose in self.answers:
            return self._scripted(req)
        rng = random.Random(req.seed)
        schema = req.json_schema or {}
        if req.purpose == Purpose.PLAN:
            numbers, hours = enum_values(schema, "choice"), enum_values(schema, "hour")
            start = rng.randrange(min(2, len(hours)))
            plan = [{"hour": hours[j], "choice": rng.choice(numbers)} for j in range(start, len(hours), 2)][:4]
            answer: dict[str, Any] = {"plan": plan}
            if "yesterday" in schema.get("properties", {}):
                answer = {"yesterday": "A busy day of errands and talk about the party.", **answer}
            return json.dumps(answer)
        if req.purpose == Purpose.REACT:
            return json.dumps({"detail": "going over to have a look"})
        if req.purpose == Purpose.UTTERANCE:
            return json.dumps({"say": self.utterance(req)})
        if req.purpose == Purpose.RECAP:
            return json.dumps({"summary": "We talked about the party at Hobbs Cafe.",
                               "view": "A friendly neighbour who likes parties.", "feeling": 3, "importance": 6})
        if req.purpose == Purpose.QUESTIONS:
            return json.dumps({"questions": ["What is on my mind?", "Who do I talk to?", "What about the party?"]})
        if req.purpose == Purpose.INSIGHTS:
            numbers = enum_values(schema, "evidence")
            cited = numbers[:2]
            return json.dumps({"insights": [{"insight": f"An insight resting on {len(cited)} statements",
                                             "evidence": cited},
                                            {"insight": "A second insight", "evidence": numbers[-1:]}]})
        if req.purpose.startswith(Purpose.PROBE):
            return json.dumps({"answer": "I heard there is a party at Hobbs Cafe."})
        # a question of a phase of one's own: every field it requires, answered
        return json.dumps(fill(schema, f"A scripted answer to the {req.purpose} question.")) if schema else \
            f"A scripted answer to the {req.purpose} question."

    def utterance(self, req: LLMRequest) -> str:
        """A conversation line: its number and tick (so no two lines are alike), the party, and the
        example line the question shows for the chosen move (cut to fit the schema's length)."""
        example = example_answer(req) or {}
        line = (f"Line {conversation_lines(req) + 1} (tick {req.tick}): the party is at Hobbs Cafe. "
                f"{str(example.get('say', ''))}").strip()
        try:
            limit = _prop(req.json_schema or {}, "say").get("maxLength", 160)
        except KeyError:
            limit = 160
        if len(line) > limit:  # cut, keeping a question's "?"
            end = "?" if line.endswith("?") else ""
            line = line[: limit - len(end)].rstrip() + end
        return line
