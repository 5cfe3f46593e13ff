"""A test-double backend for evaluations: schema-valid answers by purpose, with known scores.

With ``perfect`` (persona name -> Big Five targets) it answers every IPIP item as a
respondent whose true levels are the targets would (rating = 1 + 4 * level, mirrored for
minus-keyed items), so a correct scoring pipeline must recover the targets to within the
rounding of the 1-5 scale. Judge verdicts come from a function of the request, so tests can
make judgements unparsable, out of range, or right only on the retry.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any


from simulation.evaluation import ipip
from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest
from simulation.testing import AnsweringBackend


def persona_name(req: LLMRequest) -> str:
    for m in req.messages:
        found = re.search(r"^Name: (.+)$", m["content"], re.MULTILINE)
        if found:
            return found.group(1).strip()
    return "?"


def is_retry(req: LLMRequest) -> bool:
    return len(req.messages) > 2


def default_verdict(req: LLMRequest) -> str:
    return "Score: 7" if req.purpose.startswith("cons_") else "Score: 4"


class EvalDouble(AnsweringBackend):
    name = "evaldouble"
    model_id = "evaldouble-v1"

    def __init__(self, perfect: dict[str, Any] | None = None, verdict: Callable[[LLMRequest], str] | None = None,
                 garbage: set[str] | None = None):
        """``garbage``: purposes (exact) answered with text that is not JSON."""
        self.perfect = perfect or {}
        self.verdict = verdict or default_verdict
        self.garbage = garbage or set()
        self.batches: list[list[LLMRequest]] = []
        self.closed = False

    def answer(self, req: LLMRequest) -> str:
        p = req.purpose
        if p in self.garbage:
            return "I am not JSON {"
        if req.options is not None:  # a rating: all the probability on what it would have written
            written = json.loads(self.answer(req.model_copy(update={"options": None, "json_schema": None})))
            picked = str(written.get("rating") or "".join(ch for ch in written.get("final_line", "") if ch.isdigit()))
            return ScoredOptions([0.0 if o == picked else None for o in req.options], exact=True).to_text()
        rng = random.Random(req.seed)
        if p.startswith("ipip"):
            item = next(i for i in ipip.items() if i.id == int(re.match(r"ipip(\d+)", p).group(1)))
            targets = self.perfect.get(persona_name(req))
            if targets is None:
                return json.dumps({"rating": rng.randint(1, 5)})
            # 1 + 4 * level, rounded up or down by a fixed dither per item, so the mean over a
            # factor's items lands close to the level rather than on the nearest whole answer
            dither = (item.id * 0.6180339887) % 1.0
            rating = min(5, max(1, int(1 + 4 * getattr(targets, item.factor) + dither)))
            return json.dumps({"rating": rating if item.sign > 0 else 6 - rating})
        if p == "pg_settings":
            items = req.json_schema["properties"]["settings"]
            enum = items["items"]["enum"] if "enum" in items["items"] else \
                next(iter(req.json_schema["$defs"].values()))["enum"]
            return json.dumps({"settings": enum[: items["minItems"]]})
        if p.startswith("pg_q_"):
            return json.dumps({"question": f"What would you do here ({p})?"})
        if p.startswith(("pg_a_", "iv_")) and not p.startswith("iv_judge"):
            return json.dumps({"answer": f"As {persona_name(req)}, I would keep calm ({p})."})
        if p.startswith(("pg_j_", "cons_", "iv_judge")):
            return json.dumps({"assessment": "Fits well enough.", "final_line": self.verdict(req)})
        if p == "backstory":
            first = persona_name(req).split()[0]
            return json.dumps({"backstory": f"{first} grew up two streets away and never saw a reason to leave town."})
        return json.dumps({})
