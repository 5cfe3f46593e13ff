"""The engine's fixed vocabularies as ``StrEnum``s: agent status, event kind, memory kind and source, LLM-call purpose.

They are strings on purpose. Each value is written to run.db (``agent_states.status``,
``memories.kind``, ``llm_calls.purpose``), mixed into per-request seeds and replay-cache keys,
and matched by reward and viewer queries, so a value must never change: renaming one would
orphan every cached answer and every recorded run. A ``StrEnum`` member compares and hashes
equal to its string and serialises as it, so rows, seeds and cache keys stay byte-identical.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What an agent is doing at the tick level (``agent_states.status``)."""

    SLEEPING = "sleeping"
    WAKING = "waking"
    """Up, and plans its day this tick."""
    IDLE = "idle"
    """At a place with nothing under way: takes the hour's next step, or thinks."""
    WALKING = "walking"
    ACTING = "acting"
    TALKING = "talking"


class EventKind(StrEnum):
    """What happened (``events.kind``); docs/run-db.md says what each one's ``data`` holds."""

    START = "start"
    """Where each person is when the run starts, and whether they are up."""
    WAKE = "wake"
    SLEEP = "sleep"
    MOVE = "move"
    """Leaving for a place, or turning back."""
    ACTION = "action"
    """Starting one of the day's actions (or a reaction's)."""
    WHISPER = "whisper"
    """A scheduled whisper, or one typed into the viewer."""
    PLACE_EVENT = "place_event"
    SETTING = "setting"
    """A scheduled change of a cognition or memory setting (``data``: setting, value)."""
    ARRIVAL = "arrival"
    """A person who arrives in the town during the run (``data``: state, source, crowd)."""
    DEPARTURE = "departure"
    """A person who leaves the town: from then on they are nowhere in it (``data``: conversation_id
    of the conversation their leaving ended, if any)."""
    CORRECTION = "correction"
    """A scenario fact's text corrected from then on (``text``: the new text; ``data``: fact, was,
    details)."""
    REACTION = "reaction"
    """Dropping the plan for something noticed."""
    SEEK = "seek"
    """Setting out to find someone one knows, to tell them news (``cognition.seek``)."""
    CONVERSATION_START = "conversation_start"
    UTTERANCE = "utterance"
    CONVERSATION_END = "conversation_end"
    INVITATION = "invitation"
    REFLECTION = "reflection"
    PROP = "prop"
    """An object at a place changed state (``place``; ``data``: object, state, was)."""
    NUDGE = "nudge"
    """The director's nudge towards a story beat (``cognition.director``): a thought whispered to
    someone (``data``: beat, why, fact when the thought is the fact itself)."""
    REFLECTION_SKIPPED = "reflection_skipped"
    """A reflection prompt that could not fit the context window even with one memory."""


class MemoryKind(StrEnum):
    """Where a memory came from (``memories.kind``)."""

    SEED = "seed"
    """From the persona file, before the run."""
    OBSERVATION = "observation"
    THOUGHT = "thought"
    """Whispered: a scheduled whisper or one typed into the viewer."""
    UTTERANCE = "utterance"
    CONVERSATION = "conversation"
    """A conversation's recap."""
    PLAN = "plan"
    REFLECTION = "reflection"
    SUMMARY = "summary"
    """Yesterday in one line, written with the next day's plan."""


class Source(StrEnum):
    """How a memory came to its owner (``memories.source``; docs/provenance.md)."""

    SEEDED = "seeded"
    """From the persona file or a fact's ``known_by``, before the run."""
    WHISPERED = "whispered"
    """A scheduled whisper, or one typed into the viewer."""
    PERCEIVED = "perceived"
    """Seen at a place: a place event, or someone there and what they were doing."""
    DID = "did"
    """What the owner started doing."""
    HEARD = "heard"
    """A line someone said to the owner (``from_agent``, ``utterance_id``)."""
    SAID = "said"
    """A line the owner said."""
    RECAPPED = "recapped"
    """The owner's summary of a conversation with ``from_agent``."""
    PLANNED = "planned"
    """The owner's plan for the day, or their summary of yesterday."""
    REFLECTED = "reflected"
    """An insight drawn from other memories (``memories.evidence``)."""
    DIRECTED = "directed"
    """A thought the story's director put in the owner's mind (``story.director``): never awareness of
    a fact, and not read for one (the director's words are not news the person heard)."""


class Purpose(StrEnum):
    """Why the engine asks the LLM or retrieves memories (``llm_calls.purpose``, ``retrievals.purpose``).

    Evaluation and reward purposes are built per item (``ipip12``, ``pg_q_…``) and stay plain strings."""

    IMPORTANCE = "importance"
    PLAN = "plan"
    HOURS = "hours"
    STEPS = "steps"
    REACT = "react"
    SEEK = "seek"
    """Whether to go and find someone one knows, to tell them news (``cognition.seek``)."""
    GO = "go"
    """Whether to take up the story director's offer (``story.director``): to go to a gathering's
    place, or to go and find someone who has not heard the news (the seek question)."""
    UTTERANCE = "utterance"
    AIM = "aim"
    """What a person in a conversation means to do with their next line (``cognition.aims``)."""
    RECAP = "recap"
    QUESTIONS = "questions"
    INSIGHTS = "insights"
    REFLECTION = "reflection"
    """Retrieval for a reflection question (the LLM calls are ``questions`` and ``insights``)."""
    PROBE = "probe"
    """Retrieval for a probe; its LLM call is ``probe_purpose(index)``."""
    CALIBRATE = "calibrate"
    """A content-free question a scored choice is calibrated against (``cognition.calibrate``)."""
    MOOD = "mood"
    """How a person feels now, scored over a fixed set of moods (``cognition.moods``)."""


class Aim(StrEnum):
    """What a line in a conversation is for (``utterances.aim``): chosen before the words are
    written, so a small model is told what to say rather than left to echo the last line."""

    GREET = "greet"
    """The opening line, or greeting back."""
    SHARE = "share"
    """Tell the other something on one's mind (a memory: news heard, seen, whispered)."""
    INVITE = "invite"
    """Invite the other to something one knows will happen (a happening)."""
    ASK = "ask"
    """Ask the other about their plans, what they are doing, or any news."""
    ANSWER = "answer"
    """Answer the question just asked."""
    REPLY = "reply"
    """Respond to what the other just told."""
    ACCEPT = "accept"
    """Accept the invitation just made."""
    DECLINE = "decline"
    """Decline the invitation just made."""
    END = "end"
    """Say goodbye (the conversation ends)."""


def probe_purpose(index: int) -> str:
    """The purpose of the LLM call answering the scenario's probe ``index`` (``probe0``, ``probe1`` …):
    each probe question has its own seed stream and cache entries."""
    return f"{Purpose.PROBE}{index}"
