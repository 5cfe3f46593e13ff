"""The one thread on which a backend that computes in this process (llama.cpp, vLLM) computes.

Why one thread, and never the caller's: llama.cpp computes with OpenMP, and GNU OpenMP keeps a
team of threads for each thread that starts parallel work. Once two threads have done so, its
threads outnumber two cores, and it stops spin-waiting at the barriers inside every decode: a
25-person town's decode steps then took 72 ms instead of 39 (the same calls and answers, 2026-11-29;
``bench/day.py`` had measured the machine's speed on the loop's thread before the town's calls ran
in a worker). So every call of an in-process backend runs here, whether or not a deadline watches it,
and so does any other llama.cpp work of the process (``call``).

Why a thread at all: a deadline (``simulation.llm.deadline``) is only as good as the clock that
watches it, and nothing can watch a clock from the thread that computes. The caller's thread waits
for the worker, blocked, with the call's deadline (``LIMIT``, a context variable the deadline sets
for the call it watches) as its timeout: it is then as busy as when the call ran on it, and the rest
of a tick never computes beside a decode.

One worker per process, taking calls in the order they were made: two clients of one loaded model
(an evaluation's agent and judge) never decode at once, and no answer depends on thread timing.
``generate``'s ``on_done`` calls are handed back and made on the waiting thread, in order, before
the call's result, so progress bars and recorders see them where they always did, and each one
restarts the deadline. A call whose waiter gives up cannot be killed; its worker finishes it, or
never does, as a daemon thread that keeps nothing alive, and the next call gets a fresh worker.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulation.llm.backend import Backend, OnDone
    from simulation.llm.types import LLMRequest, RawCompletion

__all__ = ["LIMIT", "Stalled", "call", "in_worker"]

LIMIT: ContextVar[float | None] = ContextVar("agora_backend_call_limit", default=None)
"""Seconds the call being made may go without an answer (set by ``deadline.bounded`` for the call
it watches); None: no deadline (the caller waits as long as the call takes)."""


class Stalled(Exception):
    """The worker delivered nothing for the call's limit; the waiter gave up on it."""


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


def in_worker(backend: Backend, requests: Sequence[LLMRequest], on_done: OnDone | None = None,
              limit_s: float | None = None) -> list[RawCompletion]:
    """``backend.generate(requests, on_done)`` in the worker thread, waited for here. Whatever it
    raises is raised here; ``on_done`` runs here, in order. Raises ``Stalled`` when nothing comes
    for ``limit_s`` seconds (None: waits as long as it takes); then, or when the wait itself is
    interrupted (Ctrl-C, SIGTERM), the worker is abandoned."""
    if threading.current_thread().name == "agora-backend":  # a backend's own nested call
        return backend.generate(requests, on_done)
    events: queue.SimpleQueue[tuple[str, Any, Any]] = queue.SimpleQueue()

    def done(index: int, completion: RawCompletion) -> None:
        events.put(("done", index, completion))

    def job() -> None:
        try:
            result = backend.generate(requests, done if on_done is not None else None)
        except BaseException as exc:  # every outcome reaches the waiter, as a batch's does
            events.put(("error", exc, None))
        else:
            events.put(("result", result, None))

    worker = _current()
    worker.jobs.put(job)
    try:
        while True:
            try:
                kind, first, second = events.get(timeout=limit_s)
            except queue.Empty:
                raise Stalled() from None
            if kind == "result":
                return first
            if kind == "error":
                raise first
            on_done(first, second)  # type: ignore[misc]
    except BaseException as exc:
        if not isinstance(exc, Exception) or isinstance(exc, Stalled):
            _abandon(worker)
        raise


def call(fn: Callable[[], Any]) -> Any:
    """``fn()`` on the worker thread, waited for: llama.cpp work other than a backend's calls (a
    benchmark's own speed check) belongs on the thread every decode of the process uses."""
    if threading.current_thread().name == "agora-backend":
        return fn()
    done: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()

    def job() -> None:
        try:
            done.put((True, fn()))
        except BaseException as exc:
            done.put((False, exc))

    worker = _current()
    worker.jobs.put(job)
    try:
        ok, value = done.get()
    except BaseException:
        _abandon(worker)
        raise
    if not ok:
        raise value
    return value
