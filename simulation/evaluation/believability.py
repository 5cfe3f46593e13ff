"""The believability interview (Generative Agents, Park et al. 2023, section 6.1).

Generative Agents judged believability by interviewing each agent at the end of the run in five
categories (self-knowledge, memory, plans, reactions, reflections; five questions each), the
agent answering from its memory stream, and had judges rank the answers of the full architecture
against ablations. This suite is the interview: each question is answered in a fresh context by
the agent's model, with the memories Generative Agents' retrieval ranks first for it (recency,
importance, relevance over the run's own stream, read back from run.db: ``evaluation.recall``),
so a run with reflection, planning or retrieval switched off answers from what that run made.
A persona file or scenario (no run) answers from its seed memories alone.

The answers are what a judge ranks across conditions, agent by agent and question by question
(``agora eval rank``, issue 35's next step); this suite records them (``details.qa`` of each
agent's rows in eval.db and results.json) and counts the ones the model failed to give.
"""

from __future__ import annotations

import asyncio
import json
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from simulation.evaluation import prompts
from simulation.evaluation.interview import OpenAnswer
from simulation.evaluation.recall import Stream, recall, stream
from simulation.evaluation.session import Metric, Session
from simulation.evaluation.targets import Target
from simulation.rundb import connect_ro

SUITE = "believability"
CATEGORIES = ("self_knowledge", "memory", "plans", "reactions", "reflections")


@lru_cache(maxsize=1)
def questionnaire() -> dict[str, list[str]]:
    text = resources.files("simulation.evaluation").joinpath("data/believability.yaml").read_text("utf-8")
    return yaml.safe_load(text)["categories"]


def planned(session: Session, targets: list[Target]) -> int:
    return len(targets) * sum(len(questionnaire()[c]) for c in CATEGORIES)


def others(t: Target) -> tuple[str, str]:
    """(the first and the second person in ``t``'s relationships, by name; one of them alone when
    there is one): who the interview's {other} and {known} are. Taken from the persona, not the run,
    so every condition's agents are asked the very same questions and a judge can set their answers
    side by side (``evaluation.ranking``)."""
    names: dict[str, str] = {}
    if t.run_db is not None and t.run_id is not None:
        con = connect_ro(t.run_db)
        try:
            for agent_id, persona in con.execute("select agent_id, persona from agents where run_id = ?", (t.run_id,)):
                names[agent_id] = json.loads(persona).get("name", agent_id)
        finally:
            con.close()
    shown = [names.get(p, prompts.person_name(p)) for p in t.persona.relationships]
    other = shown[0] if shown else "your neighbour"
    return other, shown[1] if len(shown) > 1 else other


async def interview(session: Session, t: Target, people: tuple[str, str], memories: Stream | None,
                    vectors: dict[str, Any]) -> dict[str, Any]:
    other, known = people
    ctx = prompts.persona_context(t.persona, [] if memories is not None else t.memories)
    asked: list[tuple[str, int, str, list[str]]] = []
    for category in CATEGORIES:
        for i, text in enumerate(questionnaire()[category]):
            question = text.format(other=other, known=known)
            recalled = recall(memories, vectors.get(question)) if memories is not None else []
            asked.append((category, i, question, recalled))
    answers = await asyncio.gather(*(
        session.ask("agent", t.key, prompts.agent_messages(ctx, "believability.j2", question=q, recalled=r),
                    OpenAnswer, default=OpenAnswer(answer="-"), purpose=f"bel_{c}_{i}", max_tokens=340)
        for c, i, q, r in asked))
    qa = {c: [] for c in CATEGORIES}
    for (c, _, q, r), a in zip(asked, answers):
        qa[c].append({"question": q, "answer": a.value.answer if a.ok else "", "recalled": r, "call_id": a.call_id})
    return {"key": t.key, "other": other, "known": known, "qa": qa}


async def run(session: Session, targets: list[Target]) -> list[dict[str, Any]]:
    from simulation.memory.embeddings import get_embedder

    people = {t.key: others(t) for t in targets}
    run_agents = [t for t in targets if t.run_db is not None and t.run_id is not None]
    vectors: dict[str, Any] = {}
    streams: dict[str, Stream] = {}
    if run_agents:
        embedder = get_embedder()
        for t in run_agents:
            other, known = people[t.key]
            texts = [q.format(other=other, known=known) for c in CATEGORIES for q in questionnaire()[c]]
            vectors.update(zip(texts, embedder.embed(texts)))
            streams[t.key] = stream(t.run_db, t.run_id, t.agent_id, embedder.dimension())  # type: ignore[arg-type]
    return list(await asyncio.gather(*(interview(session, t, people[t.key], streams.get(t.key), vectors)
                                       for t in targets)))


def metrics(session: Session, targets: list[Target], results: list[dict[str, Any]]) -> list[Metric]:
    out = []
    for t, r in zip(targets, results):
        for category in CATEGORIES:
            rows = r["qa"][category]
            out.append(Metric(SUITE, f"answered_{category}", sum(bool(x["answer"]) for x in rows) / len(rows),
                              t.key, t.run_id, t.agent_id, {"qa": rows, "other": r["other"], "known": r["known"]}))
        everything = [x for c in CATEGORIES for x in r["qa"][c]]
        out.append(Metric(SUITE, "failed", float(sum(not x["answer"] for x in everything)), t.key, t.run_id,
                          t.agent_id, {"asked": len(everything), "persona": t.persona.model_dump(mode="json")}))
    return out


def aggregate(session: Session, results: list[dict[str, Any]], scope: str, run_id: str | None) -> list[Metric]:
    everything = [x for r in results for c in CATEGORIES for x in r["qa"][c]]
    return [Metric(SUITE, "failed", float(sum(not x["answer"] for x in everything)), None, run_id, None,
                   {"scope": scope, "asked": len(everything)})]


__all__ = ["CATEGORIES", "SUITE", "aggregate", "interview", "metrics", "others", "planned", "questionnaire", "run"]
