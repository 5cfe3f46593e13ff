"""Peer critique, CoMAS-style: the town's agents critique and score each other's lines.

CoMAS (Xue et al., 2025) has three roles in a discussion: a *solver* proposes a solution, a
*critic* evaluates it, a *scorer* scores it in the light of the critique. In the town:

- solver -> the **speaker** of an utterance;
- critic -> the **listener**, the one the line was said to, in character (its persona as system
  message, played by the agents' LLM): it says what is weak about the line;
- scorer -> a **third agent** of the run (neither speaker nor listener, picked by a seed from the
  utterance id), in character, who reads the line, the scene and the critique and answers
  ``Score: N`` on the rubric's scale, parsed strictly (the evaluation's final-line judge).

Rewards (``arithmetic.peer_rewards``): the speaker earns the normalised score ``s``, the critic
``1 - s``, the scorer 0, or -1 when its answer cannot be parsed even after the retry (then the
speaker and critic earn nothing for that line). Runs with fewer than three agents have no scorer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, create_model

from simulation.evaluation.judging import JudgeAnswer, final_line_check, judge_model, judged_score
from simulation.evaluation.session import Session
from simulation.llm.seeds import derive_seed
from simulation.rewards import arithmetic, prompts, rubric
from simulation.rewards.judging import purpose
from simulation.rewards.turns import Turn
from simulation.scenario import Persona

CRITIC_TOKENS = 200
"""Room for the longest critique the schema allows at one token per character, plus the JSON."""
SCORER_TOKENS = 160
"""Room for the scorer's longest reason and its final line, plus the JSON."""


class CritiqueAnswer(BaseModel):
    """A critique short enough that a llama.cpp grammar (one nested rule per character) stays quick."""

    model_config = ConfigDict(extra="ignore")

    critique: Annotated[str, Field(min_length=1, max_length=120)]


_NO_CRITIQUE = CritiqueAnswer(critique="(none)")


@lru_cache(maxsize=1)
def score_model() -> type[JudgeAnswer]:
    """The evaluation's judgement (final line ``Score: N`` on the rubric scale) with a one-line reason."""
    return create_model("PeerScore", __base__=judge_model(rubric.LO, rubric.HI),
                        assessment=(Annotated[str, Field(max_length=80)], ...))


@dataclass(frozen=True)
class Critique:
    turn: Turn
    critic_id: str
    scorer_id: str
    critique: str | None
    """None: the critic's answer was unusable after the retry."""
    critic_call_id: int | None
    score: float | None
    """The scorer's score on the rubric scale (expected over its probabilities, ``judged_score``);
    None: unusable after the retry."""
    assessment: str
    scorer_call_id: int | None

    @property
    def rewards(self) -> arithmetic.PeerRewards:
        return arithmetic.peer_rewards(self.score, rubric.LO, rubric.HI, critic_parsed=self.critique is not None)


def peers(turn: Turn, agent_ids: Sequence[str], seed: int) -> tuple[str, str] | None:
    """(critic, scorer) for an utterance: its listener and a seeded third agent; None when there is none."""
    critic = turn.other_id
    if turn.kind != "utterance" or critic is None or critic not in agent_ids:
        return None
    others = sorted(a for a in agent_ids if a not in (turn.agent_id, critic))
    if not others:
        return None
    return critic, others[derive_seed(seed, "scorer", turn.source_table, turn.source_id) % len(others)]


async def critique(session: Session, turn: Turn, critic_id: str, scorer_id: str,
                   personas: dict[str, Persona]) -> Critique:
    """The critic's critique, then the scorer's score (it reads the critique)."""
    speaker, listener = personas[turn.agent_id].name, personas[critic_id].name
    about = {"speaker": speaker, "speaker_first": speaker.split()[0], "scene": turn.scene, "text": turn.text}
    said = await session.ask("agent", critic_id, prompts.peer_messages(personas[critic_id], "critic.j2", **about),
                             CritiqueAnswer, default=_NO_CRITIQUE, purpose=purpose("critic", turn),
                             max_tokens=CRITIC_TOKENS)
    text = said.value.critique if said.ok else None
    msgs = prompts.peer_messages(personas[scorer_id], "scorer.j2", **about, listener=listener, critique=text or "",
                                 lo=rubric.LO, hi=rubric.HI)
    model = score_model()
    verdict = await session.ask("agent", scorer_id, msgs, model, default=model(assessment="", final_line=""),
                                purpose=purpose("score", turn), max_tokens=SCORER_TOKENS,
                                check=final_line_check(rubric.LO, rubric.HI))
    score = await judged_score(
        lambda m, o, v: session.ask_rating("agent", scorer_id, m, o, v, default=(rubric.LO + rubric.HI) / 2,
                                           purpose=purpose("score", turn) + "_p"),
        msgs, verdict.value, verdict.ok, rubric.LO, rubric.HI)
    return Critique(turn, critic_id, scorer_id, text, said.call_id, score,
                    verdict.value.assessment if verdict.ok else "", verdict.call_id)
