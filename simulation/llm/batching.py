"""One batching mechanism for a phase's requests (LLM questions, memory retrievals), and its watchdog.

Cognition is ordinary sequential ``async`` code, one coroutine per agent. Each request it makes
parks in a ``Batcher`` and awaits its answer. **Flush rule: a batch goes out when the event loop
has nothing else to run.** At that moment every coroutine of the phase is parked in a batcher,
waiting on its own sub-tasks, or done, so no further request can join: the batch is as large as
it can be, without counting coroutines or event-loop turns. The moment is observed, not guessed:
a ``BatchLoop`` runs on a selector that is told each time asyncio is about to wait for I/O or a
timer because no callback is ready.

When several batchers hold requests at an idle moment, those of the lowest ``priority`` go first
(memory retrieval before the LLM): the agents a retrieval releases then ask their questions and
join the LLM's next batch instead of making one of their own. Batchers of equal priority (an
evaluation's agent and judge clients) go together.

A batch runs in a task the batcher owns. Whatever that task raises, ``BaseException`` included,
reaches every request of the batch, so no agent waits on a batch that died. (The hang this
replaces: the old flushers were fire-and-forget tasks; pytest-timeout's ``Failed``, a
``BaseException`` raised by SIGALRM inside the backend's ``generate``, was stored on the flusher
task by asyncio and the requests it had taken were never answered. See tests/test_batching.py.)

The watchdog: idle with no request pending, no batch in flight and no timer set, a phase can never
finish, because nothing is left that could wake it. After ``stall_s`` seconds of that (a thread or
socket outside the batchers gets that long to wake it), the phase is cancelled and ``run_phase``
raises ``PhaseStuck`` naming the phase, the tasks still waiting, where they wait and the purposes
of their agents' last requests. A stuck phase is an error at the tick boundary, never a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, Generic, TypeVar

from simulation.errors import RunError

__all__ = ["Batcher", "BatchLoop", "PhaseStuck", "run"]

Req = TypeVar("Req")
Res = TypeVar("Res")
T = TypeVar("T")

STALL_S = 30.0
"""Default seconds a phase may sit idle with nothing pending or in flight before it is stuck."""
_UNWIND_ROUNDS = 8
"""How many times ``BatchLoop.close`` cancels what is left before it gives up (each round unwinds
at least one level of gathers; agents nest two or three)."""


class PhaseStuck(RunError):
    """A phase whose coroutines wait on something nothing will ever resolve."""


class _IdleSelector(selectors.BaseSelector):
    """The default selector, plus a hook called when the loop is about to wait with nothing ready.

    asyncio's loop calls ``select(0)`` while callbacks are ready, ``select(t)`` when only a timer
    at ``t`` is left and ``select(None)`` when nothing at all is; the hook may shorten the wait
    (to 0 after it has scheduled a batch)."""

    def __init__(self) -> None:
        self._inner = selectors.DefaultSelector()
        self.on_idle: Callable[[float | None], float | None] | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self.on_idle is not None and (timeout is None or timeout > 0):
            timeout = self.on_idle(timeout)
        return self._inner.select(timeout)

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Any:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()


class BatchLoop(asyncio.SelectorEventLoop):
    """An event loop that sends its batchers' requests when it is idle, and watches phases."""

    def __init__(self, *, stall_s: float = STALL_S) -> None:
        selector = _IdleSelector()
        super().__init__(selector)
        selector.on_idle = self._on_idle
        self.stall_s = stall_s
        self._batchers: list[Batcher[Any, Any]] = []
        self._phase: asyncio.Future[Any] | None = None
        self._phase_name = ""
        self._stuck: str | None = None
        self._idle_since: float | None = None
        self.last_request: dict[str, str] = {}
        """Agent (or other requester) -> 'batcher purpose' of its latest request, for the watchdog."""
        self.set_exception_handler(_quiet_on_interrupt)

    # ------------------------------------------------------------------ batchers

    def attach(self, batcher: Batcher[Any, Any]) -> None:
        if batcher not in self._batchers:
            self._batchers.append(batcher)
            self._batchers.sort(key=lambda b: b.priority)  # stable: equal priorities keep their order

    def _on_idle(self, timeout: float | None) -> float | None:
        due = [b for b in self._batchers if b.pending]
        if due:
            top = due[0].priority
            for batcher in due:
                if batcher.priority == top:
                    batcher.flush(self)
            self._idle_since = None
            return 0
        phase = self._phase
        if timeout is not None or phase is None or phase.done() or any(b.in_flight for b in self._batchers):
            self._idle_since = None  # a timer, a batch or nothing to watch: waiting is progress
            return timeout
        now = self.time()
        if self._idle_since is None:
            self._idle_since = now
        if now - self._idle_since < self.stall_s:
            return self.stall_s - (now - self._idle_since)
        self._stuck = self._describe_stuck()
        phase.cancel()
        self._idle_since = None
        return 0

    # ------------------------------------------------------------------ phases

    def run_phase(self, name: str, jobs: Iterable[tuple[str, Coroutine[Any, Any, T]]]) -> list[T]:
        """Run one coroutine per job (label, coroutine) together, each as a task named by its label,
        and return their results in order. Raises ``PhaseStuck`` if the phase can make no progress."""
        jobs_list = list(jobs)
        if not jobs_list:
            return []

        async def together() -> list[T]:
            tasks = [asyncio.ensure_future(coro) for _, coro in jobs_list]
            for (label, _), task in zip(jobs_list, tasks):
                task.set_name(label)
            return list(await asyncio.gather(*tasks))

        return self.run_main(name, together())

    def run_main(self, name: str, coro: Coroutine[Any, Any, T]) -> T:
        """Run one coroutine to completion under the watchdog (``run_phase`` for a phase of agents)."""
        main = self.create_task(coro, name=name)
        self._phase, self._phase_name, self._stuck, self._idle_since = main, name, None, None
        try:
            return self.run_until_complete(main)
        except asyncio.CancelledError:
            if self._stuck is not None:
                raise PhaseStuck(self._stuck) from None
            raise
        finally:
            self._phase = None

    def close(self) -> None:
        """Cancel what a stopped phase left waiting (Ctrl-C, an error, a deadline: a batch may still
        be computing in a worker thread), let it unwind, then close: no task is destroyed pending."""
        if not self.is_closed() and not self.is_running():
            # Rounds, not one pass: a KeyboardInterrupt that stopped an agent's coroutine is
            # re-raised where a gather hands it to the coroutine awaiting it, which stops this
            # unwinding too, leaving tasks pending (asyncio: "Task was destroyed but it is pending").
            for _ in range(_UNWIND_ROUNDS):
                left = [t for t in asyncio.all_tasks(self) if not t.done()]
                if not left:
                    break
                for task in left:
                    task.cancel()
                with contextlib.suppress(BaseException):
                    self.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        super().close()

    def _describe_stuck(self) -> str:
        own = {self._phase} | {t for b in self._batchers for t in b.tasks}
        waiting = sorted((t for t in asyncio.all_tasks(self) if t not in own), key=lambda t: t.get_name())
        lines = []
        for task in waiting:
            label = task.get_name()
            last = self.last_request.get(label)
            lines.append(f"  {label}: waiting at {_where(task)}"
                         + (f" (its last request: {last})" if last else " (no request made yet)"))
        return (f"phase {self._phase_name!r} is stuck: its coroutines wait on something no batch will answer "
                f"(no request pending, none in flight, no timer) for {self.stall_s:g} s. Still waiting:\n"
                + ("\n".join(lines) or "  (no task: the phase itself waits)"))


def _quiet_on_interrupt(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's report of a task whose exception nobody read, except for Ctrl-C: a KeyboardInterrupt
    that lands inside an agent's coroutine stops the run (and is reported once, as a stop), and the
    task it left behind must not print a traceback when it is collected; nor must the gathers that
    the stop cancelled (an unread CancelledError is the stop's echo, never a cause)."""
    if isinstance(context.get("exception"), (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
        return
    loop.default_exception_handler(context)


def _where(task: asyncio.Task[Any]) -> str:
    """File, line and function of the innermost coroutine a task is suspended in."""
    coro: Any = task.get_coro()
    while getattr(coro, "cr_await", None) is not None and hasattr(coro.cr_await, "cr_frame"):
        coro = coro.cr_await
    frame = getattr(coro, "cr_frame", None)
    if frame is None:
        return "an unknown place"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


class Batcher(Generic[Req, Res]):
    """Parks requests and sends them, all at once, through ``send`` when the loop is idle.

    ``send`` takes the batch's requests and returns one result per request, in order; whatever
    it raises reaches every request of the batch. ``priority``: lower goes first (see above)."""

    def __init__(self, name: str, send: Callable[[list[Req]], Awaitable[list[Res]]], *, priority: int = 0):
        self.name = name
        self.send = send
        self.priority = priority
        self._pending: list[tuple[Req, asyncio.Future[Res]]] = []
        self.tasks: set[asyncio.Task[None]] = set()
        """Batches in flight."""

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def in_flight(self) -> int:
        return len(self.tasks)

    async def submit(self, request: Req, *, who: str | None = None, purpose: str = "") -> Res:
        """Park ``request`` until the loop is idle, then answer it with the rest of its batch."""
        loop = asyncio.get_running_loop()
        if not isinstance(loop, BatchLoop):
            raise RuntimeError(f"{self.name}: batched requests need a simulation.llm.batching.BatchLoop "
                               "(use simulation.llm.batching.run(...) instead of asyncio.run(...))")
        loop.attach(self)
        future: asyncio.Future[Res] = loop.create_future()
        self._pending.append((request, future))
        if who is not None:
            loop.last_request[who] = f"{self.name} {purpose}".strip()
        return await future

    def flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._pending = self._pending, []
        task = loop.create_task(self._run(batch), name=f"{self.name} batch")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, batch: list[tuple[Req, asyncio.Future[Res]]]) -> None:
        try:
            results = await self.send([request for request, _ in batch])
            if len(results) != len(batch):
                raise RunError(f"{self.name} returned {len(results)} answers for {len(batch)} requests")
        except asyncio.CancelledError:  # the loop is shutting down: so are the waiters
            for _, future in batch:
                future.cancel()
            raise
        except BaseException as exc:  # every request of the batch sees it; see the module docstring
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise  # asyncio re-raises these out of the loop: Ctrl-C stops the run at once
            return
        for (_, future), result in zip(batch, results):
            if not future.done():  # a waiter cancelled (Ctrl-C, a stuck phase) no longer wants it
                future.set_result(result)


def run(coro: Coroutine[Any, Any, T], *, name: str = "main", stall_s: float = STALL_S) -> T:
    """``asyncio.run`` for code that uses batchers: a fresh ``BatchLoop``, closed afterwards."""
    loop = BatchLoop(stall_s=stall_s)
    try:
        return loop.run_main(name, coro)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
