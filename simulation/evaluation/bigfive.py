"""The bigfive suite: IPIP-50 self-ratings in character, compared with the persona's targets.

Each item is its own two-message conversation (persona as system message, one statement as
the question), so no answer can lean on an earlier one. The rating is the expected value over
the model's probabilities of answering 1 ... 5 (``simulation.llm.scoring``), not a sampled
digit: a sampled "4" was the answer to about 87 % of items whatever the persona. An item the
backend can neither score nor answer is missing, not guessed.

Calibrated (the default, ``EvalOptions.calibrate``): a model rates an item from its wording as
much as from the persona (the bundled 135M put every persona's openness at about 0.55), so each
item is also asked once with the persona blanked ("N/A", ``agent_system.j2``), and the persona's
probabilities are divided by that content-free answer before the expected value is taken
("Calibrate Before Use", Zhao et al. 2021, as the town's scored choices are:
``cognition.calibrate``). What is left is how far the persona moves the answer from the item's
pull on the model. The uncalibrated value of every item is kept beside it (``details``), and
``--no-calibrate`` scores the raw answers.
The comparison helpers here (``compare``, ``aggregate_factors``) serve the interview suite too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from simulation.cognition.calibrate import BLANK, calibrated
from simulation.evaluation import ipip, prompts
from simulation.evaluation.ipip import FACTORS
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.stats import bootstrap, cohens_kappa, kappa_undefined, majority_share, pearson, split_effect
from simulation.evaluation.targets import Target
from simulation.llm.scoring import expected

SUITE = "bigfive"


LIKERT = ("1", "2", "3", "4", "5")
VALUES = (1.0, 2.0, 3.0, 4.0, 5.0)
FREE = "content-free"
"""The call log's target of the content-free questions (one per item, shared by every agent)."""


@dataclass
class FactorResult:
    """Measured levels (0-1, None where nothing was measured) next to the targets."""

    target: str
    measured: dict[str, float | None]
    targets: dict[str, float]
    details: dict[str, dict] = field(default_factory=dict)


def side(value: float) -> str:
    """High/low split at the scale's midpoint (0.5, i.e. 3 on the 1-5 Likert scale)."""
    return "high" if value >= 0.5 else "low"


def compare(measured: dict[str, float | None], targets: dict[str, float]) -> dict[str, float | None]:
    """Mean absolute error and the share of factors on the same side as the target."""
    pairs = [(measured[f], targets[f]) for f in FACTORS if measured.get(f) is not None]
    if not pairs:
        return {"mae": None, "agreement": None}
    return {
        "mae": float(np.mean([abs(m - t) for m, t in pairs])),  # type: ignore[operator]
        "agreement": float(np.mean([side(m) == side(t) for m, t in pairs])),  # type: ignore[arg-type]
    }


def constant_guess(results: list[FactorResult]) -> dict[str, str]:
    """Per factor, the side most of the targets are on (over the agents whose factor was measured;
    a tie counts as high): the best answer that ignores the persona, the same for everybody.
    Always guessing it is the baseline an agreement has to beat."""
    guess = {}
    for f in FACTORS:
        highs = [side(r.targets[f]) == "high" for r in results if r.measured[f] is not None]
        guess[f] = "high" if 2 * sum(highs) >= len(highs) else "low"
    return guess


def target_metrics(suite: str, result: FactorResult, t: Target, guess: dict[str, str] | None = None) -> list[Metric]:
    """Per agent: each factor, MAE and agreement; with ``guess`` (``constant_guess`` over the
    evaluated agents) also the agreement that guess gets on this agent's measured factors."""
    out = []
    for f in FACTORS:
        m, goal = result.measured[f], result.targets[f]
        out.append(Metric(suite, f, m, t.key, t.run_id, t.agent_id, {
            "target": goal, "abs_error": None if m is None else abs(m - goal),
            "agree": None if m is None else side(m) == side(goal), **result.details.get(f, {})}))
    summary = compare(result.measured, result.targets)
    measured = [f for f in FACTORS if result.measured[f] is not None]
    out.append(Metric(suite, "mae", summary["mae"], t.key, t.run_id, t.agent_id, {"factors": len(measured)}))
    out.append(Metric(suite, "agreement", summary["agreement"], t.key, t.run_id, t.agent_id, {}))
    if guess is not None:
        hits = [side(result.targets[f]) == guess[f] for f in measured]
        out.append(Metric(suite, "agreement_baseline", float(np.mean(hits)) if hits else None, t.key, t.run_id,
                          t.agent_id, {"guess": guess, "factors": len(measured),
                                       "note": "constant guess: on each factor the side most evaluated agents' "
                                               "targets are on, the same for every agent"}))
    return out


def _sides(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(target is high, measured is high) of rows (target, measured)."""
    return pairs[:, 0] >= 0.5, pairs[:, 1] >= 0.5


def _kappa(pairs: np.ndarray) -> float | None:
    return cohens_kappa(*_sides(pairs))


def aggregate_factors(suite: str, results: list[FactorResult], session: Session, scope: str,
                      run_id: str | None) -> list[Metric]:
    """Across agents: MAE, per-factor agreement beside its constant-guess baseline and Cohen's
    kappa, correlation and effect size (Cohen's d of the scores of people written high on the
    factor against those written low), each with a bootstrap CI (the baseline, a property of
    the targets, without one)."""
    n_boot = session.options.bootstrap
    out = []
    per_agent = [compare(r.measured, r.targets)["mae"] for r in results]
    maes = np.array([m for m in per_agent if m is not None])
    est = bootstrap(maes, np.mean, seed=session.boot_seed(suite, scope, "mae"), n_boot=n_boot)
    out.append(Metric(suite, "mae", est.value, None, run_id, None, {"scope": scope, **est.as_dict()}))
    agree_all = []
    pooled: list[np.ndarray] = []
    guessed_right = 0
    guess = constant_guess(results)
    for f in FACTORS:
        pairs = np.array([(r.targets[f], r.measured[f]) for r in results if r.measured[f] is not None], dtype=float)
        if len(pairs) == 0:
            pairs = np.zeros((0, 2))
        pooled.append(pairs)
        target_high, measured_high = _sides(pairs)
        agree = target_high == measured_high
        agree_all.extend(agree.tolist())
        est = bootstrap(agree.astype(float), np.mean, seed=session.boot_seed(suite, scope, "agree", f), n_boot=n_boot)
        out.append(Metric(suite, f"agreement_{f}", est.value, None, run_id, None, {"scope": scope, **est.as_dict()}))
        base = majority_share(target_high)
        right = int(np.sum(target_high == (guess[f] == "high")))
        guessed_right += right
        out.append(Metric(suite, f"agreement_baseline_{f}", base, None, run_id, None, {
            "scope": scope, "value": base, "n": len(pairs), "guess": guess[f] if len(pairs) else None,
            "high": int(target_high.sum()), "low": int((~target_high).sum()),
            **({"note": "constant guess: always the side most targets are on"} if len(pairs)
               else {"note": "no measured scores"})}))
        est = bootstrap(pairs, _kappa, seed=session.boot_seed(suite, scope, "kappa", f), n_boot=n_boot)
        why = kappa_undefined(target_high, measured_high)
        note = {} if why is None else {"note": f"kappa undefined: {why}"}
        out.append(Metric(suite, f"kappa_{f}", est.value, None, run_id, None,
                          {"scope": scope, **est.as_dict(), **note}))
        est = bootstrap(pairs, lambda d: pearson(d[:, 0], d[:, 1]), seed=session.boot_seed(suite, scope, "r", f),
                        n_boot=n_boot)
        note = {} if est.value is not None else {"note": "needs 3 or more agents whose targets and scores vary"}
        out.append(Metric(suite, f"correlation_{f}", est.value, None, run_id, None,
                          {"scope": scope, **est.as_dict(), **note}))
        est = bootstrap(pairs, split_effect, seed=session.boot_seed(suite, scope, "d", f), n_boot=n_boot)
        note = {} if est.value is not None else {"note": "needs 2 or more agents written high and 2 written low"}
        out.append(Metric(suite, f"effect_{f}", est.value, None, run_id, None, {"scope": scope, **est.as_dict(), **note}))
        errors = np.abs(pairs[:, 1] - pairs[:, 0]) if len(pairs) else np.array([])
        est = bootstrap(errors, np.mean, seed=session.boot_seed(suite, scope, "mae", f), n_boot=n_boot)
        out.append(Metric(suite, f"mae_{f}", est.value, None, run_id, None, {"scope": scope, **est.as_dict()}))
    est = bootstrap(np.array(agree_all, dtype=float), np.mean, seed=session.boot_seed(suite, scope, "agree"),
                    n_boot=n_boot)
    out.append(Metric(suite, "agreement", est.value, None, run_id, None, {"scope": scope, **est.as_dict()}))
    base = guessed_right / len(agree_all) if agree_all else None
    out.append(Metric(suite, "agreement_baseline", base, None, run_id, None, {
        "scope": scope, "value": base, "n": len(agree_all), "guess": guess,
        "note": "constant guess: on each factor the side most targets are on, pooled over factors"}))
    every = np.concatenate(pooled)
    est = bootstrap(every, _kappa, seed=session.boot_seed(suite, scope, "kappa"), n_boot=n_boot)
    why = kappa_undefined(*_sides(every))
    note = {} if why is None else {"note": f"kappa undefined: {why}"}
    out.append(Metric(suite, "kappa", est.value, None, run_id, None,
                      {"scope": scope, **est.as_dict(), "pooled": "agent-factor pairs of all factors", **note}))
    return out


# --------------------------------------------------------------------------- asking


def planned(session: Session, targets: list[Target]) -> int:
    items = len(ipip.select(session.options.items))
    return items * len(targets) + (items if session.options.calibrate and targets else 0)


Baseline = list[float] | None
"""An item's content-free probabilities over 1 ... 5 (None: not asked, or no probabilities)."""


async def _free(session: Session, item: ipip.Item) -> Baseline:
    """The item asked with the persona and the name blanked: what its wording alone draws."""
    msgs = prompts.agent_messages({"first": BLANK, "content_free": True}, "ipip_item.j2", statement=item.statement)
    rating = await session.ask_rating("agent", FREE, msgs, LIKERT, VALUES, default=3.0, purpose=f"ipip{item.id}_free")
    return rating.probabilities if rating.ok and not rating.sampled else None


async def _one(session: Session, t: Target, ctx: dict, item: ipip.Item,
               free: asyncio.Future[Baseline] | None) -> tuple[int, float | None, float | None, int | None]:
    """(item id, the rating scored, the uncalibrated rating, the call id)."""
    msgs = prompts.agent_messages(ctx, "ipip_item.j2", statement=item.statement)
    rating = await session.ask_rating("agent", t.key, msgs, LIKERT, list(VALUES), default=3.0,
                                      purpose=f"ipip{item.id}")
    if not rating.ok:
        return item.id, None, None, rating.call_id
    raw = round(rating.value, 4)
    baseline = await free if free is not None else None
    if baseline is None or rating.sampled:
        return item.id, raw, raw, rating.call_id
    return item.id, round(expected(VALUES, calibrated(rating.probabilities, baseline)), 4), raw, rating.call_id


async def evaluate(session: Session, t: Target, free: dict[int, asyncio.Future[Baseline]]) -> FactorResult:
    asked = ipip.select(session.options.items)
    ctx = prompts.persona_context(t.persona, t.memories)
    got = await asyncio.gather(*(_one(session, t, ctx, item, free.get(item.id)) for item in asked))
    answers = {item_id: rating for item_id, rating, _, _ in got}
    raw = {item_id: value for item_id, _, value, _ in got}
    scores = ipip.score(answers, asked)
    raw_scores = ipip.score(raw, asked)
    details = {
        f: {"mean_1_5": s.mean, "answered": s.answered, "missing": s.missing,
            "items": {str(it.id): answers[it.id] for it in asked if it.factor == f},
            "calibrated": bool(free), "uncalibrated": raw_scores[f].scaled,
            "items_uncalibrated": {str(it.id): raw[it.id] for it in asked if it.factor == f}}
        for f, s in scores.items()
    }
    result = FactorResult(t.key, {f: s.scaled for f, s in scores.items()},
                          {f: getattr(t.persona.big_five, f) for f in FACTORS}, details)
    result.details["_calls"] = {"call_ids": [c for _, _, _, c in got]}
    return result


async def run(session: Session, targets: list[Target]) -> list[FactorResult]:
    """Every agent's items, and (calibrated) each item's one content-free question, asked together."""
    free: dict[int, asyncio.Future[Baseline]] = {}
    if session.options.calibrate and targets:
        free = {item.id: asyncio.ensure_future(_free(session, item)) for item in ipip.select(session.options.items)}
    return list(await asyncio.gather(*(evaluate(session, t, free) for t in targets)))


def metrics(session: Session, targets: list[Target], results: list[FactorResult]) -> list[Metric]:
    out = []
    guess = constant_guess(results)
    for t, r in zip(targets, results):
        out.extend(target_metrics(SUITE, r, t, guess))
        missing = sum(r.details[f]["missing"] for f in FACTORS)
        out.append(Metric(SUITE, "missing_items", float(missing), t.key, t.run_id, t.agent_id,
                          {"asked": len(ipip.select(session.options.items)), **r.details["_calls"]}))
    return out


UNCALIBRATED = "uncalibrated_"
"""Prefix of the across-agent figures of the raw answers, stored beside the calibrated ones."""


def aggregate(session: Session, results: list[FactorResult], scope: str, run_id: str | None) -> list[Metric]:
    return aggregate_with_raw(SUITE, session, results, scope, run_id)


def aggregate_with_raw(suite: str, session: Session, results: list[FactorResult], scope: str,
                       run_id: str | None) -> list[Metric]:
    """``aggregate_factors``; calibrated, also the raw answers' MAE, agreement, correlations and effect
    sizes (``uncalibrated_...``, same bootstrap resamples), so the calibration's effect is paired.
    Each factor's raw score is ``details[factor]["uncalibrated"]`` (this suite's and forcedchoice's)."""
    out = aggregate_factors(suite, results, session, scope, run_id)
    if not session.options.calibrate:
        return out
    raw = [FactorResult(r.target, {f: r.details[f]["uncalibrated"] for f in FACTORS}, r.targets) for r in results]
    for m in aggregate_factors(suite, raw, session, scope, run_id):
        if m.metric in ("mae", "agreement") or m.metric.startswith(("correlation_", "effect_")):
            out.append(Metric(suite, UNCALIBRATED + m.metric, m.value, m.target, m.run_id, m.agent_id, m.details))
    return out
