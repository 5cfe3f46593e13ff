"""Running an evaluation: every requested suite over every target, in one event loop.

All suites run concurrently, so the batching client sends each round of questions of every
suite and every agent to the backend together (one batch per round), and the whole thing is
deterministic given the seed: every request's seed derives from (seed, agent, purpose, attempt).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import ModuleType
from typing import Any

from simulation.errors import InputError, Problem
from simulation.evaluation import (
    backtest,
    believability,
    bigfive,
    consistency,
    customisation,
    forcedchoice,
    interview,
    personagym,
)
from simulation.evaluation.session import SUITES, EvalOptions, Metric, Session
from simulation.evaluation.targets import Target
from simulation.llm import batching
from simulation.llm.backend import Backend
from simulation.llm.types import RawCompletion

MODULES: dict[str, ModuleType] = {
    "bigfive": bigfive, "interview": interview, "personagym": personagym, "consistency": consistency,
    "backtest": backtest, "believability": believability, "forcedchoice": forcedchoice,
    "customisation": customisation,
}
PURPOSE_PREFIX = {"ipip": "bigfive", "iv_": "interview", "pg_": "personagym", "cons_": "consistency",
                  "bt_": "backtest", "bel_": "believability", "fc": "forcedchoice",
                  "cu_": "customisation"}
RUN_ONLY = ("consistency", "backtest", "customisation")
"""Suites that read a run's logged behaviour, which only run agents have."""


def parse_suites(text: str) -> tuple[str, ...]:
    """'bigfive,personagym' -> ('bigfive', 'personagym'); unknown names are bad input."""
    names = [s.strip().lower() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SUITES]
    if unknown or not names:
        raise InputError(Problem("--suite", f"unknown suite {', '.join(map(repr, unknown)) or '(none given)'}; "
                                 f"choose from {', '.join(SUITES)}, separated by commas"))
    return tuple(dict.fromkeys(names))


def applicable(suite: str, targets: list[Target]) -> list[Target]:
    """Consistency and the back-test read logged behaviour, which only run agents have."""
    return [t for t in targets if t.run_id is not None] if suite in RUN_ONLY else list(targets)


@dataclass
class EvalResult:
    eval_id: str
    created_at: str
    options: EvalOptions
    targets: list[Target]
    metrics: list[Metric]
    calls: list[dict[str, Any]]
    agent: dict[str, str]
    judge: dict[str, str]
    wall_s: float
    skipped: dict[str, str] = field(default_factory=dict)
    suites: dict[str, list[str]] = field(default_factory=dict)
    """suite -> keys of the targets it evaluated."""
    model_notes: dict[str, str] = field(default_factory=dict)
    """"agent" / "judge" -> why that model was used (``simulation.evaluation.models``)."""

    def cost(self) -> dict[str, dict[str, float]]:
        """LLM calls, tokens and summed latency per suite, and per evaluated agent."""
        out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for c in self.calls:
            suite = next((s for p, s in PURPOSE_PREFIX.items() if c["purpose"].startswith(p)), "other")
            row = out[suite]
            row["calls"] += 1
            row["prompt_tokens"] += c["prompt_tokens"]
            row["completion_tokens"] += c["completion_tokens"]
            row["llm_s"] += c["latency_s"]
        for suite, row in out.items():
            n = max(1, len(self.suites.get(suite, [])))
            row["agents"] = float(len(self.suites.get(suite, [])))
            row["llm_s_per_agent"] = row["llm_s"] / n
            row["calls_per_agent"] = row["calls"] / n
        return {k: dict(v) for k, v in out.items()}


def _scopes(targets: list[Target]) -> list[tuple[str, str | None, list[int]]]:
    """(scope name, run id, indices): every target together, and each run on its own where that differs."""
    everyone = list(range(len(targets)))
    scopes = [("all", None, everyone)]
    runs: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(targets):
        if t.run_id:
            runs[t.run_id].append(i)
    for run_id, idx in runs.items():
        if idx == everyone:
            scopes[0] = ("all", run_id, everyone)
        else:
            scopes.append((run_id, run_id, idx))
    return scopes


def evaluate(
    targets: list[Target],
    agent: Backend,
    judge: Backend,
    options: EvalOptions,
    on_progress: Callable[[RawCompletion], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    model_notes: dict[str, str] | None = None,
) -> EvalResult:
    """Run ``options.suites`` over ``targets``; raises InputError when no suite applies to any target.

    ``model_notes``: why the agents' and the judge's models were chosen (``models.ModelChoice.why``),
    printed beside them in the report; without it the report says the caller gave the backends."""
    session = Session(agent, judge, options, on_progress)
    plan = {s: applicable(s, targets) for s in options.suites}
    skipped = {s: "needs a run directory as target (it reads logged actions and utterances)"
               for s, ts in plan.items() if not ts}
    plan = {s: ts for s, ts in plan.items() if ts}
    if not plan:
        why = "; ".join(f"{s} {reason}" for s, reason in skipped.items())
        raise InputError(Problem("--suite", f"nothing to evaluate: {why}"))
    if on_plan:
        on_plan(sum(MODULES[s].planned(session, ts) for s, ts in plan.items()))

    async def run_all() -> list[Any]:
        return list(await asyncio.gather(*(MODULES[s].run(session, ts) for s, ts in plan.items())))

    started = time.perf_counter()
    outcomes = batching.run(run_all(), name="evaluation")
    wall = time.perf_counter() - started
    metrics: list[Metric] = []
    for (suite, ts), results in zip(plan.items(), outcomes):
        module = MODULES[suite]
        metrics.extend(module.metrics(session, ts, results))
        for scope, run_id, idx in _scopes(ts):
            metrics.extend(module.aggregate(session, [results[i] for i in idx], scope, run_id))
    return EvalResult(
        eval_id=f"eval-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}",
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        options=options, targets=targets, metrics=metrics, calls=session.calls,
        agent={"backend": agent.name, "model": agent.model_id}, judge={"backend": judge.name, "model": judge.model_id},
        wall_s=wall, skipped=skipped, suites={s: [t.key for t in ts] for s, ts in plan.items()},
        model_notes=model_notes or {
            "agent": "backend given by the caller",
            "judge": "the agents' backend" if judge is agent else "backend given by the caller"},
    )
