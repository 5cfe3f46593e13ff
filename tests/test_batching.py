"""The one batching mechanism (simulation/llm/batching.py): the hang it fixes, its flush rule, its watchdog.

The hang seen in a fresh-clone ``make test`` (a real-model test idle at 0 % CPU in the event loop's
``select``) came from pytest-timeout: its ``Failed`` is a ``BaseException``, raised by SIGALRM
inside the backend's ``generate``. The old flusher ran as a fire-and-forget task, so asyncio kept
that exception on the task, nobody looked at it, and the requests the flusher had taken were never
answered. ``test_an_exception_raised_by_a_signal_inside_a_batch_reaches_the_waiting_agents``
reproduces it with a real SIGALRM (the old client hangs there). A second way to hang, found by the
stress test below: a request parked while a batch was in flight on a backend that awaits (the
openai backend) found the old flusher still running, started none, and was never sent.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from datetime import datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from simulation.errors import RunError
from simulation.llm.batching import Batcher, BatchLoop, PhaseStuck, run
from simulation.llm.client import LLMClient
from simulation.llm.types import RawCompletion
from simulation.memory.town import TownMemory
from simulation.scenario import MemorySettings


class N(BaseModel):
    n: int


class SyncDouble:
    """Answers {"n": i} at once, in this process (like llama.cpp); records batch sizes."""

    name = "sync-double"
    model_id = "double"

    def __init__(self, raise_at: int | None = None, error: BaseException | None = None, busy_s: float = 0.0):
        self.batches: list[int] = []
        self.raise_at = raise_at
        self.error = error
        self.busy_s = busy_s

    def generate(self, requests, on_done=None):
        self.batches.append(len(requests))
        if self.raise_at is not None and len(self.batches) >= self.raise_at:
            if self.error is not None:
                raise self.error
            deadline = time.monotonic() + self.busy_s
            while time.monotonic() < deadline:  # busy in C-like code, as llama.cpp is, until a signal
                pass
        return [RawCompletion(text=json.dumps({"n": i}), finish_reason="stop") for i in range(len(requests))]

    def close(self):
        pass


class AsyncDouble(SyncDouble):
    """The same answers through ``agenerate``, which awaits (like a server): the loop stays live."""

    name = "async-double"

    def __init__(self, turns: int = 3, sleep_s: float = 0.0):
        super().__init__()
        self.turns = turns
        self.sleep_s = sleep_s

    async def agenerate(self, requests, on_done=None):
        for _ in range(self.turns):
            await asyncio.sleep(0)
        if self.sleep_s:
            await asyncio.sleep(self.sleep_s)
        return self.generate(requests, on_done)


def ask(client: LLMClient, who: str, purpose: str = "t"):
    return client.ask([{"role": "user", "content": who}], N, default=N(n=-1), purpose=purpose, agent_id=who, tick=0)


class FakeEmbedder:
    """Deterministic unit vectors; keeps the stress test free of the real model's load time."""

    dim = 8

    def embed(self, texts):
        out = np.array([[(sum(map(ord, t)) * (i + 1)) % 17 + 1 for i in range(self.dim)] for t in texts],
                       dtype=np.float32).reshape(-1, self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True) if len(out) else out


def memory(agents) -> TownMemory:
    mem = TownMemory(MemorySettings(), epoch=datetime(2023, 2, 13, 7), embedder=FakeEmbedder())
    for a in agents:
        mem.add(a, "observation", f"{a} remembers something", importance=3)
    return mem


# ---------------------------------------------------------------------------- the root cause


def test_an_exception_raised_by_a_signal_inside_a_batch_reaches_the_waiting_agents():
    """pytest-timeout's mechanism, for real: SIGALRM raises ``Failed`` (a BaseException) while the
    backend is busy in a batch. Every waiting agent must see it; the old client left the event loop
    idle forever (the issue's stack: ``_run_once`` -> ``EpollSelector.select``)."""
    backend = SyncDouble(raise_at=1, busy_s=10.0)
    client = LLMClient(backend, run_seed=1, call_timeout_s=None)  # on the loop's thread, where a signal lands
    loop = BatchLoop(stall_s=0)

    def timeout(signum, frame):
        pytest.fail("Timeout >0.2s (raised like pytest-timeout's signal method)")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(pytest.fail.Exception, match="Timeout"):
            loop.run_phase("decide", [(f"a{i}", ask(client, f"a{i}")) for i in range(3)])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        loop.close()


@pytest.mark.parametrize("error", [pytest.fail.Exception("Timeout"), GeneratorExit(), RunError("server gone")])
def test_whatever_a_batch_raises_reaches_every_request_of_it(error):
    client = LLMClient(SyncDouble(raise_at=1, error=error), run_seed=1)

    async def phase():
        return await asyncio.gather(*(ask(client, f"a{i}") for i in range(3)), return_exceptions=True)

    assert [type(r) for r in run(phase(), stall_s=0)] == [type(error)] * 3


def test_a_request_parked_while_a_batch_is_in_flight_is_sent():
    """The second hang: agent b parks after a's batch went out to a backend that awaits."""
    backend = AsyncDouble(sleep_s=0.05)
    client = LLMClient(backend, run_seed=1)

    async def late(who):
        await asyncio.sleep(0.01)  # a timer: the loop is idle meanwhile, so a's batch goes first
        return await ask(client, who)

    answers = BatchLoop(stall_s=0).run_phase("decide", [("a", ask(client, "a")), ("b", late("b"))])
    assert [a.ok for a in answers] == [True, True]
    assert backend.batches == [1, 1]


def test_a_slow_agent_joins_the_batch_instead_of_splitting_it():
    """The old flush rule waited three event-loop turns; an agent four turns behind made a batch
    of its own. Now a batch waits for every runnable coroutine."""
    backend = SyncDouble()
    client = LLMClient(backend, run_seed=1)

    async def slow(who, turns):
        for _ in range(turns):
            await asyncio.sleep(0)
        return await ask(client, who)

    BatchLoop().run_phase("decide", [(f"a{t}", slow(f"a{t}", t)) for t in range(12)])
    assert backend.batches == [12]


# ---------------------------------------------------------------------------- flush rule


def test_retrievals_go_before_questions_so_both_kinds_of_agent_share_one_llm_batch():
    backend = SyncDouble()
    client = LLMClient(backend, run_seed=1)
    mem = memory(["a", "b", "c"])

    async def retrieve_then_ask(who):
        await mem.retrieve(who, "what now?", "react")
        return await ask(client, who)

    BatchLoop().run_phase("decide", [("a", retrieve_then_ask("a")), ("b", ask(client, "b")),
                                     ("c", retrieve_then_ask("c"))])
    assert mem.stats.batches == 1 and mem.stats.queries == 2
    assert backend.batches == [3]


def test_batchers_of_equal_priority_go_together():
    sent: list[tuple[str, int]] = []

    def batcher(name):
        async def send(batch):
            sent.append((name, len(batch)))
            return batch
        return Batcher(name, send, priority=1)

    agent, judge = batcher("agent"), batcher("judge")

    async def both(i):
        return await agent.submit(i), await judge.submit(-i)

    async def phase():
        return await asyncio.gather(*(both(i) for i in range(4)))

    assert run(phase()) == [(i, -i) for i in range(4)]
    assert sent == [("agent", 4), ("judge", 4)]


def test_batched_requests_outside_a_batch_loop_are_a_clear_error():
    client = LLMClient(SyncDouble(), run_seed=1)
    with pytest.raises(RuntimeError, match="BatchLoop"):
        asyncio.run(ask(client, "a"))


# ---------------------------------------------------------------------------- watchdog


def test_a_coroutine_waiting_on_a_future_nobody_resolves_is_a_named_error():
    backend = SyncDouble()
    client = LLMClient(backend, run_seed=1)
    loop = BatchLoop(stall_s=0)

    async def lost(who):
        await ask(client, who, purpose="plan")
        await loop.create_future()  # nothing will ever resolve this

    with pytest.raises(PhaseStuck) as stuck:
        loop.run_phase("decide", [("ann", ask(client, "ann")), ("bob", lost("bob")), ("cy", ask(client, "cy"))])
    message = str(stuck.value)
    assert "phase 'decide' is stuck" in message
    assert "bob: waiting at" in message and "in lost" in message and "backend sync-double plan" in message
    assert "ann" not in message and "cy" not in message, "agents that finished are not named"
    assert isinstance(stuck.value, RunError), "the CLI reports it like any run failure (exit 1, resume hint)"
    assert backend.batches == [3]
    # the loop is usable again afterwards (the next phase, or the probes)
    assert [a.ok for a in loop.run_phase("probe", [("ann", ask(client, "ann"))])] == [True]
    loop.close()


def test_the_watchdog_gives_a_thread_outside_the_batchers_its_grace():
    """Idle with nothing pending is suspect, not stuck, for ``stall_s``: work handed to a thread
    that finishes inside the grace completes normally."""
    loop = BatchLoop(stall_s=5.0)

    async def in_thread():
        return await asyncio.get_running_loop().run_in_executor(None, lambda: time.sleep(0.2) or 7)

    assert loop.run_phase("tools", [("ann", in_thread())]) == [7]
    loop.close()


# ---------------------------------------------------------------------------- stress

Program = list  # of ops: ("spin", k) | ("mem",) | ("llm",) | ("nest", [Program, ...])

leaf_ops = st.one_of(st.tuples(st.just("spin"), st.integers(1, 8)), st.just(("mem",)), st.just(("llm",)))
programs = st.recursive(
    st.lists(leaf_ops, max_size=5),
    lambda inner: st.lists(st.one_of(leaf_ops, st.tuples(st.just("nest"), st.lists(inner, min_size=1, max_size=3))),
                           max_size=5),
    max_leaves=12,
)


def expected_batches(progs: list[Program]) -> tuple[list[int], list[int]]:
    """What a maximal batcher sends: run every runnable coroutine until it parks or ends; when none
    can run, release the retrievals if any are parked, else the LLM questions."""
    mem_batches: list[int] = []
    llm_batches: list[int] = []
    # a frame: [ops, position, parent frame, children still running]
    runnable = [[p, 0, None, 0] for p in progs]
    parked_mem: list[list] = []
    parked_llm: list[list] = []
    while True:
        while runnable:
            frame = runnable.pop()
            ops, pos, parent, _ = frame
            while pos < len(ops):
                op = ops[pos]
                pos += 1
                if op[0] in ("mem", "llm"):
                    frame[1] = pos
                    (parked_mem if op[0] == "mem" else parked_llm).append(frame)
                    break
                if op[0] == "nest":
                    frame[1], frame[3] = pos, len(op[1])
                    runnable += [[child, 0, frame, 0] for child in op[1]]
                    break
            else:  # finished
                if parent is not None:
                    parent[3] -= 1
                    if parent[3] == 0:
                        runnable.append(parent)
        if parked_mem:
            mem_batches.append(len(parked_mem))
            runnable, parked_mem = parked_mem, []
        elif parked_llm:
            llm_batches.append(len(parked_llm))
            runnable, parked_llm = parked_llm, []
        else:
            return mem_batches, llm_batches


async def execute(prog: Program, who: str, client: LLMClient, mem: TownMemory) -> None:
    for op in prog:
        if op[0] == "spin":
            for _ in range(op[1]):
                await asyncio.sleep(0)
        elif op[0] == "mem":
            await mem.retrieve(who, f"{who} wonders", "stress")
        elif op[0] == "llm":
            answer = await ask(client, who)
            assert answer.ok
        else:
            await asyncio.gather(*(execute(child, who, client, mem) for child in op[1]))


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(progs=st.lists(programs, min_size=1, max_size=8), on_a_server=st.booleans())
def test_every_phase_completes_with_maximal_batches(progs, on_a_server):
    """Random phases: agents with extra awaits, nested sub-tasks, retrievals and questions in any
    order, on a backend that answers in this process or one that awaits like a server."""
    backend = AsyncDouble() if on_a_server else SyncDouble()
    client = LLMClient(backend, run_seed=1)
    agents = [f"a{i}" for i in range(len(progs))]
    mem = memory(agents)
    sizes: list[int] = []
    search = mem.search_now
    mem.search_now = lambda batch: (sizes.append(len(batch)), search(batch))[1]  # type: ignore[method-assign]
    loop = BatchLoop(stall_s=0)  # a stuck phase fails at once instead of hanging the test
    try:
        loop.run_phase("stress", [(a, execute(p, a, client, mem)) for a, p in zip(agents, progs)])
    finally:
        loop.close()
    want_mem, want_llm = expected_batches(progs)
    assert backend.batches == want_llm
    assert sizes == want_mem


def test_a_task_left_behind_by_ctrl_c_prints_no_traceback(caplog):
    """A KeyboardInterrupt that lands inside an agent's coroutine leaves a task whose exception
    nobody reads; asyncio would log it with a traceback when the task is collected, after the run
    has already said it was stopped. Other unread exceptions are still reported."""
    import logging

    from simulation.llm.batching import BatchLoop

    loop = BatchLoop()
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            loop.call_exception_handler({"message": "Task exception was never retrieved",
                                         "exception": KeyboardInterrupt()})
            assert not caplog.records
            loop.call_exception_handler({"message": "Task exception was never retrieved", "exception": ValueError("x")})
            assert [r.getMessage() for r in caplog.records] == ["Task exception was never retrieved"]
    finally:
        loop.close()


def test_ctrl_c_inside_nested_gathers_unwinds_every_task_quietly(caplog):
    """A signal lands in one agent's sub-coroutine (an importance rating under `rate_unrated`'s
    gather): the stop reaches the caller once, and closing the loop unwinds every task: none is
    destroyed pending and no cancelled gather prints a traceback (CI saw both after SIGTERM)."""
    import gc
    import logging

    from simulation.llm.batching import BatchLoop

    async def rating(i: int) -> None:
        await asyncio.sleep(0)
        if i == 1:
            raise KeyboardInterrupt  # what entry._stop raises on SIGTERM
        await asyncio.sleep(10)

    async def person() -> None:
        await asyncio.gather(*(rating(i) for i in range(3)))

    loop = BatchLoop()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(KeyboardInterrupt):
            loop.run_phase("importance", [(f"p{i}", person()) for i in range(3)])
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        loop.close()
        assert left and all(t.done() for t in left)
        del left
        gc.collect()
    assert [r.getMessage() for r in caplog.records] == []
