"""A deadline on every backend call: a backend that stops answering is an error, never a hang.

Why: the batch loop's watchdog (``simulation.llm.batching``) rightly counts a batch in flight as
progress, so a backend call that never returned (a wedged decode in llama.cpp or vLLM, a server
that takes a request and never answers) used to hold a run forever. ``bounded`` runs a batch
under a deadline that restarts with every answer the batch delivers (``llm.call_timeout_s``): a
batch of fifty long answers is never cut off while it makes progress, and one that delivers
nothing for that long is abandoned with ``CallTimeout``, naming the backend, its model and the
requests still unanswered (purpose, agent, tick). The error stops a run at the tick boundary like
any ``RunError``: the tick is not committed, and ``agora resume`` continues from the one before.

Nothing can watch the clock from the thread a backend computes on: under a deadline, a backend
that computes in this process runs in ``simulation.llm.offthread``'s worker thread, and the loop's
thread waits for it with the deadline as its timeout; a server's requests are awaited as always,
and cancelled when the deadline passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from simulation.errors import RunError
from simulation.llm import offthread
from simulation.llm.backend import Backend, OnDone, agenerate
from simulation.llm.settings import CALL_TIMEOUT_S
from simulation.llm.types import LLMRequest, RawCompletion

__all__ = ["CALL_TIMEOUT_S", "CallTimeout", "bounded"]

SHOWN = 5
"""Unanswered requests named in the error; the rest are counted."""


class CallTimeout(RunError):
    """A backend call that delivered no answer for the deadline."""


def _describe(request: LLMRequest) -> str:
    who = f" for {request.agent_id}" if request.agent_id else ""
    when = f" at tick {request.tick}" if request.tick is not None else ""
    return f"{request.purpose}{who}{when}"


def timeout_message(backend: Backend, requests: Sequence[LLMRequest], answered: set[int], limit_s: float) -> str:
    """What ``CallTimeout`` says: which backend and model, how long, which requests it still owed."""
    owed = [requests[i] for i in range(len(requests)) if i not in answered]
    shown = "; ".join(_describe(r) for r in owed[:SHOWN]) + (f"; and {len(owed) - SHOWN} more" if len(owed) > SHOWN else "")
    return (f"the {backend.name} backend (model {backend.model_id}) delivered no answer for {limit_s:g} s "
            f"(llm.call_timeout_s); {len(owed)} of {len(requests)} request(s) unanswered: {shown}")


async def bounded(backend: Backend, requests: Sequence[LLMRequest], on_done: OnDone | None,
                  limit_s: float) -> list[RawCompletion]:
    """``agenerate(backend, requests, on_done)`` under a deadline of ``limit_s`` seconds that
    restarts with each answer; past it, the call is cancelled and ``CallTimeout`` raised."""
    answered: set[int] = set()
    last = time.monotonic()

    def seen(index: int, completion: RawCompletion) -> None:
        nonlocal last
        answered.add(index)
        last = time.monotonic()
        if on_done is not None:
            on_done(index, completion)

    token = offthread.LIMIT.set(limit_s)  # the task copies the context now: its backend call goes off-thread
    try:
        call = asyncio.ensure_future(agenerate(backend, requests, seen))
    finally:
        offthread.LIMIT.reset(token)
    try:
        while True:
            left = last + limit_s - time.monotonic()
            if left <= 0:
                break
            done, _ = await asyncio.wait({call}, timeout=left)
            if done:
                return call.result()
    except offthread.Stalled:  # an in-process backend: its worker gave nothing for limit_s
        raise CallTimeout(timeout_message(backend, requests, answered, limit_s)) from None
    except asyncio.CancelledError:
        call.cancel()
        raise
    call.cancel()
    raise CallTimeout(timeout_message(backend, requests, answered, limit_s))
