"""The moves open to a person whose turn it is to speak, built by the engine from what they know.

A conversation is a sequence of moves (``core.move``). What the speaker may do next follows
from the other's last move and from what the speaker has to offer:

* a question is answered (the only move: the answer's content is the speaker's own plan, what
  they have been doing, or their news);
* an invitation is accepted or declined;
* otherwise: greet (on one's first line: the opener's, or the answer to it), reply (to news just told or a question just
  answered), share the most important news the speaker has not told this person (and did not
  hear from them), invite them to something the speaker knows will happen and has not invited
  them to, ask them something not asked yet in this conversation, or say goodbye (from the
  scenario's ``min_conversation_turns``-th line on, the fourth by default; the last line the
  turn limit allows is always a goodbye).

"News" is ``AgentState.news`` (a fact known from the start, a whisper, a place event seen, a
line heard that shared news or invited the speaker). Every option holds its content, so the
line the model then writes is about something definite; none needs an LLM to build.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING

from simulation.core import Aim, Happening, Move, Source

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind
    from simulation.memory import MemoryNode
    from simulation.world.conversations import Conversation

ASKS = ("plans", "doing", "news")
"""What one person asks another, in this order through a conversation."""
NEWS_OPTIONS = 2
"""At most this many pieces of news are offered at once (the most important first)."""
TOPIC_CHARS = 200

_QUOTED = re.compile(r'"(.+)"\s*$', re.S)


def happening_text(h: Happening, mind: Mind) -> str:
    """"the Valentine's Day party at Hobbs Cafe on Tuesday 14 February, 17:00-19:00"."""
    return (f"the {h.title} at {mind.place_name(h.place)} on {h.start:%A %d %B}, "
            f"{h.start:%H:%M}-{h.end:%H:%M}")


def ask_text(topic: str, other_first: str) -> str:
    return {"plans": f"{other_first}'s plans for today", "doing": f"what {other_first} has been doing",
            "news": f"whether {other_first} has heard any news"}[topic]


def news_text(node: MemoryNode, mind: Mind) -> str:
    """What a piece of news says: the words of a line heard (with who said them), else the memory."""
    prov = node.provenance
    if prov is not None and prov.from_agent is not None and str(prov.source) == "heard":
        quote = prov.quote
        if quote is None:
            match = _QUOTED.search(node.text)
            quote = match.group(1) if match else node.text
        return _clip(f"{mind.person(prov.from_agent).first_name} said: {quote}")
    return _clip(node.text)


def untold_news(me: AgentState, mind: Mind, other_id: str) -> list[MemoryNode]:
    """``me``'s news not yet told to ``other_id`` nor heard from them (nor about something one of
    them invited the other to), most important first (then newest)."""
    told = set(me.told.get(other_id, ()))
    invited = set(me.invited.get(other_id, ())) | set(mind.person(other_id).invited.get(me.id, ()))
    out = []
    for memory_id in dict.fromkeys(me.news):
        node = mind.memory(memory_id)
        prov = node.provenance
        if memory_id in told or (prov is not None and (prov.from_agent == other_id or prov.fact in invited)):
            continue
        out.append(node)
    return sorted(out, key=lambda n: (-n.rated_importance, -n.id))


FIRST_HAND = (Source.SEEDED, Source.WHISPERED)
"""How the people a fact starts with hold it: the host of a happening, whom
nobody invites to their own party."""


def first_hand(mind: Mind, person_id: str) -> set[str]:
    """The facts ``person_id`` held from the start or was whispered: their own news."""
    out: set[str] = set()
    for memory_id in mind.person(person_id).news:
        prov = mind.memory(memory_id).provenance
        if prov is not None and prov.fact is not None and prov.source in FIRST_HAND:
            out.add(prov.fact)
    return out


def open_invitations(me: AgentState, mind: Mind, other_id: str, now: datetime) -> list[Happening]:
    """What ``me`` knows will happen, has not yet begun, has not invited ``other_id`` to, was not
    invited to by ``other_id``, and is not ``other_id``'s own (``first_hand``)."""
    invited = set(me.invited.get(other_id, ())) | set(mind.person(other_id).invited.get(me.id, ()))
    known = {h.fact: h for h in [*mind.happenings(me.id), *me.going]}
    theirs = first_hand(mind, other_id) if known else set()
    return [h for h in known.values() if h.start > now and h.fact not in invited and h.fact not in theirs]


def _plans_text(me: AgentState, now: datetime) -> str:
    later = [item for item in me.plan if item.hour >= now.hour]
    if not later:
        return "nothing more planned today"
    return "; ".join(f"{item.hour:02d}:00 {item.activity}" for item in later[:4])


def answer_topic(me: AgentState, mind: Mind, question: str, other_id: str) -> Move:
    """The content of ``me``'s answer to a question about ``question`` (one of ``ASKS``)."""
    if question == "plans":
        return Move(Aim.ANSWER, f"{me.first_name}'s plans: {_plans_text(me, mind.now)}")
    if question == "doing":
        done = [n.text for n in mind.memories(me.id).recent(2, kinds=("observation",))
                if n.provenance is not None and str(n.provenance.source) == "did"]
        return Move(Aim.ANSWER, _clip(f"{me.first_name} is {me.doing_apart_from_talk(mind.place_name(me.place))}" + (f"; earlier: {done[-1]}" if done else "")))
    news = untold_news(me, mind, other_id)
    if news:
        return Move(Aim.ANSWER, news_text(news[0], mind), memory_id=news[0].id)
    return Move(Aim.ANSWER, f"{me.first_name} has heard no news")


def aim_menu(me: AgentState, mind: Mind, conv: Conversation) -> list[Move]:
    """The moves ``me`` may make now in ``conv`` (never empty)."""
    other = mind.person(conv.partner(me.id))
    last = conv.last_move()
    if conv.turns >= mind.settings.max_conversation_turns - 1:
        return [Move(Aim.END)]
    if last is not None and last.aim == Aim.ASK:
        return [answer_topic(me, mind, last.topic, other.id)]
    if last is not None and last.aim == Aim.INVITE:
        return [Move(Aim.ACCEPT, last.topic, happening=last.happening, invitation_id=last.invitation_id),
                Move(Aim.DECLINE, last.topic, happening=last.happening, invitation_id=last.invitation_id)]
    mine = conv.said_by(me.id)
    options: list[Move] = []
    if not mine:
        options.append(Move(Aim.GREET))
    elif last is not None and last.aim in (Aim.SHARE, Aim.ANSWER):
        options.append(Move(Aim.REPLY, last.topic))
    for node in untold_news(me, mind, other.id)[:NEWS_OPTIONS]:
        options.append(Move(Aim.SHARE, news_text(node, mind), memory_id=node.id))
    for h in open_invitations(me, mind, other.id, mind.now)[:1]:
        options.append(Move(Aim.INVITE, happening_text(h, mind), happening=h))
    asked = {m.topic for m in mine if m.aim == Aim.ASK}
    for topic in ASKS:
        if topic not in asked:
            options.append(Move(Aim.ASK, topic))
            break
    if conv.turns + 1 >= mind.settings.min_conversation_turns or not options:
        options.append(Move(Aim.END))
    return options


_OPTION = {
    Aim.GREET: "greet {o}", Aim.SHARE: "tell {o}: {topic}", Aim.INVITE: "invite {o} to {topic}",
    Aim.ASK: "ask {o} about {ask}", Aim.ANSWER: "answer: {topic}", Aim.REPLY: "reply to what {o} just said",
    Aim.ACCEPT: "accept the invitation", Aim.DECLINE: "decline the invitation", Aim.END: "say goodbye to {o}",
}
_NOW = {
    Aim.GREET: "greets {o}.", Aim.SHARE: "tells {o} this: {topic}", Aim.INVITE: "invites {o} to {topic}.",
    Aim.ASK: "asks {o} a question about {ask}.", Aim.ANSWER: "answers {o}'s question. {topic}.",
    Aim.REPLY: "replies to what {o} just said ({topic}), saying what {me} thinks of it.",
    Aim.ACCEPT: "gladly accepts {o}'s invitation to {topic}.",
    Aim.DECLINE: "politely declines {o}'s invitation to {topic}, and says why.", Aim.END: "says goodbye to {o}.",
}
_DONE = {
    Aim.GREET: "{me} greeted {o}.", Aim.SHARE: "{me} told {o}: {topic}", Aim.INVITE: "{me} invited {o} to {topic}.",
    Aim.ASK: "{me} asked {o} about {ask}.", Aim.ANSWER: "{me} answered: {topic}", Aim.REPLY: "{me} replied.",
    Aim.ACCEPT: "{me} accepted the invitation.", Aim.DECLINE: "{me} declined the invitation.",
    Aim.END: "{me} said goodbye.",
}


_EXAMPLES = {
    Aim.GREET: ("Hello, {o}! Nice to see you.", "Hi {o}, how nice to run into you!"),
    Aim.SHARE: ("{o}, listen: {topic}", "Did you hear, {o}? {topic}", "{o}, I have news: {topic}"),
    Aim.INVITE: ("{o}, would you like to come to {topic}?", "{o}, please come to {topic}!",
                 "Are you free for {topic}, {o}? You should come."),
    Aim.ANSWER: ("{topic}.", "Let me think, {o}. {topic}."),
    Aim.REPLY: ("Oh, {o}, I didn't know that!", "Really? That is good to know, {o}.", "How interesting, {o}!"),
    Aim.ACCEPT: ("Thank you, {o}! I'd love to come to {topic}.", "Yes, {o}, I'll be there: {topic}."),
    Aim.DECLINE: ("Sorry, {o}, I can't come to {topic}.", "Thank you, {o}, but I'm busy then."),
    Aim.END: ("Goodbye, {o}, see you soon!", "I must be going, {o}. Take care!", "See you later, {o}!"),
}
_EXAMPLES_ASK = {
    "plans": ("What are your plans for today, {o}?", "What are you doing today, {o}?"),
    "doing": ("What have you been up to, {o}?", "How has your day been, {o}?"),
    "news": ("Have you heard any news, {o}?", "Anything new in town, {o}?"),
}


def example_line(move: Move, me: str, other: str, variant: int = 0) -> str:
    """A line that would do the move, shown to the model as an example (one of a few phrasings,
    by ``variant``): a 135M model told only "Margaret invites Daniel to the party at ..." writes
    about anything; shown a line that does it, it writes one like it (``talk.example_share``
    counts the lines that are the example word for word)."""
    if move.aim == Aim.ASK:
        phrasings = _EXAMPLES_ASK.get(move.topic, ("How are you, {o}?",))
        return phrasings[variant % len(phrasings)].format(o=other)
    topic = move.topic
    if move.aim == Aim.ANSWER:
        topic = (topic.replace(f"{me}'s plans:", "Today I have").replace(f"{me} is ", "I am ", 1)
                 .replace(f"{me} has heard no news", "I haven't heard any news"))
    phrasings = _EXAMPLES[move.aim]
    line = phrasings[variant % len(phrasings)].format(o=other, topic=topic).replace("..", ".")
    return line[0].upper() + line[1:]


def _words(move: Move, me: str, other: str) -> dict[str, str]:
    return {"me": me, "o": other, "topic": move.topic,
            "ask": ask_text(move.topic, other) if move.aim == Aim.ASK else ""}


def option_text(move: Move, me: str, other: str) -> str:
    """The move as a choice on ``me``'s menu ("invite Daniel to the party at ...")."""
    return _OPTION[move.aim].format(**_words(move, me, other))


def instruction(move: Move, me: str, other: str) -> str:
    """What ``me`` is to say now, after "Now Margaret ..." ("tells Daniel this: ...")."""
    return _NOW[move.aim].format(**_words(move, me, other)).replace(" ().", ".").replace("..", ".")


def done_text(move: Move, me: str, other: str) -> str:
    """The move as a line of the conversation so far ("Margaret asked Daniel about his plans")."""
    return _DONE[move.aim].format(**_words(move, me, other))


_STOP = frozenset("""about after again also been before being could does doing from have into just like more
much only other over said some such than that their them then there these they this very were what when where
which while will with would your today""".split())


def _content(text: str, skip: set[str]) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9:]+", text.lower()) if (len(w) >= 4 or ":" in w or w.isdigit())
            and w not in _STOP and w not in skip}


def off_aim(move: Move, text: str, names: tuple[str, ...]) -> str | None:
    """Why a line does not do what its move is for, else None: news or an answer that shares no
    word with what it was to tell, an invitation that names nothing of what it is to, a question
    that asks nothing (no question mark, no "I was wondering if"). (The people's names do not count as shared words.)"""
    skip = {n.lower() for n in names}
    if move.aim in (Aim.SHARE, Aim.ANSWER, Aim.INVITE) and not (_content(move.topic, skip) & _content(text, skip)):
        return "does not say what it was to tell" if move.aim != Aim.INVITE else "does not say what the invitation is to"
    if move.aim == Aim.ASK and "?" not in text and not _INDIRECT_QUESTION.search(text):
        return "asks nothing"
    return None


_WH = r"(?:if|whether|what|how|where|when|who|why|which)"
_INDIRECT_QUESTION = re.compile(
    rf"\bI(?:'m|'d| am| was| would| just| really)*\s+(?:wonder(?:ing|ed)?\s+{_WH}|"
    rf"(?:want(?:ed)?|like|meant)\s+to\s+ask(?:\s+you)?\s+(?:about|{_WH})|asking\s+you\s+(?:about|{_WH}))\b",
    re.IGNORECASE)
"""A question the speaker puts as a statement ("I was wondering if you had any plans for today.",
"I wanted to ask you about your plans."): it asks, though no "?" ends it. A request ("Tell me about
your day."), a hope ("I hope you can come."), or wondering that is no question ("I was wondering
about the fire all night.", "Everyone wondered who did it.") is not."""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TOPIC_CHARS else text[: TOPIC_CHARS - 3].rstrip() + "..."


__all__ = ["ASKS", "aim_menu", "answer_topic", "ask_text", "done_text", "example_line", "first_hand",
           "happening_text", "instruction", "news_text", "off_aim", "open_invitations", "option_text", "untold_news"]
