"""The interview suite (InCharacter-style): open questions in character, factors rated by a judge.

Self-report inventories can be gamed by a model that recognises the items; an interview makes
the agent show its personality in its own words. Each question is asked in a fresh context;
the judge sees only the answers about one factor (never the persona, which would give the
answer away) and rates that factor 1-5 with anchors, rescaled to 0-1 like the inventory.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from importlib import resources
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from simulation.evaluation import prompts
from simulation.evaluation.bigfive import FactorResult, aggregate_factors, constant_guess, target_metrics
from simulation.evaluation.ipip import FACTORS
from simulation.evaluation.judging import JUDGE_TOKENS, final_line_check, judge_model, judged_score, no_judgement
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.targets import Target

SUITE = "interview"


class OpenAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    answer: Annotated[str, Field(min_length=1, max_length=300)]


@lru_cache(maxsize=1)
def questionnaire() -> dict[str, Any]:
    text = resources.files("simulation.evaluation").joinpath("data/interview.yaml").read_text("utf-8")
    return yaml.safe_load(text)["factors"]


def planned(session: Session, targets: list[Target]) -> int:
    q = questionnaire()
    return len(targets) * (sum(len(q[f]["questions"]) for f in FACTORS) + len(FACTORS))


async def _factor(session: Session, t: Target, ctx: dict, factor: str) -> tuple[str, float | None, dict]:
    spec = questionnaire()[factor]
    answers = await asyncio.gather(*(
        session.ask("agent", t.key, prompts.agent_messages(ctx, "answer.j2", setting="", question=q), OpenAnswer,
                    default=OpenAnswer(answer="-"), purpose=f"iv_{factor}_{i}", max_tokens=340)
        for i, q in enumerate(spec["questions"])))
    qa = [(q, a.value.answer if a.ok else "") for q, a in zip(spec["questions"], answers)]
    msgs = prompts.judge_messages("interview_judge.j2", factor=spec, qa=qa)
    verdict = await session.ask("judge", t.key, msgs, judge_model(1, 5), default=no_judgement(1, 5),
                                purpose=f"iv_judge_{factor}", max_tokens=JUDGE_TOKENS, check=final_line_check(1, 5))
    score = await judged_score(
        lambda m, o, v: session.ask_rating("judge", t.key, m, o, v, default=3.0, purpose=f"iv_judge_{factor}_score"),
        msgs, verdict.value, verdict.ok, 1, 5)
    details = {"score_1_5": score, "dropped": score is None, "qa": qa, "assessment": verdict.value.assessment,
               "call_ids": [a.call_id for a in answers] + [verdict.call_id]}
    return factor, None if score is None else (score - 1) / 4, details


async def evaluate(session: Session, t: Target) -> FactorResult:
    ctx = prompts.persona_context(t.persona, t.memories)
    got = await asyncio.gather(*(_factor(session, t, ctx, f) for f in FACTORS))
    return FactorResult(t.key, {f: m for f, m, _ in got}, {f: getattr(t.persona.big_five, f) for f in FACTORS},
                        {f: d for f, _, d in got})


async def run(session: Session, targets: list[Target]) -> list[FactorResult]:
    return list(await asyncio.gather(*(evaluate(session, t) for t in targets)))


def metrics(session: Session, targets: list[Target], results: list[FactorResult]) -> list[Metric]:
    out = []
    guess = constant_guess(results)
    for t, r in zip(targets, results):
        out.extend(target_metrics(SUITE, r, t, guess))
        dropped = sum(bool(r.details[f]["dropped"]) for f in FACTORS)
        out.append(Metric(SUITE, "dropped_judgements", float(dropped), t.key, t.run_id, t.agent_id,
                          {"judged": len(FACTORS)}))
    return out


def aggregate(session: Session, results: list[FactorResult], scope: str, run_id: str | None) -> list[Metric]:
    out = aggregate_factors(SUITE, results, session, scope, run_id)
    dropped = sum(bool(r.details[f]["dropped"]) for r in results for f in FACTORS)
    out.append(Metric(SUITE, "dropped_judgements", float(dropped), None, run_id, None,
                      {"scope": scope, "judged": len(results) * len(FACTORS)}))
    return out
