"""The personagym suite: PersonaGym's five tasks, answered in character, judged 1-5.

Per agent: the judge model picks the settings where the persona would show most (a seeded
pick if its answer is unusable), writes one question per task and setting (a fixed template
question if it cannot), the agent answers in character in a fresh context, and the judge
scores the answer against the task's rubric, whose every score has an anchor example. The
score is read from the judgement's fixed final line; an unparsable judgement is dropped and
counted. PersonaScore is the mean of the five task means (Samuel et al., 2024).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, create_model

from simulation.evaluation import prompts
from simulation.evaluation.judging import JUDGE_TOKENS, final_line_check, judge_model, judged_score, no_judgement
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.stats import bootstrap
from simulation.evaluation.targets import Target
from simulation.llm.seeds import derive_seed

SUITE = "personagym"
TASKS = ("expected_action", "action_justification", "linguistic_habits", "persona_consistency", "toxicity_control")


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    text = resources.files("simulation.evaluation").joinpath("data/personagym.yaml").read_text("utf-8")
    return yaml.safe_load(text)


class Question(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question: Annotated[str, Field(min_length=10, max_length=200)]


class InCharacter(BaseModel):
    model_config = ConfigDict(extra="ignore")

    answer: Annotated[str, Field(min_length=1, max_length=300)]


def question_check(example: str) -> Any:
    """A generated question must ask something, and must not be the prompt's example copied."""

    def check(q: Question) -> str | None:
        text = " ".join(q.question.split()).lower()
        if "?" not in text:
            return "the question must ask something (end it with a question mark)"
        if text == " ".join(example.split()).lower():
            return "that is the example; write a new question for this setting"
        return None

    return check


@lru_cache(maxsize=8)
def settings_model(ids: tuple[str, ...], k: int) -> type[BaseModel]:
    choice = Literal[ids]  # type: ignore[valid-type]
    return create_model("SettingChoice", __config__=ConfigDict(extra="ignore"),
                        settings=(list[choice], Field(min_length=k, max_length=k)))  # type: ignore[valid-type]


@dataclass
class Item:
    task: str
    setting: str
    question: str
    question_generated: bool
    answer: str
    answered: bool
    score: float | None
    assessment: str
    call_ids: list[int | None] = field(default_factory=list)


@dataclass
class Result:
    target: str
    settings: list[str]
    settings_by_judge: bool
    items: list[Item]

    def task_scores(self, task: str) -> list[int]:
        return [i.score for i in self.items if i.task == task and i.score is not None]

    def task_means(self) -> dict[str, float | None]:
        return {task: float(np.mean(s)) if (s := self.task_scores(task)) else None for task in TASKS}

    def persona_score(self) -> float | None:
        """Mean of the task means; tasks without a single usable judgement are left out (and reported)."""
        means = [m for m in self.task_means().values() if m is not None]
        return float(np.mean(means)) if means else None

    @property
    def dropped(self) -> int:
        return sum(i.score is None for i in self.items)


def planned(session: Session, targets: list[Target]) -> int:
    o = session.options
    return len(targets) * (1 + 3 * o.settings * o.questions * len(TASKS))


async def _pick_settings(session: Session, t: Target, ctx: dict) -> tuple[list[str], bool]:
    all_settings = data()["settings"]
    ids = tuple(s["id"] for s in all_settings)
    k = min(session.options.settings, len(ids))
    model = settings_model(ids, k)
    rng = np.random.default_rng(derive_seed(session.options.seed, t.key, "settings"))
    fallback = [ids[int(i)] for i in sorted(rng.choice(len(ids), size=k, replace=False))]

    def distinct(answer: Any) -> str | None:
        return None if len(set(answer.settings)) == k else f"choose {k} different settings"

    msgs = prompts.judge_messages("pg_settings.j2", **ctx, settings=all_settings, k=k)
    answer = await session.ask("judge", t.key, msgs, model, default=model(settings=fallback), purpose="pg_settings",
                               max_tokens=24 * k + 16, check=distinct)
    return list(answer.value.settings), answer.ok


async def _item(session: Session, t: Target, ctx: dict, setting_id: str, task: str, q: int) -> Item:
    d = data()
    spec = d["tasks"][task]
    setting = next(s["text"] for s in d["settings"] if s["id"] == setting_id)
    tag = f"{task}_{setting_id}_{q}"
    fallback = spec["fallback"].format(setting=setting)
    asked = await session.ask(
        "judge", t.key, prompts.judge_messages("pg_question.j2", **ctx, task=spec, setting=setting,
                                               example=spec["example"]),
        Question, default=Question(question=fallback), purpose=f"pg_q_{tag}", max_tokens=240,
        check=question_check(spec["example"]))
    question = asked.value.question
    answer = await session.ask(
        "agent", t.key, prompts.agent_messages(ctx, "answer.j2", setting=setting, question=question),
        InCharacter, default=InCharacter(answer="-"), purpose=f"pg_a_{tag}", max_tokens=340)
    response = answer.value.answer if answer.ok else ""
    judging = prompts.judge_messages(
        "pg_judge.j2", **ctx, task=spec, rubric=spec["rubric"], rubric_persona=spec["rubric_persona"],
        rubric_question=spec["rubric_question"], setting=setting, question=question, response=response)
    verdict = await session.ask("judge", t.key, judging, judge_model(1, 5), default=no_judgement(1, 5),
                                purpose=f"pg_j_{tag}", max_tokens=JUDGE_TOKENS, check=final_line_check(1, 5))
    score = await judged_score(
        lambda m, o, v: session.ask_rating("judge", t.key, m, o, v, default=3.0, purpose=f"pg_j_{tag}_score"),
        judging, verdict.value, verdict.ok, 1, 5)
    return Item(task, setting_id, question, asked.ok, response, answer.ok, score, verdict.value.assessment,
                [asked.call_id, answer.call_id, verdict.call_id])


async def evaluate(session: Session, t: Target) -> Result:
    ctx = prompts.persona_context(t.persona, t.memories)
    settings, by_judge = await _pick_settings(session, t, ctx)
    items = await asyncio.gather(*(
        _item(session, t, ctx, s, task, q)
        for s in settings for task in TASKS for q in range(session.options.questions)))
    return Result(t.key, settings, by_judge, list(items))


async def run(session: Session, targets: list[Target]) -> list[Result]:
    return list(await asyncio.gather(*(evaluate(session, t) for t in targets)))


def metrics(session: Session, targets: list[Target], results: list[Result]) -> list[Metric]:
    out = []
    for t, r in zip(targets, results):
        means = r.task_means()
        for task in TASKS:
            mine = [i for i in r.items if i.task == task]
            out.append(Metric(SUITE, f"task_{task}", means[task], t.key, t.run_id, t.agent_id, {
                "judged": len(mine), "dropped": sum(i.score is None for i in mine),
                "items": [vars(i) for i in mine]}))
        out.append(Metric(SUITE, "persona_score", r.persona_score(), t.key, t.run_id, t.agent_id, {
            "task_means": means, "tasks_missing": [k for k, v in means.items() if v is None],
            "settings": r.settings, "settings_by_judge": r.settings_by_judge}))
        out.append(Metric(SUITE, "dropped_judgements", float(r.dropped), t.key, t.run_id, t.agent_id,
                          {"judged": len(r.items), "questions_generated": sum(i.question_generated for i in r.items),
                           "answered": sum(i.answered for i in r.items)}))
    return out


def aggregate(session: Session, results: list[Result], scope: str, run_id: str | None) -> list[Metric]:
    n_boot = session.options.bootstrap
    out = []
    scores = np.array([s for r in results if (s := r.persona_score()) is not None])
    est = bootstrap(scores, np.mean, seed=session.boot_seed(SUITE, scope, "persona_score"), n_boot=n_boot)
    out.append(Metric(SUITE, "persona_score", est.value, None, run_id, None, {"scope": scope, **est.as_dict()}))
    for task in TASKS:
        means = np.array([m for r in results if (m := r.task_means()[task]) is not None])
        est = bootstrap(means, np.mean, seed=session.boot_seed(SUITE, scope, task), n_boot=n_boot)
        out.append(Metric(SUITE, f"task_{task}", est.value, None, run_id, None, {"scope": scope, **est.as_dict()}))
    out.append(Metric(SUITE, "dropped_judgements", float(sum(r.dropped for r in results)), None, run_id, None,
                      {"scope": scope, "judged": sum(len(r.items) for r in results)}))
    return out
