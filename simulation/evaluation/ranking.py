"""Ranking conditions by how believable their agents' interview answers are (Generative Agents,
section 6.2): a judge compares the answers pairwise, and a Bradley–Terry model turns the
comparisons into one strength per condition, with bootstrap intervals.

Generative Agents had human judges rank, for each agent, the answers of the full architecture,
of three ablations and of a human author, and fitted TrueSkill ratings. Here each condition is a
``believability`` evaluation of a run (or several runs) made under that condition (full cognition,
no reflection, ...). For every agent found in all of them and every question, each pair of
conditions' answers is shown to the judge with the persona: "which is more believable as this
person's own answer?". The judge's answer is a scored choice (the probabilities of "1" and "2"),
asked with the two answers in both orders and averaged, so a judge's habit of answering "1" is
no preference; the averaged probability is a soft win. An answer the model failed to give loses
to any answer without asking (a failure is not forgiven), and two failures are no comparison.

Bradley–Terry: P(i beats j) = s_i / (s_i + s_j), fitted by Hunter's (2004) MM iterations over the
soft wins, with half a win each way per pair of conditions (a prior that keeps a condition that
never won finite). Intervals: the agents are resampled with replacement and the model refitted;
the 2.5 and 97.5 percentiles of each condition's log-strength (centred on the conditions' mean)
and how often each condition came first.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulation.errors import InputError, Problem
from simulation.evaluation import prompts
from simulation.evaluation.believability import CATEGORIES, SUITE
from simulation.evaluation.session import EvalOptions, Session
from simulation.formats.persona import Persona
from simulation.llm import batching
from simulation.llm.backend import Backend
from simulation.llm.seeds import derive_seed

PRIOR = 0.5
"""Virtual wins each way per pair of conditions."""


@dataclass
class Condition:
    """One condition's interview answers: agent id -> (category, index) -> (question, answer)."""

    label: str
    folder: Path
    answers: dict[str, dict[tuple[str, int], tuple[str, str]]]
    personas: dict[str, Persona]


@dataclass(frozen=True)
class Comparison:
    agent: str
    category: str
    index: int
    first: int
    second: int
    p_first: float
    """The judge's probability that the first condition's answer is the more believable (a soft win)."""
    asked: bool
    """False when one answer was missing (decided without asking)."""


@dataclass
class Ranking:
    labels: list[str]
    comparisons: list[Comparison]
    strength: np.ndarray
    """Log-strength per condition, centred on their mean."""
    low: np.ndarray
    high: np.ndarray
    first_share: np.ndarray
    """How often each condition had the highest strength over the bootstrap resamples (a tie shared)."""
    agents: list[str]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def win_rate(self, i: int, j: int, category: str | None = None) -> float | None:
        """Condition i's mean soft win against j (over every comparison of the two)."""
        wins = [c.p_first if c.first == i else 1 - c.p_first for c in self.comparisons
                if {c.first, c.second} == {i, j} and (category is None or c.category == category)]
        return sum(wins) / len(wins) if wins else None


def read_condition(label: str, folder: Path) -> Condition:
    """A ``believability`` evaluation's answers (its results.json); InputError naming the folder."""
    path = folder / "results.json"
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(Problem(str(folder), "no results.json: not an `agora eval` output folder")) from None
    except (OSError, ValueError) as exc:
        raise InputError(Problem(str(path), f"cannot be read: {exc}")) from None
    if SUITE not in data.get("suites", {}):
        raise InputError(Problem(str(path), f"holds no {SUITE} suite: run `agora eval RUN --suite {SUITE}` first"))
    answers: dict[str, dict[tuple[str, int], tuple[str, str]]] = {}
    personas: dict[str, Persona] = {}
    for m in data.get("metrics", []):
        if m.get("suite") != SUITE or not m.get("agent_id"):
            continue
        agent = m["agent_id"]
        details = m.get("details") or {}
        if m["metric"].startswith("answered_"):
            category = m["metric"][len("answered_"):]
            for i, qa in enumerate(details.get("qa", [])):
                answers.setdefault(agent, {})[(category, i)] = (qa.get("question", ""), qa.get("answer", ""))
        elif m["metric"] == "failed" and details.get("persona"):
            personas[agent] = Persona.model_validate(details["persona"])
    if not answers:
        raise InputError(Problem(str(path), f"its {SUITE} rows hold no answers"))
    return Condition(label, folder, answers, personas)


def bradley_terry(n: int, comparisons: list[tuple[int, int, float]], iterations: int = 2000,
                  tol: float = 1e-10) -> np.ndarray:
    """Log-strengths (centred) of ``n`` conditions from (i, j, soft win of i over j) comparisons."""
    wins = np.full((n, n), PRIOR)
    np.fill_diagonal(wins, 0.0)
    for i, j, p in comparisons:
        wins[i, j] += p
        wins[j, i] += 1 - p
    games = wins + wins.T
    s = np.ones(n)
    for _ in range(iterations):
        denom = (games / (s[:, None] + s[None, :])).sum(axis=1)
        new = wins.sum(axis=1) / denom
        new /= np.exp(np.log(new).mean())
        if np.max(np.abs(new - s)) < tol:
            s = new
            break
        s = new
    log = np.log(s)
    return log - log.mean()


async def _judge(session: Session, persona: Persona, category: str, index: int, question: str, answers: tuple[str, str],
                 agent: str) -> float | None:
    """P(the first answer is the more believable), averaged over both orders (None: no usable judgement)."""
    ctx = prompts.persona_context(persona)
    ratings = await asyncio.gather(*(
        session.ask_rating("judge", agent, prompts.judge_messages("believability_judge.j2", **ctx, question=question,
                                                                  answer_one=one, answer_two=two),
                           ["1", "2"], [0.0, 1.0], default=0.5, purpose=f"rank_{category}_{index}_{order}")
        for order, (one, two) in enumerate((answers, answers[::-1]))))
    got = []
    for order, rating in enumerate(ratings):
        if not (rating.ok and rating.probabilities):
            return None
        p_one = rating.probabilities[0] / max(sum(rating.probabilities), 1e-12)
        got.append(p_one if order == 0 else 1 - p_one)
    return sum(got) / 2


def rank(conditions: list[Condition], judge: Backend, *, per_category: int | None = None, seed: int = 0,
         bootstrap: int = 1000) -> Ranking:
    """Judge every pair of conditions' answers for every agent all of them have, and fit Bradley–Terry."""
    if len(conditions) < 2:
        raise InputError(Problem("CONDITION", "ranking needs at least two conditions (LABEL=EVAL_DIR each)"))
    agents = sorted(set.intersection(*(set(c.answers) for c in conditions)))
    if not agents:
        raise InputError(Problem("CONDITION", "no agent was interviewed in every condition (agents are matched by "
                                              "persona id)"))
    session = Session(judge, judge, EvalOptions(suites=(SUITE,), seed=seed))
    jobs = []
    for agent in agents:
        persona = next((c.personas[agent] for c in conditions if agent in c.personas), None)
        if persona is None:
            raise InputError(Problem(str(conditions[0].folder), f"no persona recorded for {agent!r}"))
        keys = sorted(set.intersection(*(set(c.answers[agent]) for c in conditions)),
                      key=lambda k: (CATEGORIES.index(k[0]) if k[0] in CATEGORIES else 99, k[1]))
        if per_category is not None:
            keys = [k for k in keys if k[1] < per_category]
        for (category, index), (i, j) in itertools.product(keys, itertools.combinations(range(len(conditions)), 2)):
            jobs.append((agent, persona, category, index, i, j))

    async def one(agent: str, persona: Persona, category: str, index: int, i: int, j: int) -> Comparison | None:
        question, first = conditions[i].answers[agent][(category, index)]
        _, second = conditions[j].answers[agent][(category, index)]
        if not first.strip() or not second.strip():
            if not first.strip() and not second.strip():
                return None
            return Comparison(agent, category, index, i, j, 0.0 if not first.strip() else 1.0, False)
        p = await _judge(session, persona, category, index, question, (first, second), agent)
        return None if p is None else Comparison(agent, category, index, i, j, p, True)

    async def everything() -> list[Comparison | None]:
        return list(await asyncio.gather(*(one(*job) for job in jobs)))

    comparisons = [c for c in batching.run(everything(), name="ranking") if c is not None]
    n = len(conditions)
    strength = bradley_terry(n, [(c.first, c.second, c.p_first) for c in comparisons])
    rng = np.random.default_rng(derive_seed(seed, "rank-bootstrap"))
    by_agent = {a: [(c.first, c.second, c.p_first) for c in comparisons if c.agent == a] for a in agents}
    draws = np.array([bradley_terry(n, [x for a in rng.choice(agents, size=len(agents)) for x in by_agent[a]])
                      for _ in range(bootstrap)]) if bootstrap else np.zeros((0, n))
    low, high = (np.percentile(draws, [2.5, 97.5], axis=0) if len(draws) else (strength, strength))
    top = np.isclose(draws, draws.max(axis=1, keepdims=True), atol=1e-9) if len(draws) else np.zeros((0, n))
    first = (top / top.sum(axis=1, keepdims=True)).mean(axis=0) if len(draws) else np.zeros(n)  # ties shared
    return Ranking([c.label for c in conditions], comparisons, strength, low, high, first, agents, session.calls)




def report_markdown(r: Ranking, judge: str, command: str, plot: str) -> str:
    """The ranking as report.md: the table of strengths with intervals, the pairwise win rates, and
    each condition's win rate by category."""
    n = len(r.labels)
    order = sorted(range(n), key=lambda i: -r.strength[i])
    asked = sum(c.asked for c in r.comparisons)
    lines = ["# Believability ranking (Generative Agents, section 6.2)", "",
             f"Made by: `{command}`", "",
             f"Judge: {judge}. {len(r.agents)} agents interviewed in every condition; {len(r.comparisons)} "
             f"comparisons ({asked} judged in both orders, {len(r.comparisons) - asked} decided by a missing "
             "answer).", "",
             "Bradley–Terry log-strength, centred on the conditions' mean, with the 2.5-97.5 percentiles of "
             "refits on agents resampled with replacement; *first*: the share of resamples in which the "
             "condition was strongest. Conditions whose intervals overlap are not told apart.", "",
             "| rank | condition | log-strength | 95 % interval | first | mean win rate |", "|---:|---|---:|---|---:|---:|"]
    for k, i in enumerate(order, 1):
        rates = [r.win_rate(i, j) for j in range(n) if j != i]
        rates = [x for x in rates if x is not None]
        mean = f"{sum(rates) / len(rates):.2f}" if rates else "–"
        lines.append(f"| {k} | {r.labels[i]} | {r.strength[i]:+.2f} | [{r.low[i]:+.2f}, {r.high[i]:+.2f}] | "
                     f"{r.first_share[i]:.2f} | {mean} |")
    lines += ["", "Win rate of the row's answers against the column's (the judge's mean probability):", "",
              "| | " + " | ".join(r.labels[j] for j in order) + " |", "|---" * (n + 1) + "|"]
    for i in order:
        cells = ["–" if i == j or r.win_rate(i, j) is None else f"{r.win_rate(i, j):.2f}" for j in order]
        lines.append(f"| {r.labels[i]} | " + " | ".join(cells) + " |")
    lines += ["", "Each condition's mean win rate against all others, by category:", "",
              "| condition | " + " | ".join(c.replace("_", " ") for c in CATEGORIES) + " |",
              "|---" * (len(CATEGORIES) + 1) + "|"]
    for i in order:
        cells = []
        for category in CATEGORIES:
            rates = [x for x in (r.win_rate(i, j, category) for j in range(n) if j != i) if x is not None]
            cells.append(f"{sum(rates) / len(rates):.2f}" if rates else "–")
        lines.append(f"| {r.labels[i]} | " + " | ".join(cells) + " |")
    lines += ["", plot, ""]
    return "\n".join(lines)


def figure(r: Ranking) -> Any:
    import plotly.graph_objects as go

    order = sorted(range(len(r.labels)), key=lambda i: r.strength[i])
    fig = go.Figure(go.Scatter(
        x=[r.strength[i] for i in order], y=[r.labels[i] for i in order], mode="markers",
        marker={"size": 12, "color": "#d6336c"},
        error_x={"type": "data", "symmetric": False, "array": [r.high[i] - r.strength[i] for i in order],
                 "arrayminus": [r.strength[i] - r.low[i] for i in order]}))
    fig.add_vline(x=0, line={"color": "#adb5bd", "dash": "dot"})
    fig.update_layout(title="Believability: Bradley–Terry log-strength per condition (95 % bootstrap interval)",
                      xaxis_title="log-strength (0 = the conditions' mean)", height=120 + 60 * len(order),
                      margin={"t": 50, "b": 40})
    return fig


def write(r: Ranking, out: Path, judge: str, command: str) -> None:
    """report.md, ranking.json, comparisons.csv and the plot into ``out``."""
    import csv

    from simulation.evaluation.plots import _save

    out.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    plot = _save(figure(r), out, "ranking", files)
    with open(out / "comparisons.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["agent", "category", "index", "first", "second", "p_first", "asked"])
        for c in r.comparisons:
            writer.writerow([c.agent, c.category, c.index, r.labels[c.first], r.labels[c.second],
                             round(c.p_first, 6), int(c.asked)])
    summary = {"judge": judge, "command": command, "agents": r.agents, "conditions": [
        {"label": label, "log_strength": float(r.strength[i]), "low": float(r.low[i]), "high": float(r.high[i]),
         "first_share": float(r.first_share[i])} for i, label in enumerate(r.labels)],
        "comparisons": len(r.comparisons), "judged": sum(c.asked for c in r.comparisons), "llm_calls": len(r.calls)}
    (out / "ranking.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    (out / "report.md").write_text(report_markdown(r, judge, command, plot), "utf-8")


__all__ = ["Comparison", "Condition", "PRIOR", "Ranking", "bradley_terry", "figure", "rank", "read_condition",
           "report_markdown", "write"]
