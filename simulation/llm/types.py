"""What the engine asks an LLM and what comes back; the unit of batching, caching and accounting."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field


PIECE_BREAK = "\x1e"
"""A boundary inside a message's text (ASCII record separator): the llama.cpp backend evaluates the
text on either side as pieces of their own, so a message that grows at its end (a person's working
memory, ``simulation.cognition.working``) is reused up to its last break instead of evaluated
again (``simulation.llm.llamacpp.chat_format``). It is not text: every backend takes it out before
a model sees the prompt (``plain``)."""


def plain(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """``messages`` as a model reads them: without piece breaks (``PIECE_BREAK``)."""
    if not any(PIECE_BREAK in (m.get("content") or "") for m in messages):
        return messages
    return [{**m, "content": m["content"].replace(PIECE_BREAK, "")} if m.get("content") else m for m in messages]


def asked(messages: list[dict[str, str]]) -> str:
    """What the last turn of a chat asks: its user messages after the last answer, joined. The
    engine sends a question as two user messages, the situation and what is asked about it
    (``simulation.cognition.prompts.messages``); a reader of the whole question reads this."""
    turn: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "user":
            break
        turn.append(message.get("content", ""))
    return "\n".join(reversed(turn))


class LLMRequest(BaseModel):
    """One chat completion the engine needs. Everything that determines the answer is here."""

    messages: list[dict[str, str]]
    json_schema: dict[str, Any] | None = None
    max_tokens: int = 96
    temperature: float = 0.7
    seed: int = 0
    purpose: str = "chat"
    agent_id: str | None = None
    tick: int | None = None
    options: list[str] | None = None
    """Score these answers instead of writing one: the backend answers with each option's
    log-probability as the assistant's whole answer (``simulation.llm.scoring``)."""
    script: str | None = None
    """What the engine's script would answer (a line made from the move's template): read only by
    the no-LLM control (``simulation.llm.control``), never shown to a model, so no prompt holds a
    line a model could copy."""
    group: str | None = None
    """The model group (``llm.groups``) whose backend answers it; None: the ``llm:`` block's own.
    Bookkeeping, like the purpose: the backend's model id is what keys the replay cache."""

    def key(self, model_id: str) -> str:
        """Content address of this request for a given model (the replay-cache key).

        Purpose, agent, tick and group are bookkeeping, not inputs: two identical prompts to one
        model share an answer whoever asks (two groups on one model too; the model id parts them
        otherwise)."""
        payload = {
            "model": model_id,
            "messages": self.messages,
            "schema": self.json_schema,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if self.options is not None:  # absent otherwise: older replay caches keep their keys
            payload["options"] = self.options
        if self.script is not None:
            payload["script"] = self.script
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class RawCompletion(BaseModel):
    """A backend's answer before the engine parses it."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    error: str | None = None
    cache_hit: bool = False
    """Served by the replay cache: no backend call was made (``latency_s`` is then 0)."""
    retries: int = 0
    """Transport-level retries the backend needed (timeouts, 429, 5xx, dropped connections)."""
    server: str | None = None
    """Which server answered, for backends that spread requests over several."""


class CallRecord(BaseModel):
    """One attempt at one request: a row of run.db's ``llm_calls``."""

    request: LLMRequest
    completion: RawCompletion
    backend: str
    model: str
    attempt: int = 0
    parse_ok: bool = False
    parse_error: str | None = None
    fallback: bool = Field(False, description="the engine gave up and used its safe default")
    cache_hit: bool = False
