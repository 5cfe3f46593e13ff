"""Where a backend that computes in this process runs while its call is under a deadline: one worker thread.

Why: a deadline (``simulation.llm.deadline``) is only as good as the clock that watches it, and the
event loop cannot watch anything while llama.cpp or vLLM computes on its own thread. So while a
deadline is set (``ENABLED``, a context variable the deadline sets for the call it watches),
``backend.agenerate`` hands an in-process backend's ``generate`` to this module's worker and awaits it.

One worker per process, taking calls in the order they were made: two clients of one loaded
model (an evaluation's agent and judge) never decode at once, and no answer depends on thread
timing. ``generate``'s ``on_done`` calls are posted back to the loop's thread, in order, before
the call's result, so progress bars and recorders see them where they always did. A call whose
waiter gives up (``abandon``) cannot be killed; its worker finishes it, or never does, as a daemon
thread that keeps nothing alive, and the next call gets a fresh worker.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulation.llm.backend import Backend, OnDone
    from simulation.llm.types import LLMRequest, RawCompletion

__all__ = ["ENABLED", "in_worker"]

ENABLED: ContextVar[bool] = ContextVar("agora_backend_off_thread", default=False)
"""True inside a call under a deadline: in-process backends then compute in the worker."""


class _Worker:
    """A daemon thread running jobs from a queue, one after another, until it gets ``None``."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="agora-backend", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while (job := self.jobs.get()) is not None:
            job()


_worker: _Worker | None = None
_lock = threading.Lock()


def _current() -> _Worker:
    global _worker
    with _lock:
        if _worker is None:
            _worker = _Worker()
        return _worker


def _abandon(worker: _Worker) -> None:
    """Leave ``worker`` to its current job (it stops after it); later calls get a new one."""
    global _worker
    with _lock:
        if _worker is worker:
            _worker = None
    worker.jobs.put(None)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def in_worker(backend: Backend, requests: Sequence[LLMRequest],
                    on_done: OnDone | None = None) -> list[RawCompletion]:
    """``backend.generate(requests, on_done)`` in the worker thread, awaited. Whatever it raises
    is raised here; if this await is cancelled (a deadline passed) the worker is abandoned."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[list[RawCompletion]] = loop.create_future()

    def post(fn: Callable[..., None], *args: Any) -> None:
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nobody waits for this any more
            pass

    def done(index: int, completion: RawCompletion) -> None:
        post(on_done, index, completion)  # type: ignore[arg-type]

    def job() -> None:
        try:
            result = backend.generate(requests, done if on_done is not None else None)
        except BaseException as exc:  # every outcome reaches the waiter, as a batch's does
            post(_settle, future, None, exc)
        else:
            post(_settle, future, result, None)

    worker = _current()
    worker.jobs.put(job)
    try:
        return await future
    except asyncio.CancelledError:
        _abandon(worker)
        raise
