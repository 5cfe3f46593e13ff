"""Conversations, a move and a line at a time.

Each turn the speaker first chooses what the line is for from the moves the engine offers
(``cognition.aims``: greet, share news, invite, ask, answer, reply, accept or decline an
invitation, say goodbye), by the model's probabilities over the options' numbers; then writes
the words for that move, conditioned on the speaker's memories about the partner, its view of
the partner and the conversation so far told as moves. A line that echoes an earlier one, says
nothing, calls the wrong person or does not do what its move is for is retried; then one that
only missed its move is said as a plain reply (nothing counted as told), anything else is
replaced by a goodbye (both counted as a fallback). Afterwards each side writes a recap (a summary memory, its new view of the other,
a feeling from -5 to 5 and the importance)."""

from __future__ import annotations

import asyncio
import math
import random
import re
import zlib
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from simulation.cognition import prompts
from simulation.cognition.aims import aim_menu, done_text, example_line, instruction, off_aim, option_text
from simulation.cognition.calibrate import calibrated, content_free
from simulation.cognition.context import context, situation
from simulation.cognition.phase import Phase
from simulation.cognition.schemas import LINE_CHARS, RecapAnswer, UtteranceAnswer, clip
from simulation.cognition.sociability import weighted
from simulation.core import Aim, MemoryKind, Move, Provenance, Purpose, Source
from simulation.rundb.garbled import garbled
from simulation.rundb.names import addressed
from simulation.llm.seeds import derive_seed

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.llm.client import Rating
    from simulation.cognition.mind import Mind
    from simulation.world.conversations import Conversation

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


_SENTENCE_END = re.compile(r"[.!?][\"')]*(?=\s)")


def whole_sentences(text: str, limit: int = LINE_CHARS) -> str:
    """A line the schema's length cut mid-sentence, back to its last whole sentence (when that
    keeps at least three words): a capable model's long line otherwise ends in "... and I was
    wondering if you". Lines shorter than the limit are left as they are (stripped); a blank one is
    returned as it came, for ``check_line`` to refuse (an empty string is no ``UtteranceAnswer``)."""
    if not text.strip():
        return text
    text = text.strip()
    if len(text) < limit - 8 or text[-1:] in ".!?\"')":
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text + " ")]
    kept = text[:ends[-1]] if ends else ""
    return kept if len(kept.split()) >= 3 else text


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


def check_spoken(text: str, earlier: list[str]) -> str | None:
    """``check_line``, and what only a spoken line must not be: a bare word or the prompt's frame
    read back (``rundb.garbled``, the rule ``talk.garbled_share`` counts by)."""
    return check_line(text, earlier) or garbled(text)


WRONG_PERSON = "addresses the wrong person"


def misaddressed(text: str, listener: str, town: list[str]) -> str | None:
    """Why a line calls the wrong person (the speaker, or anyone in ``town`` but the ``listener``,
    by ``rundb.names.addressed``), else None. A first name the listener shares with someone is never wrong."""
    return WRONG_PERSON if addressed(text, [n for n in town if n != listener]) else None


@lru_cache(maxsize=256)
def _label(names: str) -> re.Pattern[str]:
    """A line's opening label naming one of ``names`` ("Walter:", "**Walter Grey:**", '"Walter: '),
    compiled once per set of names (every line is checked against them, as ``rundb.names`` does)."""
    return re.compile(rf"^([\s\"'\u201c\u2018*_]*)(?:{names})(?:\s+[A-Z][\w'-]*)?\s*[*_]*:[*_]*\s*")


def unlabel(text: str, speaker: str, town: list[str]) -> str:
    """A line written as a transcript, back to the speaker's words: a leading label naming the
    speaker ("Walter: Hello, Isabella." said by Walter) is dropped (with the quote it opened), and
    the line is cut where a further turn begins ("... I'll invite everyone. / Isabella: Yes!"):
    what follows is someone else's line, never the speaker's. Format, not content: a capable model
    shown dialogue as "Name: line" (a conversation's gist in memory) writes its own line that way,
    and the label then reads as calling the speaker by name. A label naming anyone else is refused
    by ``_check_utterance`` (the model wrote someone else's line). As Generative Agents' code
    strips "Name:" from a reply."""
    found = _label(re.escape(speaker)).match(text)
    if found:
        text = text[found.end():]
        if re.search("[\"\u201c]", found.group(1)):
            text = re.sub("[\"\u201d]\\s*$", "", text)
    names = "|".join(re.escape(n) for n in sorted({speaker, *town}))
    turn = re.search(rf"(?:\s+/\s*|(?<=[.!?\"\u201d])\s+)(?:{names})(?:\s+[A-Z][\w'-]*)?\s*:", text)
    kept = text[:turn.start()] if turn else text
    return kept if kept.strip() else " "  # nothing but a label: blank, for check_line to refuse (never "")


OTHERS_LINE = "writes someone else's line"


def _check_utterance(answer: UtteranceAnswer, earlier: list[str], move: Move, names: tuple[str, str],
                     town: list[str]) -> str | None:
    answer.say = whole_sentences(strip_echo(unlabel(answer.say, names[0], town), earlier))
    others = [re.escape(n) for n in {names[1], *town} if n != names[0]]
    if others and _label("|".join(sorted(others))).match(answer.say):
        return OTHERS_LINE
    return (check_spoken(answer.say, earlier) or misaddressed(answer.say, names[1], town)
            or off_aim(move, answer.say, names))


def _dialogue(mind: Mind, conv: Conversation, lines: int | None = DIALOGUE_LINES) -> list[str]:
    names = {a: mind.person(a).first_name for a in conv.participants}
    chosen = conv.lines if lines is None else conv.lines[-lines:]
    return [f'{names[s]}: "{t}"' for s, t in chosen]


def _moves(mind: Mind, conv: Conversation, lines: int = DIALOGUE_LINES) -> list[str]:
    """The conversation so far as what each line did ("Daniel greeted Margaret.", "Margaret told
    Daniel: ..."), not its words: a small model shown the last line says it again."""
    names = {a: mind.person(a).first_name for a in conv.participants}
    pairs = list(zip(conv.lines, conv.moves, strict=False))[-lines:]
    return [done_text(move, names[speaker], names[conv.partner(speaker)]) for (speaker, _), move in pairs]


def shuffled(n: int, key: str) -> list[int]:
    """A fixed permutation of ``range(n)`` for ``key``: the order a menu's options are shown in,
    so a model's preference for the first option does not always pick the same kind of move."""
    order = list(range(n))
    random.Random(zlib.crc32(key.encode())).shuffle(order)
    return order


def draw(probabilities: list[float], temperature: float, seed: int, how: str = "sample") -> int:
    """The option a scored choice takes: drawn from ``probabilities`` sharpened or flattened by
    ``temperature`` (p ** (1 / T), renormalised) with a generator seeded from ``seed``, or the most
    probable one (first on ties) for ``how="argmax"`` or a temperature of 0. The seed is the
    question's own (run seed, agent, tick, purpose), so a run replays to the same draw and two
    seeds of one scenario are two replicates, not one trajectory twice."""
    best = max(range(len(probabilities)), key=lambda i: (probabilities[i], -i))
    if how == "argmax" or temperature <= 0:
        return best
    logs = [math.log(p) / temperature if p > 0 else -math.inf for p in probabilities]
    top = max(logs)
    weights = [math.exp(v - top) if v > -math.inf else 0.0 for v in logs]
    point = random.Random(derive_seed(seed, "draw")).random() * sum(weights)
    for i, w in enumerate(weights):
        point -= w
        if point < 0 and w > 0:
            return i
    return best


async def scored_pick(me: AgentState, mind: Mind, msgs: list[dict[str, str]], options: list[str],
                      values: list[float], *, default: float, purpose: str, free: list[dict[str, str]] | None,
                      factors: list[float] | None = None) -> tuple[int | None, Rating]:
    """(the 0-based index of the option drawn, or None when the model could not be asked; the
    rating): the model's probabilities over ``options`` (``Mind.ask_rating``), calibrated against
    the content-free question ``free`` (None: not calibrated), scaled by ``factors`` and drawn
    (``draw``). Every scored choice goes through here: a numbered menu (``choose_number``) and a
    yes-or-no question (``yesno.choose_yes``)."""
    rate = mind.ask_rating(me, msgs, options, values, default=default, purpose=purpose)
    if free is not None:
        rating, baseline = await asyncio.gather(rate, mind.baseline(me, free, options))
    else:
        rating, baseline = await rate, None
    if not rating.probabilities:
        return None, rating
    probabilities = weighted(calibrated(rating.probabilities, baseline if not rating.sampled else None), factors)
    return draw(probabilities, mind.settings_of(me).temperature, rating.seed, mind.settings.choices), rating


async def choose_number(me: AgentState, mind: Mind, msgs: list[dict[str, str]], n: int, *, default: int,
                        purpose: str, template: str, factors: list[float] | None = None) -> tuple[int, int | None]:
    """(the 0-based index of the option chosen from a prompt listing ``n`` numbered options, the
    llm_calls id that chose it): drawn from the model's probabilities over the numbers (``draw``),
    calibrated against the same question with its content blanked (``cognition.calibrate``), or
    the rating's value (the 1-based ``default`` when the model cannot be asked). ``template`` is the
    question's, which the content-free version is rendered from; ``factors`` (one per option) scale
    the calibrated probabilities before the draw (a person's prior, ``cognition.sociability``)."""
    free = content_free(template, n) if mind.settings.calibrate else None
    pick, rating = await scored_pick(me, mind, msgs, [str(i) for i in range(1, n + 1)],
                                     [float(i) for i in range(1, n + 1)], default=float(default),
                                     purpose=purpose, free=free, factors=factors)
    if pick is not None:
        return pick, rating.call_id
    return min(n, max(1, round(rating.value))) - 1, rating.call_id


async def choose_move(me: AgentState, mind: Mind, conv: Conversation, menu: list[Move],
                      base: dict[str, Any]) -> Move:
    """The move ``me`` makes: drawn from the model's probabilities over the options' numbers
    (``Mind.ask_rating``; ``draw``, or the most probable under ``cognition.choices: argmax``), the
    first when the model cannot be asked."""
    if len(menu) == 1:
        return menu[0]
    other_first = base["other_first"]
    order = shuffled(len(menu), f"{conv.id}/{conv.turns}/{me.id}")
    shown = [menu[i] for i in order]
    msgs = prompts.messages(me.system_prompt, "aim.j2", **base,
                            options=[option_text(m, me.first_name, other_first) for m in shown])
    pick, _ = await choose_number(me, mind, msgs, len(shown), default=1, purpose=Purpose.AIM, template="aim.j2")
    return shown[pick]


CROWD_PREFERENCE = (Aim.END, Aim.ANSWER, Aim.SHARE, Aim.GREET, Aim.REPLY)
"""The background crowd's move, asked of nobody: a goodbye once one is allowed, else an answer to
a question, the news they carry, a greeting back, a reply. Whether to accept an invitation is
still the person's choice (asked)."""


def crowd_move(menu: list[Move]) -> Move | None:
    """The move a background-crowd member makes without asking, or None when it must be asked."""
    if any(m.aim in (Aim.ACCEPT, Aim.DECLINE) for m in menu) and len(menu) > 1:
        return None
    for aim in CROWD_PREFERENCE:
        found = next((m for m in menu if m.aim == aim), None)
        if found is not None:
            return found
    return menu[0]


async def utter(me: AgentState, mind: Mind, conv: Conversation) -> tuple[Move, UtteranceAnswer, int | None]:
    """What ``me`` says next: the move chosen from ``aims.aim_menu``, then the words for it (and the
    llm_calls id that wrote them). When the model's words are unusable the line is a goodbye and
    the move ``end``."""
    other = mind.person(conv.partner(me.id))
    last = conv.lines[-1][1] if conv.lines else ""
    ctx = await context(me, mind, f"{other.persona.name}. {last}", Purpose.UTTERANCE,
                        exclude=conv.memory_ids.get(me.id, ()))
    tie = mind.tie(me.id, other.id)
    base = {**ctx, "other_first": other.first_name, "relationship": tie.view if tie else "",
            "dialogue": _moves(mind, conv)}
    menu = aim_menu(me, mind, conv)
    move = (me.crowd and crowd_move(menu)) or await choose_move(me, mind, conv, menu, base)
    msgs = prompts.messages(me.system_prompt, "utterance.j2", **base,
                            doing_now=instruction(move, me.first_name, other.first_name))
    script = UtteranceAnswer(say=clip(example_line(move, me.first_name, other.first_name,
                                                   zlib.crc32(f"{conv.id}/{conv.turns}".encode())), LINE_CHARS))
    default = UtteranceAnswer(say=f"Sorry {other.first_name}, I have to go.")
    earlier = [t for _, t in conv.lines]
    names = (me.first_name, other.first_name)
    town = _first_names(mind)
    answer = await mind.ask(me, msgs, UtteranceAnswer, default=default, purpose=Purpose.UTTERANCE, max_tokens=80,
                            check=lambda v: _check_utterance(v, earlier, move, names, town),
                            script=script.model_dump_json())
    if answer.ok:
        return move, answer.value, answer.call_id
    line = answer.rejected
    if line is not None and off_aim(move, line.say, names) and _check_utterance(
            UtteranceAnswer(say=line.say), earlier, Move(Aim.REPLY), names, town) is None:
        # The person's own words, fine as a line, just not the move's (news that never says the
        # news): said as a plain reply, so the talk goes on and nothing is counted as told.
        return Move(Aim.REPLY), line, answer.call_id
    return Move(Aim.END), answer.value, answer.call_id


def _first_names(mind: Mind) -> list[str]:
    """The town's first names that only one person has (a shared one could be either)."""
    counts = Counter(p.first_name for p in mind.people())
    return sorted(n for n, c in counts.items() if c == 1)


def gist(mind: Mind, conv: Conversation, limit: int = 200) -> str:
    """The dialogue squeezed into one line (the recap's safe default)."""
    text = " / ".join(line.replace('"', "") for line in _dialogue(mind, conv, None))
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def recap(me: AgentState, mind: Mind, conv: Conversation) -> None:
    """After a conversation: store its summary, rate it (and its utterances), update the relationship.
    The background crowd keeps the gist and its view as it was, asking nothing."""
    other = mind.person(conv.partner(me.id))
    tie = mind.tie(me.id, other.id)
    feeling = round((tie.sentiment if tie else 0.0) * 5)
    default = RecapAnswer(summary=gist(mind, conv), view=(clip(tie.view, 160) if tie and tie.view else
                          f"{me.first_name} has talked with {other.first_name}."), feeling=feeling, importance=3)
    if me.crowd:
        _keep_recap(me, mind, conv, other, default)
        return
    msgs = prompts.messages(
        me.system_prompt, "recap.j2", **situation(me, mind), other_first=other.first_name,
        other_name=other.persona.name, conv_place=mind.place_name(conv.place), relationship=tie.view if tie else "",
        dialogue=_dialogue(mind, conv, None), example=default.model_dump_json(),
    )
    answer = await mind.ask(me, msgs, RecapAnswer, default=default, purpose=Purpose.RECAP, max_tokens=140)
    _keep_recap(me, mind, conv, other, answer.value)


def _keep_recap(me: AgentState, mind: Mind, conv: Conversation, other: AgentState, value: RecapAnswer) -> None:
    mind.remember(me.id, MemoryKind.CONVERSATION, f"Talked with {other.persona.name} at "
                  f"{mind.place_name(conv.place)}: {value.summary.strip()}",
                  Provenance(Source.RECAPPED, from_agent=other.id, conversation_id=conv.id,
                             quote=value.summary.strip()),
                  importance=value.importance)
    for memory_id in conv.memory_ids.get(me.id, []):
        mind.rate(mind.memory(memory_id), value.importance)
    mind.after_conversation(me.id, other.id, value.feeling / 5, value.view)


class Converse(Phase):
    """One line in every open conversation, oldest conversation first: its next speaker speaks;
    the conversation ends on a goodbye or at the scenario's turn limit."""

    name = "converse"
    writes = frozenset({"talking", "conversations"})

    def select(self, mind: Mind) -> list[AgentState]:
        talking = mind.open_conversations()
        mind.notes.talking = [a for c in talking for a in c.participants]
        mind.notes.conversations = len(talking)
        return [mind.person(c.next_speaker) for c in talking]

    async def run(self, me: AgentState, mind: Mind) -> None:
        assert me.conversation_id is not None
        conv = mind.conversation(me.conversation_id)
        move, answer, call_id = await utter(me, mind, conv)
        mind.say(conv, me, answer.say, call_id, move)
        if move.aim == Aim.END:  # the last line the limit allows is always a goodbye
            mind.end_conversation(conv, "turn limit" if conv.turns >= mind.settings.max_conversation_turns
                                  else "goodbye")
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
        here = {p.id for p in mind.people()}
        for conv in mind.take_ended_conversations():
            for person_id in conv.participants:
                if person_id not in here:  # left the town, which ended it: the one who stays recaps
                    continue
                self.todo.setdefault(person_id, []).append(conv)
                chosen.append(mind.person(person_id))
        return chosen

    async def run(self, me: AgentState, mind: Mind) -> None:
        await recap(me, mind, self.todo[me.id].pop(0))
