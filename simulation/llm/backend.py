"""The one interface every LLM backend implements: a batch of requests in, answers out in order.

A backend whose requests are network calls may also have ``async agenerate(requests, on_done)``
with the same meaning: the client awaits it inside the model's event loop, so a batch's requests
are in flight together (``LLMClient`` looks for it; the replay cache passes it through).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from simulation.llm.types import LLMRequest, RawCompletion

OnDone = Callable[[int, RawCompletion], None]
"""Called as each request of a batch finishes (index in batch, answer): drives live progress."""


@runtime_checkable
class Backend(Protocol):
    name: str
    model_id: str

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        """Answer every request; failures come back as RawCompletion.error, never as exceptions
        for a single bad answer. Raise RunError only when the backend itself is unusable."""
        ...

    def close(self) -> None: ...

