"""Conversations: each utterance is conditioned on the speaker's retrieved memories about the
partner, its view of the partner and the dialogue so far; afterwards each side writes a recap
(a summary memory, its new view of the other, a feeling from -5 to 5 and the importance)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.phase import Phase
from simulation.cognition.context import context, situation
from simulation.cognition.schemas import RecapAnswer, UtteranceAnswer, clip
from simulation.core import MemoryKind, Provenance, Purpose, Source

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind
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


def _dialogue(mind: Mind, conv: Conversation, lines: int | None = DIALOGUE_LINES) -> list[str]:
    names = {a: mind.person(a).first_name for a in conv.participants}
    chosen = conv.lines if lines is None else conv.lines[-lines:]
    return [f'{names[s]}: "{t}"' for s, t in chosen]


async def utter(me: AgentState, mind: Mind, conv: Conversation) -> tuple[UtteranceAnswer, int | None]:
    """The next thing ``me`` says (and the llm_calls id that produced it)."""
    other = mind.person(conv.partner(me.id))
    last = conv.lines[-1][1] if conv.lines else ""
    ctx = await context(me, mind, f"{other.persona.name}. {last}", Purpose.UTTERANCE,
                        exclude=conv.memory_ids.get(me.id, ()))
    tie = mind.tie(me.id, other.id)
    msgs = prompts.messages(
        me.system_prompt, "utterance.j2", **ctx, other_first=other.first_name,
        relationship=tie.view if tie else "", dialogue=_dialogue(mind, conv),
    )
    default = UtteranceAnswer(say=f"Sorry {other.first_name}, I have to go.", end_conversation=True)
    earlier = [t for _, t in conv.lines]
    answer = await mind.ask(me, msgs, UtteranceAnswer, default=default, purpose=Purpose.UTTERANCE, max_tokens=80,
                            check=lambda v: _check_utterance(v, earlier))
    return answer.value, answer.call_id


def gist(mind: Mind, conv: Conversation, limit: int = 200) -> str:
    """The dialogue squeezed into one line (the recap's safe default)."""
    text = " / ".join(line.replace('"', "") for line in _dialogue(mind, conv, None))
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def recap(me: AgentState, mind: Mind, conv: Conversation) -> None:
    """After a conversation: store its summary, rate it (and its utterances), update the relationship."""
    other = mind.person(conv.partner(me.id))
    tie = mind.tie(me.id, other.id)
    feeling = round((tie.sentiment if tie else 0.0) * 5)
    default = RecapAnswer(summary=gist(mind, conv), view=(clip(tie.view, 160) if tie and tie.view else
                          f"{me.first_name} has talked with {other.first_name}."), feeling=feeling, importance=3)
    msgs = prompts.messages(
        me.system_prompt, "recap.j2", **situation(me, mind), other_first=other.first_name,
        other_name=other.persona.name, conv_place=mind.place_name(conv.place), relationship=tie.view if tie else "",
        dialogue=_dialogue(mind, conv, None), example=default.model_dump_json(),
    )
    answer = await mind.ask(me, msgs, RecapAnswer, default=default, purpose=Purpose.RECAP, max_tokens=140)
    value = answer.value
    mind.remember(me.id, MemoryKind.CONVERSATION, f"Talked with {other.persona.name} at "
                  f"{mind.place_name(conv.place)}: {value.summary.strip()}",
                  Provenance(Source.RECAPPED, from_agent=other.id, conversation_id=conv.id, quote=value.summary),
                  importance=value.importance)
    for memory_id in conv.memory_ids.get(me.id, []):
        mind.rate(mind.memory(memory_id), value.importance)
    mind.after_conversation(me.id, other.id, value.feeling / 5, value.view)


class Converse(Phase):
    """One line in every open conversation, oldest conversation first: its next speaker speaks;
    the conversation ends on a goodbye or at the scenario's turn limit."""

    name = "converse"

    def select(self, mind: Mind) -> list[AgentState]:
        talking = mind.open_conversations()
        mind.notes.talking = [a for c in talking for a in c.participants]
        mind.notes.conversations = len(talking)
        return [mind.person(c.next_speaker) for c in talking]

    async def run(self, me: AgentState, mind: Mind) -> None:
        assert me.conversation_id is not None
        conv = mind.conversation(me.conversation_id)
        answer, call_id = await utter(me, mind, conv)
        mind.say(conv, me, answer.say, call_id)
        if answer.end_conversation:
            mind.end_conversation(conv, "goodbye")
        elif conv.turns >= mind.settings.max_conversation_turns:
            mind.end_conversation(conv, "turn limit")
        else:
            conv.next_speaker = conv.partner(me.id)


class Recap(Phase):
    """Both sides of every conversation that ended this tick write its recap, in the order the
    conversations ended."""

    name = "recap"

    def __init__(self) -> None:
        self.todo: dict[str, list[Conversation]] = {}

    def select(self, mind: Mind) -> list[AgentState]:
        self.todo = {}
        chosen = []
        for conv in mind.take_ended_conversations():
            for person_id in conv.participants:
                self.todo.setdefault(person_id, []).append(conv)
                chosen.append(mind.person(person_id))
        return chosen

    async def run(self, me: AgentState, mind: Mind) -> None:
        await recap(me, mind, self.todo[me.id].pop(0))
