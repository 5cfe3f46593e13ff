"""Reflection: when the importance of an agent's new memories reaches the threshold, it steps back.

As in Generative Agents: three salient high-level questions from the 100 most recent
memories (as many as fit the model's context window), a retrieval per question (one
batch), and up to five insights per question (one batch), each citing the numbered
statements it rests on. Insights become ``reflection`` memories with their evidence ids
and a depth one more than their deepest evidence; they are rated for importance when the
agent next thinks, and do not themselves count towards the next reflection.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import ask, situation
from simulation.cognition.schemas import Insights, Questions, insights_model, questions_model
from simulation.memory.stream import REFLECTION, MemoryNode

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent

RECENT = 100
N_QUESTIONS = 3
CHARS_PER_TOKEN = 4
RESERVED_TOKENS = 700
"""Of the context window: the system message, instructions and the answer."""


def recent_for_questions(agent: PersonaAgent) -> list[MemoryNode]:
    """The 100 most recent memories, newest kept first when they would not fit the context window."""
    budget = max(0, agent.model.scenario.llm.context_tokens - RESERVED_TOKENS) * CHARS_PER_TOKEN
    chosen: list[MemoryNode] = []
    for node in reversed(agent.memory.recent(RECENT)):
        budget -= len(node.text) + 4
        if budget < 0:
            break
        chosen.append(node)
    return chosen[::-1]


async def _insights(agent: PersonaAgent, question: str, nodes: list[MemoryNode]) -> list[tuple[str, tuple[int, ...]]]:
    if not nodes:
        return []
    model = insights_model(len(nodes))
    msgs = prompts.messages(
        agent.system_prompt, "insights.j2", **situation(agent), question=question,
        statements=[n.text for n in nodes],
        example=model(insights=[{"insight": nodes[0].text[:100], "evidence": [1]}]).model_dump_json(),
    )
    answer = await ask(agent, msgs, model, default=Insights(insights=[]), purpose="insights", max_tokens=240)
    if not answer.ok:
        return []
    out = []
    for insight in answer.value.insights:
        evidence = tuple(dict.fromkeys(nodes[i - 1].id for i in insight.evidence if 1 <= i <= len(nodes)))
        text = insight.insight.strip()
        if evidence and text:
            out.append((text, evidence))
    return out


async def reflect(agent: PersonaAgent) -> list[MemoryNode]:
    """Reflect once; the counter restarts whatever the model answers."""
    m = agent.model
    agent.memory.since_reflection = 0.0
    agent.memory.reflected_upto = agent.memory.nodes[-1].id if agent.memory.nodes else 0
    recent = recent_for_questions(agent)
    if not recent:
        return []
    qmodel = questions_model(N_QUESTIONS)
    msgs = prompts.messages(
        agent.system_prompt, "questions.j2", first=agent.first_name, memories=[n.text for n in recent],
        n=N_QUESTIONS, example=qmodel(questions=[f"What matters most to {agent.first_name} right now?",
                                                 f"Whom does {agent.first_name} care about?",
                                                 f"What is {agent.first_name} planning?"]).model_dump_json(),
    )
    answer = await ask(agent, msgs, qmodel, default=Questions(questions=[]), purpose="questions", max_tokens=128)
    if not answer.ok:
        return []
    questions = [q.strip() for q in answer.value.questions]
    retrieved = await m.memory.retrieve_many(agent.agent_id, questions, "reflection")
    found = await asyncio.gather(*(_insights(agent, q, nodes) for q, nodes in zip(questions, retrieved)))
    made: list[MemoryNode] = []
    for insights in found:
        for text, evidence in insights:
            depth = 1 + max(m.memory.nodes[i].depth for i in evidence)
            made.append(agent.remember(REFLECTION, text, evidence=evidence, depth=depth))
    if made:
        m.log_event(agent, "reflection", f"{agent.persona.name} reflects: {made[0].text}",
                    {"memory_ids": [n.id for n in made]})
    return made
