"""One utterance in an open conversation, conditioned on memories of the partner and the dialogue."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.schemas import UtteranceAnswer

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


async def utter(agent: PersonaAgent, conv: Conversation) -> tuple[UtteranceAnswer, int | None]:
    """The next thing ``agent`` says (and the llm_calls id that produced it)."""
    m = agent.model
    other = m.people[conv.partner(agent.agent_id)]
    names = {a: m.people[a].first_name for a in conv.participants}
    dialogue = [f'{names[s]}: "{t}"' for s, t in conv.lines[-DIALOGUE_LINES:]]
    last = conv.lines[-1][1] if conv.lines else ""
    ctx = agent.prompt_context(query=f"{other.persona.name} {last}")
    msgs = prompts.messages(
        agent.system_prompt, "utterance.j2", **ctx, other_first=other.first_name,
        relationship=agent.persona.relationships.get(other.agent_id, ""), dialogue=dialogue,
    )
    default = UtteranceAnswer(say=f"Sorry {other.first_name}, I have to go.", end_conversation=True)
    earlier = [t for _, t in conv.lines]
    answer = await m.llm.ask(msgs, UtteranceAnswer, default=default, purpose="utterance",
                             agent_id=agent.agent_id, tick=m.tick, max_tokens=80,
                             check=lambda v: _check_utterance(v, earlier))
    return answer.value, answer.call_id
