"""One labelling pass over a run: judge every turn, optionally critique every line, then the arithmetic.

All judge requests (and the critics' first round) are gathered in one event loop, so the batching
client hands the backend one batch per round; the scorers follow in a second round, as they read
the critiques. The result holds the ``rewards`` rows, the call log and the counts the command and
docs report (turns judged, usable, dropped; lines critiqued, scorer answers dropped).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from simulation.errors import InputError, Problem
from simulation.evaluation.session import EvalOptions, Session
from simulation.llm import batching
from simulation.llm.backend import Backend
from simulation.llm.types import RawCompletion
from simulation.rewards import arithmetic
from simulation.rewards.critique import Critique, critique, peers
from simulation.rewards.judging import Judgement, judge
from simulation.rewards.turns import Turn, read_turns
from simulation.scenario import Persona

Role = Literal["actor", "speaker", "critic", "scorer"]
ROLES: tuple[str, ...] = ("actor", "speaker", "critic", "scorer")


@dataclass
class RewardOptions:
    seed: int = 0
    peer_critique: bool = False
    judge_temperature: float = 0.0
    temperature: float = 0.7
    """The agents' sampling temperature as critics and scorers."""
    limit: int | None = None
    """Judge only the first N turns (a quick look at a long run)."""


class RewardRow(BaseModel):
    """One row of run.db's ``rewards`` table: what one agent earned for one turn in one role."""

    id: int
    run_id: str
    agent_id: str
    tick: int
    sim_time: str
    role: Role
    kind: str
    source_table: str
    source_id: int
    group_key: str
    llm_call_id: int | None
    """The run's ``llm_calls`` row whose completion made the turn (actor and speaker rows)."""
    reward_call_id: int | None
    """The ``reward_calls`` row of the judge's, critic's or scorer's answer."""
    scores: dict[str, int | None]
    assessment: str
    scene: str
    reward: float
    advantage: float = 0.0
    total: float = 0.0
    judge_model: str


@dataclass
class RewardResult:
    pass_id: str
    created_at: str
    run_id: str
    options: RewardOptions
    turns: list[Turn]
    judgements: list[Judgement]
    critiques: list[Critique]
    rows: list[RewardRow]
    calls: list[dict[str, Any]]
    judge: dict[str, str]
    peer: dict[str, str] | None
    wall_s: float
    no_peers: int = 0
    """Utterances with no critic or scorer to ask (a run of two people, a listener not in the run)."""
    counts_by_agent: dict[str, Counter[str]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        c = {"turns": len(self.turns), "usable": sum(j.scores is not None for j in self.judgements),
             "exportable": sum(t.llm_call_id is not None for t in self.turns), "calls": len(self.calls),
             "prompt_tokens": sum(int(x["prompt_tokens"]) for x in self.calls),
             "completion_tokens": sum(int(x["completion_tokens"]) for x in self.calls)}
        c["dropped"] = c["turns"] - c["usable"]
        if self.options.peer_critique:
            c["critiqued"] = len(self.critiques)
            c["scorer_dropped"] = sum(x.score is None for x in self.critiques)
            c["critic_dropped"] = sum(x.critique is None for x in self.critiques)
            c["no_peers"] = self.no_peers
        return c


def build_rows(run_id: str, judgements: list[Judgement], critiques: list[Critique], judge_model: str,
               peer_model: str) -> list[RewardRow]:
    """The rows of one pass: rewards from scores, then advantages per (group, role), then running
    totals per (agent, role), ids in the order the ticks produced the turns."""
    drafts: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for j in judgements:
        if j.scores is not None and j.reward is not None:
            drafts.append(((j.turn.order, 0), _draft(j.turn, j.turn.agent_id, "actor", j.scores, "",
                                                     j.reward, j.call_id, j.turn.llm_call_id, judge_model)))
    for c in critiques:
        r, peer = c.rewards, {"peer": c.score}
        if r.speaker is not None:
            drafts.append(((c.turn.order, 1), _draft(c.turn, c.turn.agent_id, "speaker", peer, c.assessment,
                                                     r.speaker, c.scorer_call_id, c.turn.llm_call_id, peer_model)))
        if r.critic is not None:
            drafts.append(((c.turn.order, 2), _draft(c.turn, c.critic_id, "critic", peer, c.critique or "",
                                                     r.critic, c.critic_call_id, None, peer_model)))
        drafts.append(((c.turn.order, 3), _draft(c.turn, c.scorer_id, "scorer", peer, c.assessment, r.scorer,
                                                 c.scorer_call_id, None, peer_model)))
    drafts.sort(key=lambda d: d[0])
    rows = [d for _, d in drafts]
    rewards = [d["reward"] for d in rows]
    advantages = arithmetic.group_advantages(rewards, [(d["role"], d["group_key"]) for d in rows])
    totals = arithmetic.running_totals(rewards, [(d["agent_id"], d["role"]) for d in rows],
                                       [(d["tick"], i) for i, d in enumerate(rows)])
    return [RewardRow(id=i + 1, run_id=run_id, advantage=a, total=t, **d)
            for i, (d, a, t) in enumerate(zip(rows, advantages, totals, strict=True))]


def _draft(turn: Turn, agent_id: str, role: str, scores: dict[str, int | None], assessment: str, reward: float,
           reward_call_id: int | None, llm_call_id: int | None, model: str) -> dict[str, Any]:
    return {"agent_id": agent_id, "tick": turn.tick, "sim_time": turn.sim_time, "role": role, "kind": turn.kind,
            "source_table": turn.source_table, "source_id": turn.source_id, "group_key": turn.group,
            "llm_call_id": llm_call_id, "reward_call_id": reward_call_id, "scores": scores,
            "assessment": assessment, "scene": turn.scene, "reward": reward, "judge_model": model}


def label(
    db_path: Path,
    personas: dict[str, Persona],
    judge_backend: Backend,
    agents_backend: Backend | None,
    options: RewardOptions,
    on_progress: Callable[[RawCompletion], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> RewardResult:
    """Judge (and with ``options.peer_critique`` critique) every turn of the run in ``db_path``.

    ``agents_backend`` plays the critics and scorers (default: the judge's backend)."""
    run_id, turns = read_turns(db_path, options.limit)
    turns = [t for t in turns if t.agent_id in personas]
    if not turns:
        raise InputError(Problem(str(db_path), "nothing to judge: the run has no utterances or decided actions yet"))
    agents = agents_backend or judge_backend
    session = Session(agents, judge_backend, EvalOptions(seed=options.seed, temperature=options.temperature,
                                                         judge_temperature=options.judge_temperature), on_progress)
    ids = sorted(personas)
    pairs = [(t, p) for t in turns if options.peer_critique and (p := peers(t, ids, options.seed)) is not None]
    no_peers = sum(t.kind == "utterance" for t in turns) - len(pairs) if options.peer_critique else 0
    if on_plan:
        on_plan(len(turns) + 2 * len(pairs))

    async def run_all() -> tuple[list[Judgement], list[Critique]]:
        judged = asyncio.gather(*(judge(session, t, personas[t.agent_id]) for t in turns))
        critiqued = asyncio.gather(*(critique(session, t, c, s, personas) for t, (c, s) in pairs))
        js, cs = await asyncio.gather(judged, critiqued)
        return list(js), list(cs)

    started = time.perf_counter()
    judgements, critiques = batching.run(run_all(), name="rewards")
    wall = time.perf_counter() - started
    judge_info = {"backend": judge_backend.name, "model": judge_backend.model_id}
    peer_info = {"backend": agents.name, "model": agents.model_id} if options.peer_critique else None
    rows = build_rows(run_id, judgements, critiques, judge_backend.model_id, agents.model_id)
    by_agent: dict[str, Counter[str]] = defaultdict(Counter)
    for j in judgements:
        by_agent[j.turn.agent_id]["turns"] += 1
        by_agent[j.turn.agent_id]["usable"] += j.scores is not None
    now = datetime.now(timezone.utc)
    return RewardResult(
        pass_id=f"rewards-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}", created_at=now.isoformat(timespec="seconds"),
        run_id=run_id, options=options, turns=turns, judgements=judgements, critiques=critiques, rows=rows,
        calls=session.calls, judge=judge_info, peer=peer_info, wall_s=wall, no_peers=no_peers,
        counts_by_agent=dict(by_agent),
    )


def options_json(options: RewardOptions) -> str:
    return json.dumps(vars(options), sort_keys=True)
