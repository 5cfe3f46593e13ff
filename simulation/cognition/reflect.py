"""Reflection: when the importance of an agent's new memories reaches the threshold, it steps back.

As in Generative Agents: three salient high-level questions from the 100 most recent
memories (as many as fit the model's context window), a retrieval per question (one
batch), and up to five insights per question (one batch), each citing the numbered
statements it rests on. Insights become ``reflection`` memories with their evidence ids
and a depth one more than their deepest evidence; they are rated for importance when the
agent next thinks, and do not themselves count towards the next reflection.

Both questions are sized by rendering them and counting their tokens as the backend will
(``Mind.count_tokens``): the newest memories, and the most relevant statements, that fit the
context window with room for the answer and the client's one retry. A question that does not
fit even with a single memory is not asked: the agent skips reflecting and a
``reflection_skipped`` event says why (never a request the backend would refuse).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.phase import Phase
from simulation.cognition.context import situation
from simulation.cognition.schemas import Insights, Questions, insights_model, questions_model
from simulation.core import EventKind, MemoryKind, Provenance, Purpose, Source
from simulation.memory.stream import MemoryNode

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

RECENT = 100
N_QUESTIONS = 3
QUESTIONS_TOKENS = 128
"""``max_tokens`` of the questions' answer."""
INSIGHTS_TOKENS = 240
"""``max_tokens`` of an insights answer."""
RETRY_TOKENS = 64
"""The client retries a rejected answer once, showing it (up to ``max_tokens`` more) and a line on
why it was rejected: room for that line and the two messages' markers."""

Chat = list[dict[str, str]]


def room(max_tokens: int) -> int:
    """Tokens a question needs in the context window besides its prompt: its answer, and for the
    client's one retry the rejected answer shown again and the line on why."""
    return 2 * max_tokens + RETRY_TOKENS


def fits(mind: Mind, me: AgentState, messages: Chat, max_tokens: int) -> bool:
    """Whether ``me`` asking ``messages`` (and retrying once) stays within their model's context window."""
    return mind.count_tokens(me, messages) + room(max_tokens) <= mind.settings_of(me).context_tokens


def most_that_fit(n: int, fit: Callable[[int], bool], least: int = 0) -> int:
    """The largest k in least..n for which ``fit(k)`` (which holds for every smaller k where it
    holds for k), by binary search: ``fit`` is asked at most 2 + log2(n) times; ``least - 1``
    when not even ``least`` fits."""
    if n < least:
        return least - 1
    if fit(n):
        return n
    lo, hi = least - 1, n  # fit(lo) holds (or lo is below the range); fit(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fit(mid):
            lo = mid
        else:
            hi = mid
    return lo


def questions_messages(me: AgentState, memories: list[str]) -> Chat:
    """The questions prompt for these memory texts (oldest first), the persona's system message first."""
    qmodel = questions_model(N_QUESTIONS)
    first = me.first_name
    return prompts.messages(
        me.system_prompt, "questions.j2", first=first, memories=memories,
        n=N_QUESTIONS, example=qmodel(questions=[f"What matters most to {first} right now?",
                                                 f"Whom does {first} care about?",
                                                 f"What is {first} planning?"]).model_dump_json(),
    )


def recent_for_questions(me: AgentState, mind: Mind, nodes: list[MemoryNode]) -> tuple[list[MemoryNode], Chat]:
    """The most recent of ``nodes`` (at most 100; oldest first, the newest kept when not all fit)
    whose questions prompt, counted as the backend will see it, fits the context window with room
    for the answer and a retry (``fits``), and that prompt. No memories when not even one fits."""
    recent = nodes[-RECENT:]
    rendered: dict[int, Chat] = {}

    def prompt(k: int) -> Chat:
        if k not in rendered:
            rendered[k] = questions_messages(me, [n.text for n in recent[len(recent) - k:]])
        return rendered[k]

    k = most_that_fit(len(recent), lambda k: fits(mind, me, prompt(k), QUESTIONS_TOKENS), least=1)
    if k < 1:
        return [], prompt(0)
    return recent[len(recent) - k:], prompt(k)


def _skipped(me: AgentState, mind: Mind, question: str, messages: Chat, max_tokens: int) -> None:
    """Record that a question was not asked: even with one memory (statement) its prompt, answer
    and retry would not fit the context window."""
    tokens = mind.count_tokens(me, messages)
    window = mind.settings_of(me).context_tokens
    mind.record(me, EventKind.REFLECTION_SKIPPED,
                f"{me.persona.name} does not reflect: the {question} prompt takes {tokens} tokens with a "
                f"single {'memory' if question == Purpose.QUESTIONS else 'statement'}, and its answer and "
                f"a retry {room(max_tokens)} more: over the context window of {window}",
                {"purpose": str(question), "prompt_tokens": tokens, "reserved_tokens": room(max_tokens),
                 "context_tokens": window})


def insights_messages(me: AgentState, mind: Mind, question: str, nodes: list[MemoryNode]) -> Chat:
    """The insights prompt for ``question`` over these statements (at least one)."""
    model = insights_model(len(nodes))
    return prompts.messages(
        me.system_prompt, "insights.j2", **situation(me, mind), question=question,
        statements=[n.text for n in nodes],
        example=model(insights=[{"insight": nodes[0].text[:100], "evidence": [1]}]).model_dump_json(),
    )


async def _insights(me: AgentState, mind: Mind, question: str,
                    nodes: list[MemoryNode]) -> list[tuple[str, tuple[int, ...]]]:
    """Insights from the retrieved ``nodes`` (best first): as many of the best as fit the window."""
    if not nodes:
        return []
    k = most_that_fit(len(nodes), lambda k: fits(mind, me, insights_messages(me, mind, question, nodes[:k]),
                                                 INSIGHTS_TOKENS), least=1)
    if k < 1:
        _skipped(me, mind, Purpose.INSIGHTS, insights_messages(me, mind, question, nodes[:1]), INSIGHTS_TOKENS)
        return []
    nodes = nodes[:k]
    model = insights_model(k)
    msgs = insights_messages(me, mind, question, nodes)
    answer = await mind.ask(me, msgs, model, default=Insights(insights=[]), purpose=Purpose.INSIGHTS,
                            max_tokens=INSIGHTS_TOKENS)
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
    mind.reflected(me.id)
    stream = mind.memories(me.id)
    if not stream.nodes:
        return []
    recent, msgs = recent_for_questions(me, mind, stream.nodes)
    if not recent:
        _skipped(me, mind, Purpose.QUESTIONS, questions_messages(me, [stream.nodes[-1].text]), QUESTIONS_TOKENS)
        return []
    answer = await mind.ask(me, msgs, questions_model(N_QUESTIONS), default=Questions(questions=[]),
                            purpose=Purpose.QUESTIONS, max_tokens=QUESTIONS_TOKENS)
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
        mind.record(me, EventKind.REFLECTION, f"{me.persona.name} reflects: {made[0].text}",
                    {"memory_ids": [n.id for n in made]})
    return made


class Reflect(Phase):
    """Everyone who thought or talked this tick and whose new memories' importance reached the
    scenario's ``memory.reflection_threshold`` (not the background crowd)."""

    name = "reflect"
    reads = frozenset({"deciding"})
    reads_if_any = frozenset({"talking"})

    def due(self, me: AgentState, mind: Mind) -> bool:
        return (not me.crowd and me.id in mind.notes.thinking
                and mind.memories(me.id).since_reflection >= mind.settings.reflection_threshold)

    async def run(self, me: AgentState, mind: Mind) -> None:
        await reflect(me, mind)
