"""Training data for TRL from a run's rewards: SFT, KTO, DPO and GRPO/RLOO JSON Lines files.

Every example's prompt is the exact chat the agent was sent (``llm_calls.messages``; for a critic
or scorer turn, ``reward_calls.messages``) and its completion is the raw answer it wrote, so the
data trains the policy on what it actually saw. Turns without such a call (a safe default was
used, or the plan step came from no LLM answer) are judged but not exported. Several actions
queued by one ``steps`` answer share that answer: they are one example, with their mean reward
and advantage. Files, per agent (``agents/AGENT/``) and for the whole town (``town/``):

- ``sft.jsonl`` (SFTTrainer, conversational language modelling): ``messages``: the prompt plus the
  answer, for the best ``top`` share of each agent's own turns by reward;
- ``kto.jsonl`` (KTOTrainer, unpaired preference): ``prompt``, ``completion``, ``label`` =
  advantage > 0, for every exportable turn (and, after a peer-critique pass, every critic and
  scorer turn, labelled by its own advantage);
- ``dpo.jsonl`` (DPOTrainer, preference): ``prompt``, ``chosen``, ``rejected``, ``margin``: pairs of
  turns in one group (a conversation, or one tick's actions) answering the same kind of question,
  the better one's prompt with both answers, margin = the reward difference;
- ``grpo.jsonl`` (GRPOTrainer / RLOOTrainer, prompt only): ``prompt`` with ``persona`` (JSON),
  ``scene``, ``rubric`` and ``kind`` as extra columns, which TRL passes to reward functions, so
  ``judging.reward_function`` can re-judge fresh completions.

Extra columns (agent, source rows, reward, advantage, and the named dimensions: the rubric items
behind the reward and, for a line, what it did (``rewards.measured``: ``informed``, ``tie``), as
``scores``, or ``chosen_scores`` / ``rejected_scores`` for DPO) are kept; the trainers drop what they do
not use. ``manifest.json`` lists every file with its row count.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from simulation.errors import InputError, Problem, RunError
from simulation.llm.types import plain
from simulation.rewards import rubric
from simulation.rewards.measured import measured
from simulation.rundb import connect_ro, table_names

FORMATS = ("trl",)
FILES = ("sft", "kto", "dpo", "grpo")
CHUNK = 500
"""Ids per ``in (...)`` query, well under SQLite's limit on bound parameters."""


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class SFTRow(BaseModel):
    messages: list[Message]
    agent_id: str
    kind: str
    source: str
    tick: int
    reward: float
    advantage: float
    scores: dict[str, float] = {}
    """The rubric's items (``in_character``, ``goals``, ``responsive``, ``plausible``, 1-5), and for a
    line the measured ``informed`` (facts the listener first learnt from it) and ``tie`` (the
    listener's sentiment change toward the speaker over the conversation), each the mean over the
    turns the answer made; empty for critic and scorer turns (scored as one number)."""


class KTORow(BaseModel):
    prompt: list[Message]
    completion: list[Message]
    label: bool
    agent_id: str
    role: str
    kind: str
    source: str
    tick: int
    reward: float
    advantage: float
    peer_reward: float | None = None
    peer_advantage: float | None = None
    scores: dict[str, float] = {}


class DPORow(BaseModel):
    prompt: list[Message]
    chosen: list[Message]
    rejected: list[Message]
    margin: float
    agent_id: str
    rejected_agent_id: str
    kind: str
    group: str
    chosen_source: str
    rejected_source: str
    chosen_scores: dict[str, float] = {}
    rejected_scores: dict[str, float] = {}


class GRPORow(BaseModel):
    prompt: list[Message]
    persona: str
    scene: str
    rubric: str
    kind: str
    agent_id: str
    source: str
    reward: float
    advantage: float
    scores: dict[str, float] = {}


@dataclass
class Example:
    """One answer an agent wrote, with the rewards of the turn(s) it made."""

    agent_id: str
    role: str
    kind: str
    purpose: str
    call_id: int
    group: str
    tick: int
    scene: str
    prompt: list[dict[str, str]]
    completion: str
    rewards: list[float] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    peer: list[tuple[float, float]] = field(default_factory=list)
    item_scores: list[dict[str, int | None]] = field(default_factory=list)
    """The judge's rubric items, and for a line the measured dimensions (``rewards.measured``), per turn."""

    @property
    def scores(self) -> dict[str, float]:
        """Each dimension's mean over this answer's turns (items a judgement left out are skipped)."""
        items: dict[str, list[float]] = defaultdict(list)
        for judged in self.item_scores:
            for item, value in judged.items():
                if isinstance(value, (int, float)):
                    items[item].append(float(value))
        return {item: sum(v) / len(v) for item, v in items.items()}

    @property
    def reward(self) -> float:
        return sum(self.rewards) / len(self.rewards)

    @property
    def advantage(self) -> float:
        return sum(self.advantages) / len(self.advantages)

    @property
    def source(self) -> str:
        return ",".join(self.sources)

    def answer(self) -> list[dict[str, str]]:
        return [{"role": "assistant", "content": self.completion}]


@dataclass
class ExportSummary:
    out: Path
    files: dict[str, int]
    """Relative path -> rows written."""
    per_agent: dict[str, dict[str, int]]
    """Agent -> format -> rows."""
    not_exportable: int
    """Judged turns with no usable LLM answer behind them."""


def _by_ids(con: sqlite3.Connection, table: str, run_id: str, ids: set[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), CHUNK):
        chunk = ordered[start:start + CHUNK]
        marks = ",".join("?" * len(chunk))
        for r in con.execute(f"select id, purpose, messages, completion, parse_ok, fallback from [{table}] "
                             f"where run_id = ? and id in ({marks})", (run_id, *chunk)):
            out[r["id"]] = dict(r)
    return out


def _usable(call: dict[str, Any] | None) -> bool:
    """An answer worth training on: parsed, not a default, and the first attempt (a retry's prompt
    ends with the rejected answer and the engine's complaint about it)."""
    return (call is not None and bool(call["parse_ok"]) and not call["fallback"] and call["completion"] is not None
            and not call.get("attempt"))


def collect(db_path: Path) -> tuple[str, dict[str, str], list[Example], int]:
    """(run id, agent -> persona JSON, the examples in row order, turns not exportable) from run.db."""
    try:
        con = connect_ro(db_path)
    except sqlite3.Error as exc:
        raise InputError(Problem(str(db_path), f"cannot read run.db: {exc}")) from None
    try:
        first = con.execute("select run_id from runs limit 1").fetchone()
        if first is None:
            raise InputError(Problem(str(db_path), "run.db holds no run"))
        run_id = first[0]
        tables = table_names(con)
        if not {"rewards", "reward_calls"} <= tables:
            raise InputError(Problem(str(db_path), "no rewards in run.db yet: run `agora rewards RUN_DIR` first"))
        personas = {r["agent_id"]: r["persona"] for r in con.execute(
            "select agent_id, persona from agents where run_id = ?", (run_id,))}
        rows = [dict(r) for r in con.execute("select * from rewards where run_id = ? order by id", (run_id,))]
        if not rows:
            raise InputError(Problem(str(db_path), "no rewards in run.db yet: run `agora rewards RUN_DIR` first"))
        own = _by_ids(con, "llm_calls", run_id, {r["llm_call_id"] for r in rows if r["role"] == "actor"
                                                 and r["llm_call_id"] is not None})
        peer = _by_ids(con, "reward_calls", run_id, {r["reward_call_id"] for r in rows
                                                     if r["role"] in ("critic", "scorer") and r["reward_call_id"]})
        did = measured(con, run_id)
    except sqlite3.Error as exc:
        raise InputError(Problem(str(db_path), f"cannot read run.db: {exc}")) from None
    finally:
        con.close()
    examples: dict[tuple[str, int], Example] = {}
    speaker = {(r["source_table"], r["source_id"]): (r["reward"], r["advantage"]) for r in rows
               if r["role"] == "speaker"}
    missing = 0
    for r in rows:
        if r["role"] == "speaker":
            continue
        table, call_id = ("llm_calls", r["llm_call_id"]) if r["role"] == "actor" else ("reward_calls",
                                                                                       r["reward_call_id"])
        call = (own if table == "llm_calls" else peer).get(call_id) if call_id is not None else None
        if not (_usable(call) if r["role"] == "actor" else call is not None):
            missing += r["role"] == "actor"
            continue
        assert call is not None and call_id is not None
        key = (table, call_id)
        if key not in examples:
            examples[key] = Example(r["agent_id"], r["role"], r["kind"], call["purpose"], call_id, r["group_key"],
                                    r["tick"], r["scene"] or "", plain(json.loads(call["messages"])), call["completion"] or "")
        ex = examples[key]
        ex.rewards.append(r["reward"])
        ex.advantages.append(r["advantage"])
        ex.sources.append(f"{r['source_table']}:{r['source_id']}")
        if r["role"] == "actor" and r["scores"]:
            judged = json.loads(r["scores"])
            if isinstance(judged, dict):
                ex.item_scores.append({**judged, **did.get((r["source_table"], r["source_id"]), {})})
        if r["role"] == "actor" and (r["source_table"], r["source_id"]) in speaker:
            ex.peer.append(speaker[(r["source_table"], r["source_id"])])
    return run_id, personas, list(examples.values()), missing


def sft_rows(examples: list[Example], top: float) -> list[SFTRow]:
    """Each agent's best ``top`` share of its own turns (at least one), by reward, then advantage."""
    by_agent: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        if ex.role == "actor":
            by_agent[ex.agent_id].append(ex)
    chosen: set[int] = set()
    for exs in by_agent.values():
        best = sorted(exs, key=lambda e: (-e.reward, -e.advantage, e.call_id))
        chosen.update(id(e) for e in best[:max(1, math.ceil(top * len(exs)))])
    return [SFTRow(messages=[*ex.prompt, *ex.answer()], agent_id=ex.agent_id, kind=ex.kind, source=ex.source,
                   tick=ex.tick, reward=ex.reward, advantage=ex.advantage, scores=ex.scores)
            for ex in examples if id(ex) in chosen]


def kto_rows(examples: list[Example]) -> list[KTORow]:
    """Desirable (advantage > 0) and undesirable (< 0) turns; a turn exactly at its group's mean
    (a group of one, or all equal) says nothing either way and is left out."""
    out = []
    for ex in examples:
        if ex.advantage == 0:
            continue
        peer = {}
        if ex.peer:
            peer = {"peer_reward": sum(p[0] for p in ex.peer) / len(ex.peer),
                    "peer_advantage": sum(p[1] for p in ex.peer) / len(ex.peer)}
        out.append(KTORow(prompt=ex.prompt, completion=ex.answer(), label=ex.advantage > 0, agent_id=ex.agent_id,
                          role=ex.role, kind=ex.kind, source=ex.source, tick=ex.tick, reward=ex.reward,
                          advantage=ex.advantage, scores=ex.scores, **peer))
    return out


def dpo_rows(examples: list[Example]) -> list[DPORow]:
    """Every pair of the agents' own answers in one group to the same kind of question (purpose)
    whose rewards differ: the better one's prompt, chosen = its answer, rejected = the other's.
    In a town one agent rarely answers the same kind of question twice in one group (one action
    a tick), so pairs are mostly across agents: a contextual negative, see docs/rewards.md."""
    groups: dict[tuple[str, str], list[Example]] = defaultdict(list)
    for ex in examples:
        if ex.role == "actor":
            groups[(ex.group, ex.purpose)].append(ex)
    out = []
    for (group, _), exs in groups.items():
        for a, b in combinations(exs, 2):
            if a.reward == b.reward:
                continue
            hi, lo = (a, b) if a.reward > b.reward else (b, a)
            out.append(DPORow(prompt=hi.prompt, chosen=hi.answer(), rejected=lo.answer(), margin=hi.reward - lo.reward,
                              agent_id=hi.agent_id, rejected_agent_id=lo.agent_id, kind=hi.kind, group=group,
                              chosen_source=hi.source, rejected_source=lo.source,
                              chosen_scores=hi.scores, rejected_scores=lo.scores))
    return out


def grpo_rows(examples: list[Example], personas: dict[str, str]) -> list[GRPORow]:
    return [GRPORow(prompt=ex.prompt, persona=personas.get(ex.agent_id, "{}"), scene=ex.scene,
                    rubric=rubric.text(ex.kind), kind=ex.kind, agent_id=ex.agent_id, source=ex.source,
                    reward=ex.reward, advantage=ex.advantage, scores=ex.scores)
            for ex in examples if ex.role == "actor"]


def _agent_of(row: BaseModel) -> str:
    return str(getattr(row, "agent_id"))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


def export(db_path: Path, out: Path, fmt: str = "trl", top: float = 0.25) -> ExportSummary:
    """Write the TRL files for the rewards in ``db_path`` into ``out`` (refused if it holds an export)."""
    if fmt not in FORMATS:
        raise InputError(Problem("--format", f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}"))
    if not 0 < top <= 1:
        raise InputError(Problem("--sft-top", "must be a share of turns above 0 and at most 1"))
    if (out / "manifest.json").exists():
        raise InputError(Problem(str(out), "already holds an export (manifest.json); choose another --export"))
    run_id, personas, examples, missing = collect(db_path)
    try:
        made = {"sft": sft_rows(examples, top), "kto": kto_rows(examples), "dpo": dpo_rows(examples),
                "grpo": grpo_rows(examples, personas)}
    except ValidationError as exc:  # a row that does not fit its trainer's format is a bug, said plainly
        raise RunError(f"{db_path}: rewards rows do not make valid training rows: {exc}") from None
    files: dict[str, int] = {}
    per_agent: dict[str, dict[str, int]] = defaultdict(dict)
    try:
        for name, rows in made.items():
            if rows:
                files[f"town/{name}.jsonl"] = _write(out / "town" / f"{name}.jsonl", rows)
            split: dict[str, list[BaseModel]] = defaultdict(list)
            for row in rows:
                split[_agent_of(row)].append(row)
            for agent in sorted(split):
                files[f"agents/{_safe(agent)}/{name}.jsonl"] = _write(
                    out / "agents" / _safe(agent) / f"{name}.jsonl", split[agent])
                per_agent[agent][name] = len(split[agent])
        manifest = {"run_id": run_id, "format": fmt, "created_at": datetime.now(timezone.utc).isoformat(
            timespec="seconds"), "sft_top": top, "files": files, "not_exportable": missing,
            "trainers": {"sft": "SFTTrainer", "kto": "KTOTrainer", "dpo": "DPOTrainer",
                         "grpo": "GRPOTrainer, RLOOTrainer"}}
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(Problem(str(out), f"cannot write: {exc.strerror or exc}")) from None
    return ExportSummary(out, files, dict(per_agent), missing)


def _write(path: Path, rows: list[Any]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(row.model_dump_json() + "\n")  # every row has every column: datasets infers them per chunk
    return len(rows)
