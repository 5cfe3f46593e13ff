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

Calibrated (the default; ``--no-calibrate`` scores the raw answers, kept beside as ``p_high_raw``
and ``uncalibrated_success``): each factor's question in each order is also asked once with the lines
blanked ("N/A", Zhao et al.'s content-free input, "Calibrate Before Use", 2021), and the judge's two
probabilities are divided by that answer's before the orders are averaged. The 1.5B judge read
nearly everyone as careless (conscientiousness written high: 2 of 13 judged high, step 12's lines),
a lean that is the descriptions' pull on the judge, not the person's lines; the calibration takes
out what the judge answers with nothing to read, and leaves the order of people (the AUC) as it was.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass, field

import numpy as np

from simulation.cognition.calibrate import BLANK, calibrated
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
FREE = "content-free"
Baseline = list[float] | None
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
    """The judge's probability for the high pole, averaged over both orders (None: not scored);
    calibrated against the content-free answer unless calibration is off."""
    call_ids: list[int | None] = field(default_factory=list)
    p_high_raw: float | None = None
    """The same from the raw answers."""

    @property
    def predicted_raw(self) -> str | None:
        return _pole(self.p_high_raw)

    @property
    def truth(self) -> str | None:
        return side(self.written)

    @property
    def predicted(self) -> str | None:
        return _pole(self.p_high)

    @property
    def success(self) -> bool | None:
        if self.truth is None or self.predicted is None:
            return None
        return self.truth == self.predicted

    @property
    def success_raw(self) -> bool | None:
        if self.truth is None or self.predicted_raw is None:
            return None
        return self.truth == self.predicted_raw


def _pole(p_high: float | None) -> str | None:
    return None if p_high is None or p_high == 0.5 else ("high" if p_high > 0.5 else "low")


@dataclass
class Result:
    target: str
    lines: int
    items: list[Judged]


def _judged(targets: list[Target]) -> bool:
    return any(len(lines_of(t)) >= MIN_LINES for t in targets)


def planned(session: Session, targets: list[Target]) -> int:
    free = 2 * len(FACTORS) if session.options.calibrate and _judged(targets) else 0
    return sum(2 * len(FACTORS) for t in targets if len(lines_of(t)) >= MIN_LINES) + free


def question(lines: list[str], factor: str, order: int) -> list[dict[str, str]]:
    low, high = poles(factor)
    first, second = (low, high) if order == 0 else (high, low)
    return prompts.judge_messages("backtest_judge.j2", lines=lines, first=first, second=second)


async def _free(session: Session, factor: str, order: int) -> Baseline:
    """What the judge answers with nothing to read: the lines blanked."""
    rating = await session.ask_rating("judge", FREE, question([BLANK], factor, order), ["1", "2"], [0.0, 1.0],
                                      default=0.5, purpose=f"bt_{factor}_{order}_free")
    return rating.probabilities if rating.ok and not rating.sampled else None


def high_pole(probabilities: list[float], order: int) -> float:
    """The probability of the high pole, which stands second in order 0 and first in order 1."""
    return probabilities[1] if order == 0 else probabilities[0]


async def _factor(session: Session, t: Target, lines: list[str], factor: str,
                  free: dict[tuple[str, int], asyncio.Future[Baseline]]) -> Judged:
    cal, raw, ids = [], [], []
    for order in (0, 1):
        rating = await session.ask_rating("judge", t.key, question(lines, factor, order), ["1", "2"], [0.0, 1.0],
                                          default=0.5, purpose=f"bt_{factor}_{order}")
        ids.append(rating.call_id)
        if rating.ok and rating.probabilities:
            baseline = await free[factor, order] if (factor, order) in free else None
            raw.append(high_pole(rating.probabilities, order))
            cal.append(high_pole(calibrated(rating.probabilities, baseline), order))
    def mean(ps: list[float]) -> float | None:
        return sum(ps) / len(ps) if ps else None
    return Judged(factor, getattr(t.persona.big_five, factor), mean(cal), ids, mean(raw))


async def evaluate(session: Session, t: Target, free: dict[tuple[str, int], asyncio.Future[Baseline]]) -> Result:
    lines = lines_of(t)
    if len(lines) < MIN_LINES:
        return Result(t.key, len(lines), [])
    items = await asyncio.gather(*(_factor(session, t, lines, f, free) for f in FACTORS))
    return Result(t.key, len(lines), list(items))


async def run(session: Session, targets: list[Target]) -> list[Result]:
    """Every judged person's factors in both orders, and (calibrated) each factor's and order's one
    content-free question, shared by everyone."""
    free: dict[tuple[str, int], asyncio.Future[Baseline]] = {}
    if session.options.calibrate and _judged(targets):
        free = {(f, o): asyncio.ensure_future(_free(session, f, o)) for f in FACTORS for o in (0, 1)}
    return list(await asyncio.gather(*(evaluate(session, t, free) for t in targets)))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float | None, float | None]:
    """The Wilson score interval of k successes in n (None, None for n = 0)."""
    if n == 0:
        return None, None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _share(items: list[Judged], raw: bool = False) -> dict[str, float | int | None]:
    def success(i: Judged) -> bool | None:
        return i.success_raw if raw else i.success
    scored = [i for i in items if success(i) is not None]
    k = sum(bool(success(i)) for i in scored)
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
                "p_high_raw": i.p_high_raw, "predicted_raw": i.predicted_raw, "success_raw": i.success_raw,
                "calibrated": session.options.calibrate, "lines": r.lines, "call_ids": i.call_ids}))
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
               "people": sum(bool(r.items) for r in results), "too_few_lines": sum(not r.items for r in results),
               "calibrated": session.options.calibrate}))
    raw = _share(items, raw=True)
    out.append(Metric(SUITE, "uncalibrated_success", raw.pop("value"), None, run_id, None, {"scope": scope, **raw}))
    for f in FACTORS:
        mine = [i for i in items if i.factor == f]
        share = _share(mine)
        out.append(Metric(SUITE, f"success_{f}", share.pop("value"), None, run_id, None, {"scope": scope, **share}))
        raw = _share(mine, raw=True)
        out.append(Metric(SUITE, f"uncalibrated_success_{f}", raw.pop("value"), None, run_id, None,
                          {"scope": scope, **raw}))
        for pole in ("low", "high"):
            share = _share([i for i in mine if i.truth == pole])
            out.append(Metric(SUITE, f"success_{f}_{pole}", share.pop("value"), None, run_id, None,
                              {"scope": scope, **share}))
    return out


__all__ = ["SUITE", "Judged", "high_pole", "lines_of", "poles", "question", "run", "wilson"]
