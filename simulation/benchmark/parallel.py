"""The runs of a benchmark or an experiment, one after another or several at once (``--jobs N``).

Why: a fleet of OpenAI-compatible servers (``--base-url`` given several times) is kept busy only
by enough requests in flight, and one run asks at most what one tick's phase batches; several runs
at once fill the fleet. Each run goes to its own process: a run owns its event loop, its signal
handling and, with an in-process model, the model itself, none of which two runs may share.

Nothing a run does depends on its neighbours: every draw is seeded by the run's own seed, tick,
person and purpose, and the replay cache is one SQLite file in WAL mode that the processes share
(a request of one run is never another's: the seed is part of its key). So a benchmark run with
``--jobs 4`` makes the runs it makes with ``--jobs 1``, and its report reads them back in seed
order. Ctrl-C (or SIGTERM) stops every run at its tick boundary, as it stops one; running the
same command again resumes them all.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from simulation.errors import InputError, Problem, RunError

if TYPE_CHECKING:
    from simulation.llm.backend import Backend
    from simulation.llm.factory import BackendChoice
    from simulation.run.fork import Intervention
    from simulation.scenario import LoadedScenario

__all__ = ["RunTask", "check_jobs", "run_tasks"]

OnTick = Callable[[int, int], None]


@dataclass(frozen=True)
class RunTask:
    """One run to make: a ``new`` one from a scenario and seed, an interrupted one to ``resume``,
    or a ``fork`` of a finished run at a tick. ``folder`` is where it goes: the runs folder of a new
    run or a fork, the run's own folder for a resume. ``at``: the fork tick, of a fork and of a
    fork being resumed (0 otherwise)."""

    kind: Literal["new", "resume", "fork"]
    seed: int
    folder: Path
    loaded: LoadedScenario | None = None
    ticks: int | None = None
    parent: Path | None = None
    at: int = 0
    interventions: tuple[Intervention, ...] = ()


def check_jobs(jobs: int, backend: Backend | str | None) -> None:
    """``jobs`` is usable with ``backend``: at least 1, and more only where each process can build
    its own backend (by name or from the settings, not an object made in this process)."""
    if jobs < 1:
        raise InputError(Problem("--jobs", f"needs at least 1 run at a time, got {jobs}"))
    if jobs > 1 and backend is not None and not isinstance(backend, str):
        raise InputError(Problem("--jobs", "several runs at once need a backend each process can build from the "
                                           "settings or by name, not a backend object"))


def execute(task: RunTask, *, llm: BackendChoice | None, backend: Backend | str | None,
            on_tick: OnTick | None = None) -> Path:
    """Make one run in this process; its folder. ``on_tick(done, total)`` after each tick, counted
    from the run's start (a fork's first tick is its fork tick)."""
    from simulation import Simulation

    own = backend if backend is not None and not isinstance(backend, str) else None
    if task.kind == "resume":
        sim = Simulation.resume(task.folder, llm=llm, backend=own)
    elif task.kind == "fork":
        assert task.parent is not None
        sim = Simulation.fork(task.parent, at=task.at, out=task.folder, interventions=task.interventions, llm=llm,
                              backend=own)
    else:
        assert task.loaded is not None
        sim = Simulation.from_scenario(task.loaded, seed=task.seed, out=task.folder, ticks=task.ticks, llm=llm,
                                       backend=backend)
    start = task.at  # a fork's ticks (and a resumed fork's) count from its fork tick, as its parent's do
    tick_cb = (lambda s: on_tick(s.ticks - s.ticks_left + start, s.ticks + start)) if on_tick else None
    with sim:
        sim.run(on_tick=tick_cb)
        return sim.run_dir


def run_tasks(tasks: Sequence[RunTask], *, llm: BackendChoice | None, backend: Backend | str | None, jobs: int = 1,
              on_start: Callable[[int, int], None] | None = None, on_done: Callable[[int, int], None] | None = None,
              on_tick: OnTick | None = None) -> list[Path]:
    """Make every run of ``tasks``, ``jobs`` at a time, and return their folders in the tasks' order.
    ``on_start(i, seed)`` / ``on_done(i, seed)`` as run i starts and ends; ``on_tick(done, total)``
    after each tick of the runs in flight (one run's ticks with ``jobs`` 1, all of theirs summed
    otherwise). A KeyboardInterrupt stops every run at its tick boundary and is raised here."""
    check_jobs(jobs, backend)
    if jobs == 1 or len(tasks) <= 1:
        out = []
        for i, task in enumerate(tasks):
            if on_start is not None:
                on_start(i, task.seed)
            out.append(execute(task, llm=llm, backend=backend, on_tick=on_tick))
            if on_done is not None:
                on_done(i, task.seed)
        return out
    return _in_processes(tasks, llm=llm, backend=backend, jobs=jobs, on_start=on_start, on_done=on_done,
                         on_tick=on_tick)


# ---------------------------------------------------------------------- several at once

_ticks: Any = None
"""In a worker: the queue its runs' ticks are posted to (set by ``_init``)."""
_stopping = False
"""In a worker: a stop was asked for; a run it has not begun is not begun."""


def _init(ticks: Any) -> None:
    """A worker's start: Ctrl-C and SIGTERM stop its run at a tick boundary, as in ``agora`` itself
    (a process started from a background shell inherits SIGINT ignored)."""
    global _ticks
    _ticks = ticks
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)


def _stop(signum: int, frame: Any) -> None:
    """The first Ctrl-C or SIGTERM stops the run; a second (Ctrl-C reaches the whole process group,
    and the parent then asks each worker too) must not break into the stop's own clean-up."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    raise KeyboardInterrupt


def _work(i: int, task: RunTask, llm: BackendChoice | None, backend: str | None) -> tuple[str, Any]:
    """Run ``task`` in a worker: ("done", its folder); ("stopped", None) after Ctrl-C, the run left
    interrupted to resume, so the pool stays whole for the others to stop as well; ("input", its
    problems) or ("failed", a message) when it could not be made (exceptions are not sent as
    they are: ``InputError`` does not survive pickling)."""
    def tick(done: int, total: int) -> None:
        _ticks.put((i, done, total))

    if _stopping:
        return "stopped", None
    try:
        return "done", execute(task, llm=llm, backend=backend, on_tick=tick)
    except KeyboardInterrupt:
        return "stopped", None
    except InputError as exc:
        return "input", exc.problems
    except Exception as exc:  # noqa: BLE001 - every failure reaches the parent as a message
        text = str(exc) if isinstance(exc, RunError) else f"{type(exc).__name__}: {exc}"
        return "failed", f"the run of seed {task.seed} stopped: {text}"


def _in_processes(tasks: Sequence[RunTask], *, llm: BackendChoice | None, backend: Backend | str | None, jobs: int,
                  on_start: Callable[[int, int], None] | None, on_done: Callable[[int, int], None] | None,
                  on_tick: OnTick | None) -> list[Path]:
    """``run_tasks`` in a pool of ``jobs`` worker processes. The first run that fails or is stopped
    stops the others at their tick boundary; then the failure of the earliest task among those that
    failed is raised (a KeyboardInterrupt when none did)."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with a model's threads
    ticks = context.Queue()
    name = backend if isinstance(backend, str) else None
    progress: dict[int, tuple[int, int]] = {}
    outcomes: dict[int, tuple[str, Any]] = {}
    interrupted = False
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context, initializer=_init,
                               initargs=(ticks,))
    running: dict[Future[tuple[str, Any]], int] = {}
    try:
        for i, task in enumerate(tasks):
            if on_start is not None:
                on_start(i, task.seed)
            running[pool.submit(_work, i, task, llm, name)] = i
        while running and all(status == "done" for status, _ in outcomes.values()):
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            _drain(ticks, progress, on_tick)
            for future in done:
                i = running.pop(future)
                outcomes[i] = future.result()
                if outcomes[i][0] == "done" and on_done is not None:
                    on_done(i, tasks[i].seed)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if running:  # the others stop at their tick boundary, resumable, before anything is raised
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                if process.is_alive():
                    process.terminate()  # SIGTERM: ``_stop``, a KeyboardInterrupt inside the run
        pool.shutdown(wait=True, cancel_futures=True)
        for future, i in running.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                outcomes[i] = future.result()
        ticks.close()
    failed = sorted((i, outcome) for i, outcome in outcomes.items() if outcome[0] in ("input", "failed"))
    if failed:
        status, value = failed[0][1]
        raise InputError(value) if status == "input" else RunError(value)
    if interrupted or len(outcomes) < len(tasks) or any(status != "done" for status, _ in outcomes.values()):
        raise KeyboardInterrupt
    return [outcomes[i][1] for i in range(len(tasks))]


def _drain(ticks: Any, progress: dict[int, tuple[int, int]], on_tick: OnTick | None) -> None:
    """Read the workers' tick reports; ``on_tick`` with the ticks done and planned over all runs."""
    changed = False
    while True:
        try:
            i, done, total = ticks.get_nowait()
        except queue_module.Empty:
            break
        progress[i] = (done, total)
        changed = True
    if changed and on_tick is not None:
        on_tick(sum(d for d, _ in progress.values()), sum(t for _, t in progress.values()))
