"""The back-test suite (PsyPlay-style): can a judge tell a persona's traits from their lines alone?

A persona is only visible in a run if what the person says differs with who they were written to
be. So a judge that never sees the persona reads one person's lines from a run (their words only,
no names, no persona, nothing from the scenario) and says, per Big Five factor, which of two
descriptions fits better: the factor's low pole or its high pole (the interview suite's anchors).
Success is naming the side of 0.5 the persona was written on.

The judge's answer is a scored choice (``LLMClient.rate``: the probabilities of "1" and "2"), asked
twice with the two descriptions in both orders and averaged, so a judge's habit of answering "1"
is not a verdict. Personas within ``NO_SIDE`` of 0.5 on a factor have no side there and are left
out of it; people who said fewer than ``MIN_LINES`` lines are left out entirely (reported).

Reported: the success share per factor, by written pole and overall, with Wilson intervals, and
beside it the share a constant guess of the more common side would get (a judge that always says
"outgoing" in a town written mostly outgoing is not reading anything). Beside the success share,
the rank AUC per factor (and its mean over the factors), with a bootstrap interval over people:
the chance that someone written high gets a higher probability of the high pole than someone
written low. A small judge leans to one side for everybody, which the success share counts as
failures on that factor's other pole; the AUC shows whether its probabilities still order people
the right way (0.5: they do not), so "the lines show nothing" and "the judge leans" are told apart.
The success share stays the goal's figure: the AUC uses the written sides of the whole group.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass, field

import numpy as np

from simulation.evaluation import prompts
from simulation.evaluation.interview import questionnaire
from simulation.evaluation.ipip import FACTORS
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.stats import bootstrap, rank_auc
from simulation.evaluation.targets import Target

SUITE = "backtest"
MAX_LINES = 30
"""Lines shown per person (spread evenly over the run when they said more)."""
MIN_LINES = 2
NO_SIDE = 0.05
"""A factor within this of 0.5 was not written to either side."""
_QUOTE = re.compile(r'^[^:"]{1,120}:\s*"(.*)"\s*$', re.S)


def lines_of(t: Target) -> list[str]:
    """The person's own words from the run: each utterance's quoted line, without who to whom."""
    out = []
    for b in t.behaviour:
        if b.kind != "utterance":
            continue
        m = _QUOTE.match(b.text)
        line = (m.group(1) if m else b.text).strip()
        if line:
            out.append(line)
    if len(out) <= MAX_LINES:
        return out
    step = len(out) / MAX_LINES
    return [out[int(i * step)] for i in range(MAX_LINES)]


def poles(factor: str) -> tuple[str, str]:
    """(low, high) descriptions of a factor, from the interview suite's anchors."""
    anchors = questionnaire()[factor]["anchors"]
    def strip(a: str) -> str:
        return re.sub(r"^very (low|high);\s*", "", a)
    return strip(anchors[0]), strip(anchors[-1])


def side(value: float) -> str | None:
    if abs(value - 0.5) < NO_SIDE:
        return None
    return "high" if value > 0.5 else "low"


@dataclass
class Judged:
    factor: str
    written: float
    p_high: float | None
    """The judge's probability for the high pole, averaged over both orders (None: not scored)."""
    call_ids: list[int | None] = field(default_factory=list)

    @property
    def truth(self) -> str | None:
        return side(self.written)

    @property
    def predicted(self) -> str | None:
        return None if self.p_high is None or self.p_high == 0.5 else ("high" if self.p_high > 0.5 else "low")

    @property
    def success(self) -> bool | None:
        if self.truth is None or self.predicted is None:
            return None
        return self.truth == self.predicted


@dataclass
class Result:
    target: str
    lines: int
    items: list[Judged]


def planned(session: Session, targets: list[Target]) -> int:
    return sum(2 * len(FACTORS) for t in targets if len(lines_of(t)) >= MIN_LINES)


async def _factor(session: Session, t: Target, lines: list[str], factor: str) -> Judged:
    low, high = poles(factor)
    ps, ids = [], []
    for order, (first, second) in enumerate(((low, high), (high, low))):
        msgs = prompts.judge_messages("backtest_judge.j2", lines=lines, first=first, second=second)
        rating = await session.ask_rating("judge", t.key, msgs, ["1", "2"], [0.0, 1.0], default=0.5,
                                          purpose=f"bt_{factor}_{order}")
        ids.append(rating.call_id)
        if rating.ok and rating.probabilities:
            p_second = rating.probabilities[1]
            ps.append(p_second if order == 0 else 1 - p_second)
    return Judged(factor, getattr(t.persona.big_five, factor), sum(ps) / len(ps) if ps else None, ids)


async def evaluate(session: Session, t: Target) -> Result:
    lines = lines_of(t)
    if len(lines) < MIN_LINES:
        return Result(t.key, len(lines), [])
    items = await asyncio.gather(*(_factor(session, t, lines, f) for f in FACTORS))
    return Result(t.key, len(lines), list(items))


async def run(session: Session, targets: list[Target]) -> list[Result]:
    return list(await asyncio.gather(*(evaluate(session, t) for t in targets)))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float | None, float | None]:
    """The Wilson score interval of k successes in n (None, None for n = 0)."""
    if n == 0:
        return None, None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _share(items: list[Judged]) -> dict[str, float | int | None]:
    scored = [i for i in items if i.success is not None]
    k = sum(bool(i.success) for i in scored)
    lo, hi = wilson(k, len(scored))
    highs = sum(i.truth == "high" for i in scored)
    guess = max(highs, len(scored) - highs) / len(scored) if scored else None
    return {"value": k / len(scored) if scored else None, "successes": k, "n": len(scored), "ci_low": lo,
            "ci_high": hi, "constant_guess": guess}


def metrics(session: Session, targets: list[Target], results: list[Result]) -> list[Metric]:
    out = []
    for t, r in zip(targets, results):
        for i in r.items:
            out.append(Metric(SUITE, f"p_high_{i.factor}", i.p_high, t.key, t.run_id, t.agent_id, {
                "written": i.written, "truth": i.truth, "predicted": i.predicted, "success": i.success,
                "lines": r.lines, "call_ids": i.call_ids}))
        out.append(Metric(SUITE, "lines", float(r.lines), t.key, t.run_id, t.agent_id,
                          {"judged": bool(r.items), "min_lines": MIN_LINES}))
    return out


def _table(results: list[Result]) -> np.ndarray:
    """One row per judged person: per factor, the probability of the high pole and 1/0 for written
    high/low (NaN where the factor has no side or was not scored)."""
    rows = []
    for r in results:
        if not r.items:
            continue
        by = {i.factor: i for i in r.items}
        row: list[float] = []
        for f in FACTORS:
            i = by.get(f)
            if i is None or i.truth is None or i.p_high is None:
                row += [math.nan, math.nan]
            else:
                row += [i.p_high, float(i.truth == "high")]
        rows.append(row)
    return np.array(rows, dtype=float).reshape(len(rows), 2 * len(FACTORS))


def _auc(data: np.ndarray, k: int) -> float | None:
    cols = data[:, 2 * k: 2 * k + 2]
    cols = cols[~np.isnan(cols).any(axis=1)]
    return rank_auc(cols[:, 0], cols[:, 1] > 0.5) if len(cols) else None


def _mean_auc(data: np.ndarray) -> float | None:
    aucs = [a for k in range(len(FACTORS)) if (a := _auc(data, k)) is not None]
    return sum(aucs) / len(aucs) if aucs else None


def aggregate(session: Session, results: list[Result], scope: str, run_id: str | None) -> list[Metric]:
    items = [i for r in results for i in r.items]
    table = _table(results)
    n_boot = session.options.bootstrap
    out = []
    est = bootstrap(table, _mean_auc, seed=session.boot_seed(SUITE, scope, "auc"), n_boot=n_boot)
    out.append(Metric(SUITE, "auc", est.value, None, run_id, None, {"scope": scope, **est.as_dict(),
                      "note": "mean over the factors of the rank AUC"}))
    for k, f in enumerate(FACTORS):
        est = bootstrap(table, lambda d, k=k: _auc(d, k), seed=session.boot_seed(SUITE, scope, "auc", f),
                        n_boot=n_boot)
        out.append(Metric(SUITE, f"auc_{f}", est.value, None, run_id, None, {"scope": scope, **est.as_dict()}))
    overall = _share(items)
    out.append(Metric(SUITE, "success", overall.pop("value"), None, run_id, None, {"scope": scope, **overall,
               "people": sum(bool(r.items) for r in results), "too_few_lines": sum(not r.items for r in results)}))
    for f in FACTORS:
        mine = [i for i in items if i.factor == f]
        share = _share(mine)
        out.append(Metric(SUITE, f"success_{f}", share.pop("value"), None, run_id, None, {"scope": scope, **share}))
        for pole in ("low", "high"):
            share = _share([i for i in mine if i.truth == pole])
            out.append(Metric(SUITE, f"success_{f}_{pole}", share.pop("value"), None, run_id, None,
                              {"scope": scope, **share}))
    return out


__all__ = ["SUITE", "lines_of", "poles", "run", "wilson"]
