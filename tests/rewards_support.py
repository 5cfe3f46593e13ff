"""A test-double judge for rewards: rubric scores, critiques and peer scores that tests choose.

``scores(request) -> dict`` gives a judgement's four item scores (default: fixed per turn kind,
so tests can compute the rewards by hand); ``peer(request) -> str`` the scorer's final line;
``garbage(request) -> bool`` makes an answer unparsable (not JSON), e.g. only on the first attempt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from eval_support import EvalDouble

from simulation.llm.types import LLMRequest

KIND_SCORES = {"utterance": (5, 4, 4, 3), "action": (3, 3, 2, 2)}
"""Default item scores (in_character, goals, responsive, plausible) by the kind of turn judged."""


def judged_text(req: LLMRequest) -> str:
    """The line or decision a judge / critic / scorer request is about (its <response> block)."""
    found = re.search(r"<response>\n(.*?)\n</response>", req.messages[1]["content"], re.DOTALL)
    return found.group(1) if found else ""


def judged_kind(req: LLMRequest) -> str:
    """``utterance`` for a line (purpose ``rw_judge_uID``), ``action`` for a decided action or reaction."""
    return "utterance" if req.purpose.startswith("rw_judge_u") else "action"


def is_retry(req: LLMRequest) -> bool:
    return len(req.messages) > 2


def default_scores(req: LLMRequest) -> dict[str, int]:
    return dict(zip(("in_character", "goals", "responsive", "plausible"), KIND_SCORES[judged_kind(req)]))


class JudgeDouble(EvalDouble):
    """Batches are recorded and answered by ``answer`` (``generate`` and ``close`` are EvalDouble's)."""

    name = "judgedouble"
    model_id = "judgedouble-v1"

    def __init__(self, scores: Callable[[LLMRequest], dict[str, int]] | None = None,
                 peer: Callable[[LLMRequest], str] | None = None,
                 garbage: Callable[[LLMRequest], bool] | None = None):
        self.scores = scores or default_scores
        self.peer = peer or (lambda req: "Score: 4")
        self.garbage = garbage or (lambda req: False)
        self.batches: list[list[LLMRequest]] = []
        self.closed = False

    def answer(self, req: LLMRequest) -> str:
        if self.garbage(req):
            return "I am not JSON {"
        if req.purpose.startswith(("rw_judge_", "rw_fresh")):
            return json.dumps(self.scores(req))
        if req.purpose.startswith("rw_critic_"):
            return json.dumps({"critique": "It does not answer what was said."})
        if req.purpose.startswith("rw_score_"):
            return json.dumps({"assessment": "Reasonable.", "final_line": self.peer(req)})
        return json.dumps({})


def finished_scripted_run(loaded, out, ticks: int):
    """A finished run of ``loaded`` on the scripted backend (simulation.testing): its directory."""
    from simulation.testing import ScriptedBackend

    from simulation import Simulation

    run = Simulation.from_scenario(loaded, backend=ScriptedBackend(), out=out, ticks=ticks)
    for _ in range(run.ticks):
        run.model.step()
    run.close("finished")
    run.store.close()
    return run.run_dir
