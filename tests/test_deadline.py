"""A backend that stops answering is an error at a tick boundary, never a hang (``llm.call_timeout_s``).

The batch loop's watchdog counts a batch in flight as progress, so these tests use backends
whose call never returns: an in-process one blocked in ``generate`` (as a wedged llama.cpp decode
would be) and a server-like one whose ``agenerate`` never resolves. The deadline restarts with
each answer, so a slow batch that makes progress is not cut off; answers under a deadline (in
the worker thread) are the ones the loop's own thread gives.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import pytest
from conftest import step_run, with_settings
from pydantic import BaseModel

from simulation import Simulation
from simulation.llm.batching import BatchLoop, run
from simulation.llm.client import LLMClient
from simulation.llm.deadline import CallTimeout
from simulation.llm.types import RawCompletion
from simulation.testing import ScriptedBackend


class N(BaseModel):
    n: int


class Counter:
    """Answers {"n": i} for the i-th request of a batch, in this process; records where it ran."""

    name = "counter"
    model_id = "counter-1"

    def __init__(self, pause_s: float = 0.0):
        self.pause_s = pause_s
        self.threads: set[int] = set()

    def generate(self, requests, on_done=None):
        self.threads.add(threading.get_ident())
        out = []
        for i, _ in enumerate(requests):
            time.sleep(self.pause_s)
            c = RawCompletion(text=json.dumps({"n": i}), finish_reason="stop")
            out.append(c)
            if on_done:
                on_done(i, c)
        return out

    def close(self):
        pass


class Wedged(Counter):
    """Never returns from ``generate`` (until the test releases it, so no thread outlives it long)."""

    name = "wedged"

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def generate(self, requests, on_done=None):
        self.release.wait()
        return super().generate(requests, on_done)


class Silent(Counter):
    """A server that takes the requests and never answers: ``agenerate`` awaits forever."""

    name = "silent"

    def __init__(self):
        super().__init__()
        self.cancelled = False

    async def agenerate(self, requests, on_done=None):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def asks(client: LLMClient, k: int):
    async def phase():
        return await asyncio.gather(*(client.ask([{"role": "user", "content": f"q{i}"}], N, default=N(n=-1),
                                                 purpose="utterance", agent_id=f"a{i}", tick=4) for i in range(k)))
    return phase()


def test_an_in_process_backend_that_never_returns_is_a_named_error():
    backend = Wedged()
    client = LLMClient(backend, run_seed=1, call_timeout_s=0.3)
    try:
        with pytest.raises(CallTimeout) as err:
            run(asks(client, 3), stall_s=0)
    finally:
        backend.release.set()
    message = str(err.value)
    assert "the wedged backend (model counter-1) delivered no answer for 0.3 s (llm.call_timeout_s)" in message
    assert "3 of 3 request(s) unanswered: utterance for a0 at tick 4; utterance for a1 at tick 4" in message


def test_a_server_that_never_answers_is_a_named_error_and_its_requests_are_cancelled():
    backend = Silent()
    client = LLMClient(backend, run_seed=1, call_timeout_s=0.2)
    with pytest.raises(CallTimeout, match="the silent backend .* 2 of 2 request"):
        run(asks(client, 2), stall_s=0)
    assert backend.cancelled


def test_the_deadline_restarts_with_each_answer():
    """Twelve answers 0.1 s apart take 1.2 s, four times the deadline, and none is ever late."""
    client = LLMClient(Counter(pause_s=0.1), run_seed=1, call_timeout_s=0.3)
    answers = run(asks(client, 12), stall_s=0)
    assert [a.value.n for a in answers] == list(range(12))


def test_an_in_process_backend_computes_on_the_one_worker_thread_with_or_without_a_deadline():
    """Every decode of the process on one thread (GNU OpenMP slows every decode once two threads
    have computed), with the same answers, and progress reported on the loop's thread."""
    seen_on: set[int] = set()
    here = threading.get_ident()

    def progress(_completion):
        seen_on.add(threading.get_ident())

    off, on = Counter(), Counter()
    with_deadline = run(asks(LLMClient(off, run_seed=1, call_timeout_s=5, on_progress=progress), 5), stall_s=0)
    without = run(asks(LLMClient(on, run_seed=1, call_timeout_s=None), 5), stall_s=0)
    assert [a.value for a in with_deadline] == [a.value for a in without]
    assert off.threads == on.threads and len(off.threads) == 1 and here not in off.threads
    assert seen_on == {here}  # progress callbacks come back to the loop's thread


def test_under_a_deadline_the_loop_waits_blocked_so_nothing_computes_beside_the_backend():
    """The loop's thread waits for the worker blocked, as when the call ran on it: the rest of the
    tick never computes beside a decode (on two cores that slowed llama.cpp's steps by 1.8x)."""
    beats: list[int] = []

    class Slow(Counter):
        during = -1

        def generate(self, requests, on_done=None):
            before = len(beats)
            time.sleep(0.2)
            self.during = len(beats) - before
            return super().generate(requests, on_done)

    backend = Slow()
    client = LLMClient(backend, run_seed=1, call_timeout_s=5)

    async def phase():
        stop = asyncio.Event()

        async def busy():  # another person's work on the loop: it must wait for the call
            while not stop.is_set():
                beats.append(1)
                await asyncio.sleep(0.001)

        beside = asyncio.ensure_future(busy())
        answers = await asks(client, 3)
        stop.set()
        await beside
        return answers

    answers = run(phase(), stall_s=0)
    assert [a.value.n for a in answers] == [0, 1, 2]
    assert beats and backend.during == 0, "nothing ran on the loop while the backend computed"
    assert backend.threads and threading.get_ident() not in backend.threads, "it computed in the worker"


def test_calls_under_a_deadline_run_one_at_a_time_in_the_order_they_were_made():
    """Two clients of one backend (an evaluation's agent and judge) flush together: their calls
    must never overlap, whatever the threads do."""
    inside = []
    lock = threading.Lock()

    class Exclusive(Counter):
        def generate(self, requests, on_done=None):
            assert lock.acquire(blocking=False), "two calls computed at once"
            try:
                inside.append(requests[0].messages[0]["content"])
                time.sleep(0.05)
                return super().generate(requests, on_done)
            finally:
                lock.release()

    backend = Exclusive()
    first, second = LLMClient(backend, run_seed=1), LLMClient(backend, run_seed=2)

    async def both():
        return await asyncio.gather(first.ask([{"role": "user", "content": "first"}], N, default=N(n=-1),
                                              purpose="p", agent_id="a", tick=0),
                                    second.ask([{"role": "user", "content": "second"}], N, default=N(n=-1),
                                               purpose="p", agent_id="b", tick=0))

    assert [a.ok for a in BatchLoop(stall_s=0).run_main("both", both())] == [True, True]
    assert inside == ["first", "second"]


class WedgesAt(ScriptedBackend):
    """The scripted town's answers until its ``at``-th batch, which never returns."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at
        self.release = threading.Event()

    def generate(self, requests, on_done=None):
        if len(getattr(self, "batches", [])) + 1 >= self.at:
            self.release.wait()
        return super().generate(requests, on_done)


def test_a_run_whose_backend_hangs_stops_at_a_tick_boundary_and_resumes(tmp_path, flagship, embedder):
    loaded = with_settings(flagship, llm={"call_timeout_s": 0.5})
    backend = WedgesAt(10)
    sim = Simulation.from_scenario(loaded, backend=backend, out=tmp_path / "runs", ticks=12)
    try:
        with pytest.raises(CallTimeout, match=r"the scripted backend .* delivered no answer for 0.5 s"):
            with sim:
                step_run(sim)
    finally:
        backend.release.set()
    stopped_at = sim.model.tick
    assert 0 < stopped_at < 12
    con = sqlite3.connect(sim.run_dir / "run.db")
    status, message = con.execute("select status, message from runs").fetchone()
    committed = con.execute("select max(tick) from agent_states").fetchone()[0]
    con.close()
    assert status == "failed" and "delivered no answer" in message
    assert committed == stopped_at - 1  # the hung tick left nothing behind
    assert f"continue with: agora resume {sim.run_dir}" in sim.saved()
    resumed = Simulation.resume(sim.run_dir, backend=ScriptedBackend())
    with resumed:
        step_run(resumed)
    assert resumed.model.tick == 12


# ---------------------------------------------------------------- the real bundled model

def _model_requests():
    from simulation.llm.types import LLMRequest

    return [LLMRequest(messages=[{"role": "system", "content": f"You are person {i}. Answer with JSON only."},
                                 {"role": "user", "content": "Pick a number."}],
                       json_schema=N.model_json_schema(), max_tokens=16, temperature=0.7, seed=i) for i in range(3)]


@pytest.mark.slow
def test_the_bundled_model_answers_the_same_bits_in_the_worker_thread():
    from simulation.llm import offthread
    from simulation.llm.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(context_tokens=1024)
    try:
        here = [(c.text, c.completion_tokens) for c in backend.generate(_model_requests())]
        there = offthread.in_worker(backend, _model_requests(), limit_s=600)
        assert [(c.text, c.completion_tokens) for c in there] == here
    finally:
        backend.close()


@pytest.mark.slow
def test_a_model_closed_while_a_call_computes_stops_the_call_at_a_token_and_is_then_freed():
    """Ctrl-C (or a deadline) closes a run while its backend computes in the worker thread: the
    call must stop at its next token boundary before the model is freed under it."""
    from simulation.errors import RunError
    from simulation.llm.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(context_tokens=1024)
    loaded, real_step = backend._loaded, backend.seqs.step
    stepping = threading.Event()

    def step(pairs):  # the first decode step waits until close() has begun
        stepping.set()
        loaded.closing.wait(5)
        return real_step(pairs)

    backend.seqs.step = step
    outcome: list[BaseException | None] = []

    def call():
        try:
            backend.generate(_model_requests()[:1])
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    assert stepping.wait(30)
    backend.close()  # waits for the call to stop, then frees the model
    worker.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], RunError)
    assert "was closed while it was answering" in str(outcome[0])
    assert not loaded.busy.locked()
