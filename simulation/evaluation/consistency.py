"""The consistency suite: a run's logged behaviour judged against each agent's persona.

TinyTroupe-style propositions: for each selected action, move or utterance the judge scores
"this person acts and speaks in character here" from 0 (contradicts the persona) to 9
(unmistakably them). Repeats of the same ongoing action are judged once; at most
``max_items`` items per agent are judged, spread evenly over the run, so long runs cost a
bounded number of calls. Scores are reported per agent and per game hour.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from simulation.evaluation import prompts
from simulation.evaluation.judging import JUDGE_TOKENS, final_line_check, judge_model, judged_score, no_judgement
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.stats import bootstrap
from simulation.evaluation.targets import Behaviour, Target

SUITE = "consistency"
_WHAT = {"action": "doing", "move": "going somewhere", "utterance": "saying"}


def select(behaviour: list[Behaviour], limit: int) -> list[Behaviour]:
    """Distinct consecutive behaviour (an action logged every tick counts once), evenly thinned to ``limit``."""
    distinct: list[Behaviour] = []
    for b in behaviour:
        if distinct and b.kind != "utterance" and distinct[-1].kind == b.kind and distinct[-1].text == b.text:
            continue
        distinct.append(b)
    if len(distinct) <= limit:
        return distinct
    picks = sorted({int(round(x)) for x in np.linspace(0, len(distinct) - 1, limit)})
    return [distinct[i] for i in picks]


@dataclass
class Judged:
    event_id: int
    tick: int
    sim_time: str
    kind: str
    text: str
    score: float | None
    assessment: str
    call_id: int | None


@dataclass
class Result:
    target: str
    items: list[Judged] = field(default_factory=list)

    def scores(self) -> list[int]:
        return [i.score for i in self.items if i.score is not None]

    def mean(self) -> float | None:
        return float(np.mean(self.scores())) if self.scores() else None

    def by_hour(self) -> dict[str, float]:
        """Mean score per game hour ('YYYY-MM-DD HH')."""
        hours: dict[str, list[int]] = defaultdict(list)
        for i in self.items:
            if i.score is not None:
                hours[i.sim_time[:13]].append(i.score)
        return {h: float(np.mean(v)) for h, v in sorted(hours.items())}

    @property
    def dropped(self) -> int:
        return sum(i.score is None for i in self.items)


def planned(session: Session, targets: list[Target]) -> int:
    return sum(len(select(t.behaviour, session.options.max_items)) for t in targets)


async def _judge(session: Session, t: Target, ctx: dict, b: Behaviour) -> Judged:
    msgs = prompts.judge_messages("consistency_judge.j2", **ctx, when=f"at {b.sim_time}",
                                  what=_WHAT.get(b.kind, b.kind), text=b.text)
    verdict = await session.ask("judge", t.key, msgs, judge_model(0, 9), default=no_judgement(0, 9),
                                purpose=f"cons_{b.event_id}", max_tokens=JUDGE_TOKENS, check=final_line_check(0, 9))
    score = await judged_score(
        lambda m, o, v: session.ask_rating("judge", t.key, m, o, v, default=4.5, purpose=f"cons_{b.event_id}_score"),
        msgs, verdict.value, verdict.ok, 0, 9)
    return Judged(b.event_id, b.tick, b.sim_time, b.kind, b.text, score, verdict.value.assessment, verdict.call_id)


async def evaluate(session: Session, t: Target) -> Result:
    ctx = prompts.persona_context(t.persona)  # the persona as written: the run's memories are what is judged
    items = await asyncio.gather(*(_judge(session, t, ctx, b) for b in select(t.behaviour, session.options.max_items)))
    return Result(t.key, list(items))


async def run(session: Session, targets: list[Target]) -> list[Result]:
    return list(await asyncio.gather(*(evaluate(session, t) for t in targets)))


def metrics(session: Session, targets: list[Target], results: list[Result]) -> list[Metric]:
    out = []
    for t, r in zip(targets, results):
        out.append(Metric(SUITE, "mean", r.mean(), t.key, t.run_id, t.agent_id, {
            "scale": "0-9", "judged": len(r.items), "logged": len(t.behaviour), "by_hour": r.by_hour(),
            "items": [vars(i) for i in r.items]}))
        out.append(Metric(SUITE, "dropped_judgements", float(r.dropped), t.key, t.run_id, t.agent_id,
                          {"judged": len(r.items)}))
    return out


def aggregate(session: Session, results: list[Result], scope: str, run_id: str | None) -> list[Metric]:
    means = np.array([m for r in results if (m := r.mean()) is not None])
    est = bootstrap(means, np.mean, seed=session.boot_seed(SUITE, scope, "mean"), n_boot=session.options.bootstrap)
    hours: dict[str, list[float]] = defaultdict(list)
    for r in results:
        for h, v in r.by_hour().items():
            hours[h].append(v)
    return [
        Metric(SUITE, "mean", est.value, None, run_id, None, {
            "scope": scope, "scale": "0-9", **est.as_dict(),
            "by_hour": {h: float(np.mean(v)) for h, v in sorted(hours.items())}}),
        Metric(SUITE, "dropped_judgements", float(sum(r.dropped for r in results)), None, run_id, None,
               {"scope": scope, "judged": sum(len(r.items) for r in results)}),
    ]
