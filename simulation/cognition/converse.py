"""Conversations: each utterance is conditioned on the speaker's retrieved memories about the
partner, its view of the partner and the dialogue so far; afterwards each side writes a recap
(a summary memory, its new view of the other, a feeling from -5 to 5 and the importance)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import ask, context, situation
from simulation.cognition.schemas import RecapAnswer, UtteranceAnswer, clip

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent
    from simulation.conversation import Conversation

DIALOGUE_LINES = 6
_LETTERS = re.compile(r"[A-Za-z]{2}")


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def strip_echo(text: str, earlier: list[str]) -> str:
    """Drop an opening that repeats an earlier line ("Good morning, Isabella! I'm glad you came."
    after "Good morning, Isabella!") when at least three words of the reply remain."""
    words = text.split()
    for line in earlier:
        head, n = _norm(line), len(line.split())
        if len(head) >= 8 and len(words) - n >= 3 and _norm(" ".join(words[:n])) == head:
            return " ".join(words[n:])
    return text


def check_line(text: str, earlier: list[str]) -> str | None:
    """Why a line is unusable (empty of words, or a repeat of an earlier line), else None."""
    if not _LETTERS.search(text):
        return "says nothing"
    new = _norm(text)
    for line in earlier:
        old = _norm(line)
        if new == old or (min(len(new), len(old)) >= 12 and (old in new or new in old)):
            return "repeats an earlier line"
    return None


def _check_utterance(answer: UtteranceAnswer, earlier: list[str]) -> str | None:
    answer.say = strip_echo(answer.say, earlier)
    return check_line(answer.say, earlier)


def _dialogue(agent: PersonaAgent, conv: Conversation, lines: int | None = DIALOGUE_LINES) -> list[str]:
    m = agent.model
    names = {a: m.people[a].first_name for a in conv.participants}
    chosen = conv.lines if lines is None else conv.lines[-lines:]
    return [f'{names[s]}: "{t}"' for s, t in chosen]


async def utter(agent: PersonaAgent, conv: Conversation) -> tuple[UtteranceAnswer, int | None]:
    """The next thing ``agent`` says (and the llm_calls id that produced it)."""
    m = agent.model
    other = m.people[conv.partner(agent.agent_id)]
    last = conv.lines[-1][1] if conv.lines else ""
    ctx = await context(agent, f"{other.persona.name}. {last}", "utterance",
                        exclude=conv.memory_ids.get(agent.agent_id, ()))
    tie = m.social.tie(agent.agent_id, other.agent_id)
    msgs = prompts.messages(
        agent.system_prompt, "utterance.j2", **ctx, other_first=other.first_name,
        relationship=tie.view if tie else "", dialogue=_dialogue(agent, conv),
    )
    default = UtteranceAnswer(say=f"Sorry {other.first_name}, I have to go.", end_conversation=True)
    earlier = [t for _, t in conv.lines]
    answer = await ask(agent, msgs, UtteranceAnswer, default=default, purpose="utterance", max_tokens=80,
                       check=lambda v: _check_utterance(v, earlier))
    return answer.value, answer.call_id


def gist(agent: PersonaAgent, conv: Conversation, limit: int = 200) -> str:
    """The dialogue squeezed into one line (the recap's safe default)."""
    text = " / ".join(line.replace('"', "") for line in _dialogue(agent, conv, None))
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def recap(agent: PersonaAgent, conv: Conversation) -> None:
    """After a conversation: store its summary, rate it (and its utterances), update the relationship."""
    m = agent.model
    other = m.people[conv.partner(agent.agent_id)]
    tie = m.social.tie(agent.agent_id, other.agent_id)
    feeling = round((tie.sentiment if tie else 0.0) * 5)
    default = RecapAnswer(summary=gist(agent, conv), view=(clip(tie.view, 160) if tie and tie.view else
                          f"{agent.first_name} has talked with {other.first_name}."), feeling=feeling, importance=3)
    msgs = prompts.messages(
        agent.system_prompt, "recap.j2", **situation(agent), other_first=other.first_name,
        other_name=other.persona.name, conv_place=m.town.name(conv.place), relationship=tie.view if tie else "",
        dialogue=_dialogue(agent, conv, None), example=default.model_dump_json(),
    )
    answer = await ask(agent, msgs, RecapAnswer, default=default, purpose="recap", max_tokens=140)
    value = answer.value
    agent.remember("conversation", f"Talked with {other.persona.name} at {m.town.name(conv.place)}: "
                          f"{value.summary.strip()}", importance=value.importance)
    for memory_id in conv.memory_ids.get(agent.agent_id, []):
        m.memory.rate(m.memory.nodes[memory_id], value.importance)
    m.social.after_conversation(agent.agent_id, other.agent_id, value.feeling / 5, value.view)
