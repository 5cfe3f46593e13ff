"""Question: "ask the model a question about a person's memories and remember the answer", as one
parameterised phase.

Many faculties are that one move (Concordia's ``QuestionOfRecentMemories`` is the model): what
does this person make of the news, what do they want now, how do they feel about the people they
met. A new one is a subclass with a name and a question (or the same class with keywords), not a
new coroutine each time:

.. code-block:: python

    class Mood(Question):
        name = "mood"
        question = "How does {first} feel right now, and why?"
        every_hours = 2

The question is asked of each person it is due for (awake and free, on the hour every
``every_hours`` hours, and for whom ``due_also`` holds), over the person's situation and either
their ``recent`` newest memories or those retrieved for ``query``; the answer is one or two
sentences (``max_tokens``), remembered as a memory of ``kind`` (a thought by default) whose
source is the person's own reflection (so a fact in it is counted as theirs, not as something
someone told them). The purpose of its LLM calls and retrievals is the phase's name: it keys their
seeds and replay-cache entries, so keep it stable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from simulation.cognition import prompts
from simulation.cognition.context import context, showing
from simulation.cognition.phase import Phase
from simulation.cognition.schemas import ProbeAnswer
from simulation.core import MemoryKind, Provenance, Source, Status

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

__all__ = ["Question"]


class Question(Phase):
    name: ClassVar[str] = "question"
    question: ClassVar[str] = "What is on {first}'s mind right now?"
    """What is asked; ``{first}`` and ``{name}`` are the person's first and full name."""
    recent: ClassVar[int] = 10
    """The person's newest memories the prompt shows (when ``query`` is None)."""
    query: ClassVar[str | None] = None
    """Retrieve the memories most relevant to this (formatted like ``question``) instead."""
    kind: ClassVar[str] = MemoryKind.THOUGHT
    """What the answer is remembered as."""
    importance: ClassVar[float | None] = None
    """The answer memory's importance (None: rated by the LLM when the person next thinks)."""
    every_hours: ClassVar[int] = 1
    """Asked on the hour, every this many game hours."""
    max_tokens: ClassVar[int] = 80
    schema: ClassVar[type[BaseModel]] = ProbeAnswer
    """The answer's JSON schema (a pydantic model); ``remembered`` says what of it becomes the memory."""

    def __init__(self, **settings: Any):
        """The class's settings, or any of them given here (``Question(name="mood", question=...)``)."""
        for key, value in settings.items():
            if not hasattr(type(self), key) or key.startswith("_"):
                raise TypeError(f"{type(self).__name__} has no setting {key!r}")
            setattr(self, key, value)

    def due(self, me: AgentState, mind: Mind) -> bool:
        now = mind.now
        return (now.minute == 0 and now.hour % max(1, self.every_hours) == 0 and not me.crowd
                and me.status != Status.SLEEPING and me.free and self.due_also(me, mind))

    def due_also(self, me: AgentState, mind: Mind) -> bool:
        """A further condition of one's own (e.g. only where a place event is under way)."""
        return True

    def words(self, me: AgentState) -> dict[str, str]:
        return {"first": me.first_name, "name": me.persona.name}

    async def run(self, me: AgentState, mind: Mind) -> None:
        asked = self.question.format(**self.words(me))
        if self.query is not None:
            ctx = await context(me, mind, self.query.format(**self.words(me)), self.name)
        else:
            nodes = mind.memories(me.id).recent(self.recent)
            ctx = showing(me, mind, nodes)
        msgs = prompts.messages(me.system_prompt, "question.j2", **ctx, question=asked)
        answer = await mind.ask(me, msgs, self.schema, default=self.schema.model_construct(), purpose=self.name,
                                max_tokens=self.max_tokens)  # a failed answer is remembered as nothing
        text = self.remembered(answer.value).strip() if answer.ok else ""
        if text:
            mind.remember(me.id, self.kind, text, Provenance(Source.REFLECTED), importance=self.importance)

    def remembered(self, value: BaseModel) -> str:
        """What of an answer the person keeps (the default schema's ``answer``; override for another schema)."""
        return str(getattr(value, "answer", ""))
