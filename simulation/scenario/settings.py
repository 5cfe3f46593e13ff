"""A scenario's ``memory:`` and ``cognition:`` sections: how agents retrieve, reflect, notice and talk.

(The ``llm:`` section's settings belong to the backends: ``simulation.llm.settings``.)
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from simulation.formats.fields import StrictModel

__all__ = ["CognitionSettings", "MemorySettings", "RetrievalWeights", "changed_section"]


class RetrievalWeights(StrictModel):
    recency: float = Field(1.0, ge=0, le=100)
    importance: float = Field(1.0, ge=0, le=100)
    relevance: float = Field(1.0, ge=0, le=100)


REFERENCE_CODE_WEIGHTS = {"recency": 0.5, "importance": 2.0, "relevance": 3.0}
"""The Generative Agents reference code's own weights (its retrieve.py, ``gw = [0.5, 3, 2]``): relevance
first. The paper says 1, 1, 1; tried for probes in issue 33, step 8 (docs/behaviour.md)."""


class MemorySettings(StrictModel):
    """Memory retrieval and reflection, as in Generative Agents (Park et al., 2023)."""

    retrieval_weights: RetrievalWeights = Field(default_factory=RetrievalWeights)
    probe_weights: RetrievalWeights = Field(
        default_factory=RetrievalWeights,
        description="retrieval weights when a person is asked a probe question ('Do you know of ...?'); the default "
        "is the paper's 1, 1, 1. The reference code's 0.5, 2, 3 (relevance first) brought back the line that told "
        "6 more of 31 people who knew, but the 1.5B then answered from the wrong line more often (issue 33, step 8)")
    recency_decay: float = Field(0.995, gt=0, le=1, description="recency = decay ** game hours since last access")
    top_k: int = Field(8, ge=1, le=100, description="memories retrieved per query")
    reflection_threshold: float = Field(
        100, ge=1, le=100000, description="summed importance of new memories that triggers a reflection"
    )
    """100, not Generative Agents' 150: that value was set for their stream, which perceives every
    object's state each 10 game seconds. What their paper reports is the outcome, "roughly two or
    three times a day"; at Agora's 10-minute ticks the 25-person town gains about 13 importance per
    person per game hour (``memory.importance_per_agent_hour``), so 150 gives about 1.5 reflections
    a waking day and 100 about 2.2 (docs/cognition.md, Reflection)."""
    retrieval: Literal["scored", "recent"] = Field(
        "scored", description="how a question's memories are found: 'scored' ranks them by recency, importance "
        "and relevance to the question (Generative Agents' retrieval); 'recent' shows the top_k newest whatever "
        "the question (the 'no retrieval' ablation, docs/experiments.md)")
    embedding_model: str | None = Field(
        None, description="sentence-transformers model folder (default: the bundled all-MiniLM-L6-v2)"
    )


class CognitionSettings(StrictModel):
    attention_bandwidth: int = Field(3, ge=1, le=50, description="how many things an agent notices per tick")
    max_conversation_turns: int = Field(6, ge=2, le=50)
    min_conversation_turns: int = Field(
        4, ge=1, le=50, description="goodbye is offered from this line on (a line that fails still ends it sooner)")
    conversation_cooldown_minutes: int = Field(120, ge=0, le=24 * 60, description="before the same two talk again")
    reactions_per_hour: int = Field(
        3, ge=0, le=600, description="how often a person may stop for someone they see in a game hour (each stop is "
        "a question to the LLM; in a crowded place there is always someone new)")
    choices: Literal["sample", "argmax"] = Field(
        "sample", description="how a scored choice (a conversation move) is made: 'sample' draws it from the "
        "model's probabilities over the options at llm.temperature with the run's seeded generator (so seeds are "
        "replicates, still deterministic per seed); 'argmax' always takes the most probable option")
    calibrate: bool = Field(
        True, description="divide a scored choice's probabilities by those of the same question with its content "
        "blanked ('Calibrate Before Use', Zhao et al. 2021), so a model's habit of answering one number does not "
        "make the choice; false: draw from the raw probabilities")
    talk_prior: float = Field(
        1.0, ge=0, le=5, description="how strongly a person's extraversion and their tie to someone (known, liked) "
        "scale the odds that they start a conversation with them, on top of the model's choice "
        "(cognition/sociability.py); 0: the model's probabilities alone")
    seek: bool = Field(
        True, description="a person holding news someone they know has not heard from them may choose, when an "
        "hour begins, to go where that person usually is and tell them (cognition/seek.py); false: people meet "
        "only where their day takes them")
    recognition_margin: float | None = Field(
        0.2, ge=0, le=1, description="a person recognises a probe question about news when one of their memories is "
        "this much more like it (cosine similarity of the embeddings) than what the town knew before the day, the "
        "90th percentile of everyone's seeded memories; then the model answers from the memories that made it "
        "familiar, else they say they have not heard of it, with nothing asked (cognition/probe.py). 0.2 held over "
        "five wordings of each bundled scenario's question (docs/behaviour.md, issue 33 step 9). null: the model is "
        "asked yes or no whether they have heard of it, over the memories retrieved for the question")
    recognition_unit: Literal["memory", "sentence"] = Field(
        "sentence", description="what recognition compares the probe question with: each sentence of a memory, "
        "the memory as like the question as its best sentence (a line heard is 'Daniel said to Grace: \"...\"', "
        "whose whole embedding the frame and the rest of the line dilute; docs/behaviour.md, issue 33 step 12), "
        "or the whole memory (step 9)")
    recognition: float | None = Field(
        None, ge=-1, le=1, description="a fixed threshold instead of recognition_margin: how like the question a "
        "person's closest memory must be. It depends on the question's wording (0.46 was chosen on the two bundled "
        "scenarios' questions; 'Have you heard of any party happening soon?' needs 0.33). Not with "
        "recognition_margin set explicitly")
    probe_temperature: float | None = Field(
        0.0, ge=0, le=2, description="the temperature a probe's answer is asked at (the end-of-run questions; "
        "cognition/probe.py): 0 takes the person's most likely answer instead of a draw, as an interview should "
        "(on the 1.5B a draw at 0.7 said 'I do not know' with the news in front of it; docs/behaviour.md, issue 33 "
        "step 13); null: llm.temperature, as every other question")
    live_context: bool = Field(
        False, description="questions show the person's working memory for the day (every memory retrieved for "
        "any of their questions today, in the order first shown, the new ones added at the end of one block) "
        "instead of each question's own retrieval, so the llama.cpp backend keeps a person's context evaluated "
        "between their calls and evaluates only what is new (cognition/working.py; issue 34)")
    moods: bool = Field(
        False, description="each named person has a mood (a label with valence and arousal) that what happens to "
        "them moves, scored at most once a game hour, shown in their prompts and stored per tick "
        "(cognition/mood.py; docs/stories.md)")
    planning: bool = Field(
        True, description="false: nobody is asked for a day's plan; everyone keeps their usual day from their "
        "routine, with the happenings they accepted an invitation to in it, as the background crowd does (the "
        "'no planning' ablation, docs/experiments.md)")
    phases: list[Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$", max_length=200)]] | None = Field(
        None, min_length=1, max_length=50,
        description="the cognition phases each tick runs, in order: built-in names (perceive, importance, decide, "
        "converse, recap, reflect) or package.module:Class for a phase of one's own (docs/cognition.md); "
        "default: the six built-in ones in that order")

    @model_validator(mode="after")
    def _one_recognition(self) -> CognitionSettings:
        if self.recognition is not None and self.recognition_margin is not None \
                and "recognition_margin" in self.model_fields_set:
            raise ValueError("recognition (a fixed threshold) and recognition_margin (a margin over what the town "
                             "knew before the day) both set: choose one")
        return self

    @model_validator(mode="after")
    def _turns_in_order(self) -> CognitionSettings:
        if self.min_conversation_turns > self.max_conversation_turns:
            raise ValueError(f"min_conversation_turns ({self.min_conversation_turns}) is more than "
                             f"max_conversation_turns ({self.max_conversation_turns})")
        return self

    @model_validator(mode="before")
    @classmethod
    def _retired_memory_window(cls, data: Any) -> Any:
        # memory_window chose how many recent memories a prompt showed, until retrieval
        # (memory.top_k) took that over. Older scenario files, and the scenarios saved in older
        # run.db files, still set it: accepted and ignored, so they load and resume unchanged.
        if isinstance(data, dict) and "memory_window" in data:
            return {k: v for k, v in data.items() if k != "memory_window"}
        return data


def changed_section(section: StrictModel, name: str, value: Any) -> StrictModel:
    """``section`` (a scenario's ``cognition`` or ``memory``) with ``name`` set to ``value``, validated
    as the file's own would be (ValueError saying why not): what a ``setting`` event changes to."""
    from pydantic import ValidationError

    try:
        return type(section).model_validate({**section.model_dump(), name: value})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{value!r} is not a valid {name}: {first['msg']}") from None
