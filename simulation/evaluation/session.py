"""What every suite shares: the agent and judge clients, the call log, options, metric rows.

Every LLM attempt (agent or judge) becomes a call-log row, written to eval.db's ``llm_calls``,
so each score can be traced to the exact prompts and completions behind it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from simulation.llm.backend import Backend
from simulation.llm.client import Answer, LLMClient, Rating
from simulation.llm.seeds import derive_seed
from simulation.llm.types import CallRecord, RawCompletion

T = TypeVar("T", bound=BaseModel)

SUITES = ("bigfive", "forcedchoice", "interview", "personagym", "consistency", "backtest", "believability",
          "customisation")


@dataclass
class EvalOptions:
    suites: tuple[str, ...] = ("bigfive",)
    seed: int = 0
    items: int | None = None
    """IPIP items asked per agent (None = all 50; the first n, balanced over factors for multiples of 5)."""
    calibrate: bool = True
    """bigfive and forcedchoice: divide each item's probabilities by those of the item asked with the
    persona blanked (its content-free answer, one per item) before the expected value; backtest: each
    judgement's (and customisation's) by the judge's answer with the lines blanked; False scores the raw answers."""
    settings: int = 2
    """PersonaGym settings per agent."""
    questions: int = 1
    """PersonaGym questions per task and setting."""
    max_items: int = 12
    """Consistency: logged actions and utterances judged per agent (spread evenly over the run)."""
    bootstrap: int = 1000
    temperature: float = 0.7
    judge_temperature: float = 0.0


@dataclass
class Metric:
    """One number: a row of the ``evaluations`` table (target None = an aggregate over agents)."""

    suite: str
    metric: str
    value: float | None
    target: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"target": self.target, "run_id": self.run_id, "agent_id": self.agent_id, "suite": self.suite,
                "metric": self.metric, "value": self.value, "details": self.details}


class Session:
    """The two clients of one evaluation and the log of every call they made."""

    def __init__(self, agent: Backend, judge: Backend, options: EvalOptions,
                 on_progress: Callable[[RawCompletion], None] | None = None):
        self.options = options
        self.calls: list[dict[str, Any]] = []
        # Each question sets its own max_tokens from its schema's longest string (see judging.JUDGE_TOKENS).
        self.agent = LLMClient(agent, run_seed=options.seed, temperature=options.temperature, max_tokens=512,
                               on_call=self._recorder("agent"), on_progress=on_progress)
        self.judge = LLMClient(judge, run_seed=options.seed, temperature=options.judge_temperature, max_tokens=512,
                               on_call=self._recorder("judge"), on_progress=on_progress)

    def _recorder(self, role: str) -> Callable[[CallRecord], int]:
        def record(rec: CallRecord) -> int:
            req, c = rec.request, rec.completion
            call_id = len(self.calls) + 1
            self.calls.append({
                "id": call_id, "role": role, "target": req.agent_id, "purpose": req.purpose,
                "backend": rec.backend, "model": rec.model, "attempt": rec.attempt, "seed": req.seed,
                "temperature": req.temperature, "max_tokens": req.max_tokens,
                "messages": json.dumps(req.messages, ensure_ascii=False),
                "json_schema": json.dumps(req.json_schema, ensure_ascii=False),
                "options": json.dumps(req.options, ensure_ascii=False) if req.options is not None else None,
                "completion": c.text,
                "finish_reason": c.finish_reason, "parse_ok": int(rec.parse_ok), "parse_error": rec.parse_error,
                "fallback": int(rec.fallback), "cache_hit": int(getattr(rec, "cache_hit", False)),
                "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens, "latency_s": c.latency_s,
            })
            return call_id

        return record

    async def ask(self, who: str, target: str, messages: list[dict[str, str]], model: type[T], *, default: T,
                  purpose: str, max_tokens: int, check: Callable[[T], str | None] | None = None) -> Answer[T]:
        client = self.agent if who == "agent" else self.judge
        return await client.ask(messages, model, default=default, purpose=purpose, agent_id=target, tick=None,
                                max_tokens=max_tokens, check=check)

    async def ask_rating(self, who: str, target: str, messages: list[dict[str, str]], options: Sequence[str],
                         values: Sequence[float], *, default: float, purpose: str) -> Rating:
        """A rating as the expected value over the options' probabilities (``simulation.llm.scoring``)."""
        client = self.agent if who == "agent" else self.judge
        return await client.rate(messages, options, values, default=default, purpose=purpose, agent_id=target,
                                 tick=None)

    def boot_seed(self, *parts: object) -> int:
        """A bootstrap seed per statistic: deterministic, and independent between statistics."""
        return derive_seed(self.options.seed, "bootstrap", *parts)
