"""The forcedchoice suite: the IPIP-50's statements as forced choices, so agreeing with everything scores nothing.

A small model asked to rate one statement at a time agrees with every statement about as much:
the 1.5B measurement model's ratings of the 50 items varied by 0.12 (SD) within a persona, and
a persona's agreement with the plus-keyed and with the minus-keyed items correlated at r = 1.00
over 16 personas (docs/behaviour.md). That is acquiescence, a response style, not a personality;
the IPIP's balanced keying cancels it inside a factor and leaves next to nothing to measure.

A forced choice cannot be answered by agreeing: each question sets a statement that raises a
factor against one that lowers it ("I am the life of the party." / "I don't talk a lot.") and
asks which describes the person better (Brown & Maydeu-Olivares 2011 on forced-choice formats
and response styles). A factor's score is the mean, over its pairs, of the probability of
choosing the raising statement: 0-1, comparable with the persona's target. Every pair is asked
in both orders and averaged, so a habit of answering "1" cancels; and (calibrated, the default)
each order's probabilities are divided by the same question's with the persona blanked before
averaging, so a pair whose one statement is simply more pleasant to own (kind against cruel) is
scored by how far the persona moves the choice, not by its pull on the model ("Calibrate Before
Use", as the bigfive suite and the town's choices do). Raw scores are kept beside.

Pairs: within each factor, its items that raise it against those that lower it, cycling through
the shorter list (the IPIP's neuroticism has 8 against 2), so every item is asked at least once;
32 pairs, 64 questions per persona, and 64 content-free ones shared by all.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from simulation.cognition.calibrate import BLANK, calibrated
from simulation.evaluation import bigfive, ipip, prompts
from simulation.evaluation.bigfive import FactorResult
from simulation.evaluation.ipip import FACTORS
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.targets import Target

SUITE = "forcedchoice"
CHOICES = ("1", "2")
FREE = "content-free"


@dataclass(frozen=True)
class Pair:
    factor: str
    raising: ipip.Item
    lowering: ipip.Item

    def key(self) -> str:
        return f"{self.raising.id}-{self.lowering.id}"


def pairs() -> tuple[Pair, ...]:
    """Every factor's raising items set against its lowering ones, the shorter list cycled."""
    out = []
    for f in FACTORS:
        up = [i for i in ipip.items() if i.factor == f and i.sign > 0]
        down = [i for i in ipip.items() if i.factor == f and i.sign < 0]
        out += [Pair(f, up[k % len(up)], down[k % len(down)]) for k in range(max(len(up), len(down)))]
    return tuple(out)


def _messages(ctx: dict, pair: Pair, order: int) -> list[dict[str, str]]:
    first, second = (pair.raising, pair.lowering) if order == 0 else (pair.lowering, pair.raising)
    return prompts.agent_messages(ctx, "forced_choice.j2", first_statement=first.statement,
                                  second_statement=second.statement)


Baseline = list[float] | None


async def _free(session: Session, pair: Pair, order: int) -> Baseline:
    msgs = _messages({"first": BLANK, "content_free": True}, pair, order)
    rating = await session.ask_rating("agent", FREE, msgs, CHOICES, [0.0, 1.0], default=0.5,
                                      purpose=f"fc{pair.key()}_{order}_free")
    return rating.probabilities if rating.ok and not rating.sampled else None


async def _one(session: Session, t: Target, ctx: dict, pair: Pair, order: int,
               free: asyncio.Future[Baseline] | None) -> tuple[float | None, float | None, int | None]:
    """(probability of the raising statement calibrated, raw, the call id) for one order."""
    rating = await session.ask_rating("agent", t.key, _messages(ctx, pair, order), CHOICES, [0.0, 1.0], default=0.5,
                                      purpose=f"fc{pair.key()}_{order}")
    if not rating.ok or rating.sampled or not rating.probabilities:
        return None, None, rating.call_id
    raw = rating.probabilities
    baseline = await free if free is not None else None
    cal = calibrated(raw, baseline) if baseline is not None else raw
    at = 0 if order == 0 else 1  # where the raising statement stands
    return cal[at], raw[at], rating.call_id


def _mean(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return float(np.mean(got)) if got else None


async def evaluate(session: Session, t: Target, free: dict[tuple[str, int], asyncio.Future[Baseline]]) -> FactorResult:
    ctx = prompts.persona_context(t.persona, t.memories)
    asked = [(p, o) for p in pairs() for o in (0, 1)]
    got = await asyncio.gather(*(_one(session, t, ctx, p, o, free.get((p.key(), o))) for p, o in asked))
    by_pair: dict[str, dict[str, list[float | None]]] = {}
    for (p, _), (cal, raw, _) in zip(asked, got):
        entry = by_pair.setdefault(p.key(), {"cal": [], "raw": []})
        entry["cal"].append(cal)
        entry["raw"].append(raw)
    measured, details = {}, {}
    for f in FACTORS:
        mine = [p for p in pairs() if p.factor == f]
        cal = {p.key(): _mean(by_pair[p.key()]["cal"]) for p in mine}
        raw = {p.key(): _mean(by_pair[p.key()]["raw"]) for p in mine}
        measured[f] = _mean(list(cal.values()))
        details[f] = {"pairs": cal, "pairs_uncalibrated": raw, "uncalibrated": _mean(list(raw.values())),
                      "calibrated": bool(free), "missing": sum(v is None for v in cal.values())}
    result = FactorResult(t.key, measured, {f: getattr(t.persona.big_five, f) for f in FACTORS}, details)
    result.details["_calls"] = {"call_ids": [c for _, _, c in got]}
    return result


def planned(session: Session, targets: list[Target]) -> int:
    n = 2 * len(pairs())
    return n * len(targets) + (n if session.options.calibrate and targets else 0)


async def run(session: Session, targets: list[Target]) -> list[FactorResult]:
    """Every agent's pairs in both orders, and (calibrated) each ordered pair's one content-free question."""
    free: dict[tuple[str, int], asyncio.Future[Baseline]] = {}
    if session.options.calibrate and targets:
        free = {(p.key(), o): asyncio.ensure_future(_free(session, p, o)) for p in pairs() for o in (0, 1)}
    return list(await asyncio.gather(*(evaluate(session, t, free) for t in targets)))


def metrics(session: Session, targets: list[Target], results: list[FactorResult]) -> list[Metric]:
    out = []
    guess = bigfive.constant_guess(results)
    for t, r in zip(targets, results):
        out.extend(bigfive.target_metrics(SUITE, r, t, guess))
        out.append(Metric(SUITE, "missing_pairs", float(sum(r.details[f]["missing"] for f in FACTORS)), t.key,
                          t.run_id, t.agent_id, {"asked": 2 * len(pairs()), **r.details["_calls"]}))
    return out


def aggregate(session: Session, results: list[FactorResult], scope: str, run_id: str | None) -> list[Metric]:
    """As the bigfive suite's: the calibrated scores, and the raw ones beside (``uncalibrated_...``)."""
    return bigfive.aggregate_with_raw(SUITE, session, results, scope, run_id)


__all__ = ["SUITE", "Pair", "aggregate", "metrics", "pairs", "planned", "run"]
