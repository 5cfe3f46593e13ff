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
from simulation.cognition.phase import Phase
from simulation.cognition.context import situation
from simulation.cognition.schemas import Insights, Questions, insights_model, questions_model
from simulation.core import MemoryKind, Provenance, Purpose, Source
from simulation.memory.stream import MemoryNode

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

RECENT = 100
N_QUESTIONS = 3
CHARS_PER_TOKEN = 4
RESERVED_TOKENS = 700
"""Of the context window: the system message, instructions and the answer."""


def recent_for_questions(nodes: list[MemoryNode], context_tokens: int) -> list[MemoryNode]:
    """The 100 most recent of ``nodes``, newest kept first when they would not fit the context window."""
    budget = max(0, context_tokens - RESERVED_TOKENS) * CHARS_PER_TOKEN
    chosen: list[MemoryNode] = []
    for node in reversed(nodes[-RECENT:]):
        budget -= len(node.text) + 4
        if budget < 0:
            break
        chosen.append(node)
    return chosen[::-1]


async def _insights(me: AgentState, mind: Mind, question: str,
                    nodes: list[MemoryNode]) -> list[tuple[str, tuple[int, ...]]]:
    if not nodes:
        return []
    model = insights_model(len(nodes))
    msgs = prompts.messages(
        me.system_prompt, "insights.j2", **situation(me, mind), question=question,
        statements=[n.text for n in nodes],
        example=model(insights=[{"insight": nodes[0].text[:100], "evidence": [1]}]).model_dump_json(),
    )
    answer = await mind.ask(me, msgs, model, default=Insights(insights=[]), purpose=Purpose.INSIGHTS,
                            max_tokens=240)
    if not answer.ok:
        return []
    out = []
    for insight in answer.value.insights:
        evidence = tuple(dict.fromkeys(nodes[i - 1].id for i in insight.evidence if 1 <= i <= len(nodes)))
        text = insight.insight.strip()
        if evidence and text:
            out.append((text, evidence))
    return out


async def reflect(me: AgentState, mind: Mind) -> list[MemoryNode]:
    """Reflect once; the counter restarts whatever the model answers."""
    stream = mind.memories(me.id)
    stream.since_reflection = 0.0
    stream.reflected_upto = stream.nodes[-1].id if stream.nodes else 0
    recent = recent_for_questions(stream.nodes, mind.settings.context_tokens)
    if not recent:
        return []
    qmodel = questions_model(N_QUESTIONS)
    first = me.first_name
    msgs = prompts.messages(
        me.system_prompt, "questions.j2", first=first, memories=[n.text for n in recent],
        n=N_QUESTIONS, example=qmodel(questions=[f"What matters most to {first} right now?",
                                                 f"Whom does {first} care about?",
                                                 f"What is {first} planning?"]).model_dump_json(),
    )
    answer = await mind.ask(me, msgs, qmodel, default=Questions(questions=[]), purpose=Purpose.QUESTIONS,
                            max_tokens=128)
    if not answer.ok:
        return []
    questions = [q.strip() for q in answer.value.questions]
    retrieved = await mind.retrieve_many(me.id, questions, Purpose.REFLECTION)
    found = await asyncio.gather(*(_insights(me, mind, q, nodes) for q, nodes in zip(questions, retrieved)))
    made: list[MemoryNode] = []
    for insights in found:
        for text, evidence in insights:
            depth = 1 + max(mind.memory(i).depth for i in evidence)
            made.append(mind.remember(me.id, MemoryKind.REFLECTION, text, Provenance(Source.REFLECTED),
                                      evidence=evidence, depth=depth))
    if made:
        mind.record(me, "reflection", f"{me.persona.name} reflects: {made[0].text}",
                    {"memory_ids": [n.id for n in made]})
    return made


class Reflect(Phase):
    """Everyone who thought or talked this tick and whose new memories' importance reached the
    scenario's ``memory.reflection_threshold`` (not the background crowd)."""

    name = "reflect"

    def due(self, me: AgentState, mind: Mind) -> bool:
        return (not me.crowd and me.id in mind.notes.thinking
                and mind.memories(me.id).since_reflection >= mind.settings.reflection_threshold)

    async def run(self, me: AgentState, mind: Mind) -> None:
        await reflect(me, mind)
