"""The LLM judge: every turn scored on the rubric, and the same judge as a TRL reward function.

The judge sees the persona (the evaluation judge's system message), the scene as the agent knew
it, and what it said or did; it answers ``RubricAnswer`` under its JSON schema. An answer that
is not JSON or has a score off the scale is retried once with the reason (the batching client's
retry), then the turn is *dropped and counted*, never guessed. Requests go through the
evaluation's ``Session`` (its judge client and call log), so seeds derive from (seed, agent,
purpose, attempt): same run, judge, seed and cache give the same scores.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulation.evaluation.session import EvalOptions, Session
from simulation.llm import batching
from simulation.llm.backend import Backend
from simulation.rewards import arithmetic, prompts, rubric
from simulation.rewards.turns import Turn
from simulation.scenario import Persona


@dataclass(frozen=True)
class Judgement:
    turn: Turn
    scores: dict[str, int] | None
    """None: unusable after the retry (dropped)."""
    call_id: int | None
    """The session's call-log id of the last attempt."""

    @property
    def reward(self) -> float | None:
        return None if self.scores is None else arithmetic.rubric_reward(self.scores, rubric.LO, rubric.HI)


def purpose(prefix: str, turn: Turn) -> str:
    """A request purpose unique to the turn (seeds derive from it): ``rw_judge_u12``, ``rw_judge_e40``."""
    return f"rw_{prefix}_{turn.source_table[0]}{turn.source_id}"


def messages(persona: Persona, kind: str, scene: str, text: str) -> list[dict[str, str]]:
    return prompts.judge_messages(persona, "turn_judge.j2", kind=kind, scene=scene, text=text,
                                  rubric=rubric.text(kind), lo=rubric.LO, hi=rubric.HI)


async def _ask(session: Session, target: str, msgs: list[dict[str, str]],
               what: str) -> tuple[dict[str, int] | None, int | None]:
    answer = await session.ask("judge", target, msgs, rubric.RubricAnswer, default=rubric.NO_ANSWER, purpose=what,
                               max_tokens=rubric.JUDGE_TOKENS)
    return (answer.value.scores() if answer.ok else None), answer.call_id


async def judge(session: Session, turn: Turn, persona: Persona) -> Judgement:
    scores, call_id = await _ask(session, turn.agent_id, messages(persona, turn.kind, turn.scene, turn.text),
                                 purpose("judge", turn))
    return Judgement(turn, scores, call_id)


def completion_text(completion: Any) -> str:
    """What an agent's raw answer says or does: ``say`` of an utterance, ``detail`` of a reaction or
    greeting, the actions of a ``steps`` answer; the raw text otherwise. Accepts a TRL conversational
    completion (a list of messages) too."""
    if isinstance(completion, list):
        completion = "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    raw = str(completion or "")
    try:
        value = json.loads(raw, strict=False)
    except ValueError:
        return raw.strip()
    if not isinstance(value, dict):
        return raw.strip()
    if isinstance(value.get("say"), str):
        return value["say"].strip()
    if isinstance(value.get("detail"), str) and value["detail"].strip():
        return value["detail"].strip()
    if isinstance(value.get("steps"), list):
        return "; ".join(f"{s.get('action', '')} ({s.get('place', '')}, {s.get('minutes', '?')} min)"
                         for s in value["steps"] if isinstance(s, dict))
    return raw.strip()


def reward_function(backend: Backend, seed: int = 0, temperature: float = 0.0) -> Callable[..., list[float | None]]:
    """A TRL reward function (GRPOTrainer / RLOOTrainer ``reward_funcs``) over the GRPO export.

    TRL passes each batch's completions with the dataset's extra columns as keyword lists; this
    re-judges every completion with the rubric judge on ``backend``, using the row's ``persona``
    (JSON), ``scene`` and ``kind``, and returns the rubric reward in [0, 1], or None for a completion
    the judge could not score (TRL ignores None). One batched LLM round per call; deterministic."""

    def social_rubric_reward(prompts: list[Any], completions: list[Any], persona: list[str], scene: list[str],
                             kind: list[str], **_: Any) -> list[float | None]:
        session = Session(backend, backend, EvalOptions(seed=seed, judge_temperature=temperature))

        async def one(p: str, sc: str, k: str, completion: Any) -> float | None:
            text = completion_text(completion)
            who = hashlib.sha256(json.dumps([p, sc, k, text]).encode()).hexdigest()[:16]
            scores, _ = await _ask(session, who, messages(Persona.model_validate_json(p), k, sc, text), "rw_fresh")
            return None if scores is None else arithmetic.rubric_reward(scores, rubric.LO, rubric.HI)

        async def every() -> list[float | None]:
            return list(await asyncio.gather(*(one(p, sc, k, c) for p, sc, k, c
                                               in zip(persona, scene, kind, completions, strict=True))))

        return batching.run(every(), name="judging")

    return social_rubric_reward
