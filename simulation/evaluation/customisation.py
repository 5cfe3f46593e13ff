"""The customisation suite (SimsChat's check): can a judge tell a person's aspiration and skills
from their lines alone?

A persona's ``aspiration`` and ``skills`` (SimsChat's customisation fields) are only worth writing
if they show in what the person says. So a judge that never sees the persona reads one person's
lines from a run (their words only, as the back-test reads them: ``backtest.lines_of``) and picks,
out of four, the aspiration that fits them best; then, out of four, their skills. The other three
options are other people's of the same evaluation (the town's own aspirations, so an option is
never absurd), drawn per person by the seed; where fewer than three others have one, from
``FALLBACK``. Chance is one in four.

Position bias is taken out as the back-test takes out order: each question is asked four times,
the options rotated so each stands once in every position, and the probabilities an option got
are averaged over the four. Calibrated (the default; ``--no-calibrate`` scores the raw answers,
kept beside): each rotation is also asked with the lines blanked ("N/A"), and the judge's
probabilities divided by that answer's before they are averaged (Zhao et al.'s content-free
calibration, as in the town's own choices), so an option the judge likes whatever it reads (the
longest, the most flattering) does not win. The verdict is the option with the highest averaged
probability; success is naming the person's own. People who said fewer than ``MIN_LINES`` lines,
and people without an aspiration (or skills) written, are left out and counted.

Reported: the success share per question and pooled, with Wilson intervals, beside chance (0.25),
and the mean probability the judge gave the person's own option.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from simulation.cognition.calibrate import BLANK, calibrated
from simulation.evaluation import prompts
from simulation.evaluation.backtest import MIN_LINES, lines_of, wilson
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.targets import Target
from simulation.llm.seeds import derive_seed

SUITE = "customisation"
QUESTIONS = ("aspiration", "skills")
CHOICES = 4
CHANCE = 1 / CHOICES
FREE = "content-free"
TIE = 1e-9
FALLBACK = {
    "aspiration": (
        "to see the world before settling down",
        "to be left in peace with a good book",
        "to become rich and respected in town",
        "to raise a large and happy family",
        "to win a championship in their sport",
        "to write a novel that people remember",
    ),
    "skills": (
        "accounting, chess",
        "gardening, baking",
        "painting, photography",
        "swimming, sailing",
        "carpentry, plumbing",
        "singing, playing the guitar",
    ),
}
"""Distractors used when fewer than three other people of the evaluation have an aspiration (or skills)."""


def written(t: Target, question: str) -> str:
    """The person's own answer to ``question`` as the options show it ("" when not written)."""
    if question == "aspiration":
        return t.persona.aspiration.strip()
    return ", ".join(s.strip() for s in t.persona.skills if s.strip())


def options_for(t: Target, question: str, others: list[str], seed: int) -> list[str]:
    """The person's own answer and three distractors (other people's, else ``FALLBACK``), shuffled by
    ``seed``: the order of rotation 0."""
    own = written(t, question)
    pool = sorted({o for o in others if o and o.lower() != own.lower()})
    rng = random.Random(derive_seed(seed, SUITE, t.key, question))
    picked = rng.sample(pool, min(CHOICES - 1, len(pool)))
    spare = [o for o in FALLBACK[question] if o.lower() != own.lower() and o not in picked]
    picked += spare[: CHOICES - 1 - len(picked)]
    out = [own, *picked]
    rng.shuffle(out)
    return out


def rotated(options: list[str], r: int) -> list[str]:
    """Rotation ``r`` of the options: each option stands once in every position over the four."""
    return options[r:] + options[:r]


def messages(lines: list[str], question: str, options: list[str]) -> list[dict[str, str]]:
    """The judge's instructions, the lines (a message of their own, so the llama.cpp backend reads
    them once for every rotation and both questions), then the options."""
    head = prompts.judge_messages("customisation_lines.j2", lines=lines)
    return [*head, {"role": "user", "content": prompts.render("customisation_question.j2", question=question,
                                                              options=options)}]


@dataclass
class Judged:
    question: str
    options: list[str]
    own: int
    """Index of the person's own answer in ``options`` (rotation 0)."""
    p: list[float] | None
    """Probability per option, averaged over the rotations (calibrated unless calibration is off);
    None when the judge could not be asked."""
    p_raw: list[float] | None = None
    call_ids: list[int | None] = field(default_factory=list)

    @staticmethod
    def _pick(p: list[float] | None) -> int | None:
        """The option with the highest probability; None for a tie at the top (a judge with only a
        favourite position has the same average for every option, up to rounding)."""
        if not p:
            return None
        top = sorted(p, reverse=True)
        if top[0] - top[1] < TIE:
            return None
        return max(range(len(p)), key=p.__getitem__)

    @property
    def predicted(self) -> int | None:
        return self._pick(self.p)

    @property
    def success(self) -> bool | None:
        return None if self.predicted is None else self.predicted == self.own

    @property
    def success_raw(self) -> bool | None:
        pick = self._pick(self.p_raw)
        return None if pick is None else pick == self.own


@dataclass
class Result:
    target: str
    lines: int
    items: list[Judged]
    unwritten: list[str] = field(default_factory=list)
    """The questions this person has nothing written for."""


def _judged(t: Target) -> bool:
    return len(lines_of(t)) >= MIN_LINES and any(written(t, q) for q in QUESTIONS)


def planned(session: Session, targets: list[Target]) -> int:
    per = (2 if session.options.calibrate else 1) * CHOICES
    return sum(per for t in targets if _judged(t) for q in QUESTIONS if written(t, q))


async def _ask(session: Session, key: str, lines: list[str], question: str, options: list[str], r: int,
               purpose: str) -> tuple[list[float] | None, int | None]:
    """The judge's probabilities over the four positions of rotation ``r`` (None when it could not
    be asked or only a sampled answer came back), and the call's id."""
    rating = await session.ask_rating("judge", key, messages(lines, question, rotated(options, r)),
                                      [str(i + 1) for i in range(CHOICES)], [float(i) for i in range(CHOICES)],
                                      default=0.0, purpose=purpose)
    ok = rating.ok and not rating.sampled and bool(rating.probabilities)
    return (list(rating.probabilities) if ok else None), rating.call_id


def _unrotate(p: list[float], r: int) -> list[float]:
    """Probabilities by position in rotation ``r`` back to the options' rotation-0 order."""
    n = len(p)
    return [p[(i - r) % n] for i in range(n)]


def _mean(rows: list[list[float]]) -> list[float] | None:
    return [sum(col) / len(rows) for col in zip(*rows, strict=True)] if rows else None


async def _question(session: Session, t: Target, lines: list[str], question: str, others: list[str]) -> Judged:
    options = options_for(t, question, others, session.options.seed)
    cal, raw, ids = [], [], []
    for r in range(CHOICES):
        p, call_id = await _ask(session, t.key, lines, question, options, r, f"cu_{question}_{r}")
        ids.append(call_id)
        if p is None:
            continue
        baseline = None
        if session.options.calibrate:
            baseline, _ = await _ask(session, FREE, [BLANK], question, options, r, f"cu_{question}_{r}_free")
        raw.append(_unrotate(p, r))
        cal.append(_unrotate(calibrated(p, baseline), r))
    return Judged(question, options, options.index(written(t, question)), _mean(cal), _mean(raw), ids)


async def evaluate(session: Session, t: Target, others: dict[str, list[str]]) -> Result:
    lines = lines_of(t)
    unwritten = [q for q in QUESTIONS if not written(t, q)]
    if len(lines) < MIN_LINES:
        return Result(t.key, len(lines), [], unwritten)
    asked = [q for q in QUESTIONS if q not in unwritten]
    items = await asyncio.gather(*(_question(session, t, lines, q, others[q]) for q in asked))
    return Result(t.key, len(lines), list(items), unwritten)


async def run(session: Session, targets: list[Target]) -> list[Result]:
    """Every person with lines and something written, both questions in four rotations (and their
    content-free versions, calibrated). The distractors come from the other people's answers."""
    others = {q: [written(t, q) for t in targets] for q in QUESTIONS}
    return list(await asyncio.gather(*(evaluate(session, t, others) for t in targets)))


def metrics(session: Session, targets: list[Target], results: list[Result]) -> list[Metric]:
    out = []
    for t, r in zip(targets, results, strict=True):
        for i in r.items:
            out.append(Metric(SUITE, f"p_own_{i.question}", i.p[i.own] if i.p else None, t.key, t.run_id,
                              t.agent_id, {"options": i.options, "own": i.own, "predicted": i.predicted,
                                           "success": i.success, "p": i.p, "p_raw": i.p_raw,
                                           "success_raw": i.success_raw, "calibrated": session.options.calibrate,
                                           "lines": r.lines, "call_ids": i.call_ids}))
        out.append(Metric(SUITE, "lines", float(r.lines), t.key, t.run_id, t.agent_id,
                          {"judged": bool(r.items), "min_lines": MIN_LINES, "unwritten": r.unwritten}))
    return out


def _share(items: list[Judged], raw: bool = False) -> dict[str, float | int | None]:
    scored = [s for i in items if (s := (i.success_raw if raw else i.success)) is not None]
    k = sum(scored)
    lo, hi = wilson(k, len(scored))
    return {"value": k / len(scored) if scored else None, "successes": k, "n": len(scored), "ci_low": lo,
            "ci_high": hi, "chance": CHANCE}


def aggregate(session: Session, results: list[Result], scope: str, run_id: str | None) -> list[Metric]:
    items = [i for r in results for i in r.items]
    out = []
    for name, mine in (("success", items), *((f"success_{q}", [i for i in items if i.question == q])
                                             for q in QUESTIONS)):
        share = _share(mine)
        details: dict[str, object] = {"scope": scope, **share}
        if name == "success":
            details |= {"people": sum(bool(r.items) for r in results),
                        "too_few_lines": sum(len(r.items) == 0 and r.lines < MIN_LINES for r in results),
                        "unwritten": {q: sum(q in r.unwritten for r in results) for q in QUESTIONS},
                        "calibrated": session.options.calibrate}
        out.append(Metric(SUITE, name, details.pop("value"), None, run_id, None, details))  # type: ignore[arg-type]
        raw = _share(mine, raw=True)
        out.append(Metric(SUITE, f"uncalibrated_{name}", raw.pop("value"), None, run_id, None,
                          {"scope": scope, **raw}))
    for q in QUESTIONS:
        owns = [i.p[i.own] for i in items if i.question == q and i.p]
        out.append(Metric(SUITE, f"p_own_{q}", sum(owns) / len(owns) if owns else None, None, run_id, None,
                          {"scope": scope, "n": len(owns), "chance": CHANCE,
                           "note": "mean probability the judge gave the person's own option"}))
    return out


__all__ = ["CHANCE", "FALLBACK", "QUESTIONS", "SUITE", "Judged", "messages", "options_for", "rotated", "run"]
