"""The one interface every LLM backend implements: a batch of requests in, answers out in order.

A backend whose requests are network calls may also have ``async agenerate(requests, on_done)``
with the same meaning (``AsyncBackend``): awaited inside the model's event loop, a batch's
requests are in flight together. Every caller goes through the module's ``agenerate(backend,
requests, on_done)``, which awaits the backend's own ``agenerate`` where it has one and otherwise
calls ``generate`` (the default: a backend that computes in this process gains nothing from
awaiting). ``LLMClient`` sends its batches through it, and the wrappers (the replay cache, the
lazy backend) pass their inner backend's calls through it.

A backend may also have ``count_tokens(messages) -> int``: how many prompt tokens it will see
for a chat, its chat template applied (what ``max_tokens`` is added to when it checks the
context window). Cognition budgets its prompts with it (``LLMClient.count_tokens``); a backend
without one is counted by ``estimate_tokens``. Wrappers (the replay cache, the lazy backend) pass
it through. The count must not depend on whether the backend has started: a replay that counted
differently would build different prompts and miss the cache (``simulation.llm.lazy``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from simulation.llm import offthread
from simulation.llm.types import LLMRequest, RawCompletion

OnDone = Callable[[int, RawCompletion], None]
"""Called as each request of a batch finishes (index in batch, answer): drives live progress."""

Messages = list[dict[str, str]]
TokenCounter = Callable[[Messages], int]
"""Prompt tokens of a chat, as a backend will see them."""

CHARS_PER_TOKEN = 3
MESSAGE_CHARS = 16
"""Characters counted for each message's role markers in the estimate (a template's
``<|im_start|>user\\n ... <|im_end|>\\n`` is 4-6 tokens), and once more for the generation prompt."""


@runtime_checkable
class Backend(Protocol):
    name: str
    model_id: str

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        """Answer every request; failures come back as RawCompletion.error, never as exceptions
        for a single bad answer. Raise RunError only when the backend itself is unusable."""
        ...

    def close(self) -> None: ...


class AsyncBackend(Backend, Protocol):
    """A backend whose requests are network calls: ``agenerate`` has ``generate``'s meaning, awaited."""

    async def agenerate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        ...


async def agenerate(backend: Backend, requests: Sequence[LLMRequest],
                    on_done: OnDone | None = None) -> list[RawCompletion]:
    """The one way to ask a backend asynchronously: ``await backend.agenerate(requests, on_done)``
    where the backend has it (``AsyncBackend``: its requests are then in flight together), else
    ``backend.generate(requests, on_done)`` in the worker thread of ``simulation.llm.offthread``
    (every in-process decode of the process on one thread), while the loop's thread waits for it,
    blocked, with the call's deadline (``simulation.llm.deadline``) as its timeout
    (``offthread.Stalled`` past it)."""
    own = getattr(backend, "agenerate", None)
    if own is not None:
        return await own(requests, on_done)
    return offthread.in_worker(backend, requests, on_done, offthread.LIMIT.get())


def estimate_tokens(messages: Messages) -> int:
    """A conservative guess of a chat's prompt tokens where no tokenizer is at hand: its
    characters (contents, plus ``MESSAGE_CHARS`` for each message's role markers and for the
    generation prompt) / 3, rounded up. English prose runs about 4 characters a token in the
    tokenizers of common chat models and 3.4 in SmolLM2's on a town's memories, so this over-counts
    (a prompt budgeted with it fits); text in scripts a tokenizer splits finer (CJK, emoji) can
    need more tokens than this says."""
    chars = sum(len(m.get("content") or "") + MESSAGE_CHARS for m in messages) + MESSAGE_CHARS
    return math.ceil(chars / CHARS_PER_TOKEN)


def count_tokens(backend: object, messages: Messages) -> int:
    """``backend.count_tokens(messages)`` where the backend has it, else ``estimate_tokens``."""
    count = getattr(backend, "count_tokens", None)
    return int(count(messages)) if count is not None else estimate_tokens(messages)
