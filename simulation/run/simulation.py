"""Simulation: the one way to run a town, from Python, the CLI, the benchmarks and the tests.

One facade with few verbs, as vLLM's ``LLM``: build it from a scenario file (or resume a run
directory), ``step()`` a tick or ``run()`` the rest, read the results from ``db`` or
``summary()``. Used as a context manager it owns everything a run holds: the run directory's
lock, the run's recorded status (``finished``, or ``interrupted`` / ``failed`` with the reason,
so ``agora resume`` can go on), the end-of-run probe questions, the model's event loop and the
LLM backend it built. The run loop exists here only; ``agora run`` and ``agora resume`` are
this class plus a progress bar.

    from simulation import Simulation

    with Simulation.from_yaml("scenarios/valentines.yaml", seed=7, ticks=12) as sim:
        sim.run(on_tick=lambda s: print(s.tick, s.now))
        print(sim.summary().facts)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from simulation.errors import RunError
from simulation.llm.backend import Backend
from simulation.llm.factory import BackendChoice
from simulation.llm.groups import RunBackends, build_run_backends
from simulation.llm.types import RawCompletion
from simulation.run.runner import Run, create_run, finish, resume_run
from simulation.run.settings import RunSettings
from simulation.scenario import LoadedScenario, load

if TYPE_CHECKING:
    import sqlite_utils

    from simulation.run.fork import Intervention

    from simulation.cognition import Phase
    from simulation.rundb.summary import RunSummary
    from simulation.tick.model import TownModel

OnTick = Callable[["Simulation"], None]


class Simulation:
    """A run of a scenario, created by ``from_yaml`` / ``from_scenario`` or reopened by ``resume``."""

    def __init__(self, run: Run, backends: RunBackends):
        """``backends``: the run's backends (``simulation.llm.groups``); those it built, it closes."""
        self._run = run
        self._backends = backends
        self._closed = False
        self.status = "running"
        """running, then finished / interrupted / failed once closed (as recorded in run.db)."""

    # ------------------------------------------------------------------ making one

    @classmethod
    def from_yaml(cls, path: str | Path, *, seed: int | None = None, backend: str | Backend | None = None,
                  out: str | Path = "runs", ticks: int | None = None, llm: BackendChoice | None = None,
                  phases: Sequence[Phase] | None = None,
                  on_llm: Callable[[RawCompletion], None] | None = None,
                  groups: Mapping[str, Backend] | None = None) -> Simulation:
        """A new run of the scenario file ``path`` in a new directory under ``out``.

        ``backend`` is a backend's registry name (``llamacpp``, ``vllm``, ``openai``; the
        scenario's ``llm:`` block otherwise) or a backend object you built; ``llm`` overrides
        more of the scenario's LLM settings, as the command line does. Both are the ``llm:``
        block's own, which answers everyone who names no model group; ``groups`` are backend
        objects for model groups (``llm.groups``) by name, and a group someone names that is not
        among them is built from its settings (docs/llm.md, "A model per person"). ``ticks`` is
        how many the run is planned for (default: the scenario's whole duration), ``phases``
        replaces the cognition phases, ``on_llm`` sees every completed LLM call (progress bars)."""
        return cls.from_scenario(load(path), seed=seed, backend=backend, out=out, ticks=ticks, llm=llm,
                                 phases=phases, on_llm=on_llm, groups=groups)

    @classmethod
    def from_scenario(cls, loaded: LoadedScenario, *, seed: int | None = None, backend: str | Backend | None = None,
                      out: str | Path = "runs", ticks: int | None = None, llm: BackendChoice | None = None,
                      phases: Sequence[Phase] | None = None,
                      on_llm: Callable[[RawCompletion], None] | None = None,
                      groups: Mapping[str, Backend] | None = None) -> Simulation:
        """As ``from_yaml``, from a scenario already loaded (``simulation.scenario.load``)."""
        choice = llm or BackendChoice()
        if isinstance(backend, str):
            choice = replace(choice, backend=backend)
        settings = RunSettings.resolve(loaded, llm=choice, seed=seed, ticks=ticks, out=out)
        return cls.from_settings(settings, backend=None if isinstance(backend, str) else backend, phases=phases,
                                 on_llm=on_llm, groups=groups)

    @classmethod
    def from_settings(cls, settings: RunSettings, *, backend: Backend | None = None,
                      phases: Sequence[Phase] | None = None,
                      on_llm: Callable[[RawCompletion], None] | None = None,
                      groups: Mapping[str, Backend] | None = None) -> Simulation:
        """A new run from settings already resolved (``RunSettings.resolve``); ``backend``: one you
        built for the ``llm:`` block's own, ``groups``: for model groups (default: the ones
        ``settings.llm`` describes, which the run then owns and closes)."""
        from simulation.cognition.phases import checked, scenario_phases

        # before anything is created: a wrong phase name or order leaves no run behind
        phases = (scenario_phases(settings.loaded.scenario.cognition.phases, settings.loaded) if phases is None
                  else checked(phases))
        backends = build_run_backends(settings.llm, settings.base_dir, settings.loaded.llm_groups().values(),
                                      default=backend, groups=groups)
        try:
            run = create_run(settings, backends, on_llm=on_llm, phases=phases)
        except BaseException:
            backends.close()
            raise
        return cls(run, backends)

    @classmethod
    def resume(cls, run_dir: str | Path, *, ticks: int | None = None, llm: BackendChoice | None = None,
               backend: Backend | None = None, phases: Sequence[Phase] | None = None,
               on_llm: Callable[[RawCompletion], None] | None = None,
               groups: Mapping[str, Backend] | None = None) -> Simulation:
        """Reopen a run directory at the end of its last committed tick. ``ticks``: how many more
        (default: up to the planned number); ``llm`` overrides the LLM settings the run was started
        with (e.g. a server's new address); ``backend`` replaces the ``llm:`` block's backend
        altogether, ``groups`` model groups' (by name)."""
        if phases is not None:
            from simulation.cognition.phases import checked

            phases = checked(phases)
        run, built = resume_run(Path(run_dir), ticks=ticks, llm=llm, on_llm=on_llm, backend=backend, phases=phases,
                                groups=groups)
        return cls(run, built)

    @classmethod
    def fork(cls, run_dir: str | Path, *, at: int, out: str | Path = "runs", interventions: Sequence[Intervention] = (),
             ticks: int | None = None, llm: BackendChoice | None = None, backend: Backend | None = None,
             on_tick: OnTick | None = None, on_llm: Callable[[RawCompletion], None] | None = None,
             groups: Mapping[str, Backend] | None = None) -> Simulation:
        """A new run in ``out`` that is ``run_dir``'s, bit for bit, up to tick ``at`` (replayed from
        the replay cache), then gets ``interventions`` (``simulation.run.fork``). It is returned
        open at tick ``at``; ``run()`` takes it on: ``ticks`` more (default: to the parent's end).
        ``on_tick`` sees each replayed tick, ``on_llm`` every LLM call; ``backend`` and ``groups`` as
        ``from_yaml``'s."""
        from simulation.run.fork import fork_settings, replay

        parent, settings = fork_settings(run_dir, at=at, out=out, interventions=interventions, ticks=ticks, llm=llm)
        sim = cls.from_settings(settings, backend=backend, on_llm=on_llm, groups=groups)
        replay(sim, parent, at, interventions, on_tick)
        return sim

    def record_lineage(self, **fields: str | int | None) -> None:
        """Record in run.db what this run was forked from (``runs.parent_run_id``, ``parent_dir``,
        ``fork_tick``, ``interventions``)."""
        self._run.store.update_run(**fields)

    # ------------------------------------------------------------------ what it is

    @property
    def model(self) -> TownModel:
        return self._run.model

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def run_dir(self) -> Path:
        return self._run.run_dir

    @property
    def db(self) -> sqlite_utils.Database:
        """The run's run.db (committed ticks only; see docs/run-db.md)."""
        return self._run.store.db

    @property
    def store(self) -> Any:
        return self._run.store

    @property
    def tick(self) -> int:
        """The next tick to step (ticks done so far)."""
        return self.model.tick

    @property
    def now(self) -> datetime:
        """Game time of the next tick."""
        return self.model.now

    @property
    def ticks(self) -> int:
        """Ticks this process was asked to step (for a resumed run: the ones left then)."""
        return self._run.ticks

    @property
    def ticks_left(self) -> int:
        return max(0, self._run.first_tick + self._run.ticks - self.model.tick)

    # ------------------------------------------------------------------ verbs

    def step(self) -> None:
        """One tick: everything it produced is committed to run.db when it returns."""
        self._check_open()
        self.model.step()

    def run(self, ticks: int | None = None, on_tick: OnTick | None = None,
            on_probes: Callable[[], None] | None = None) -> RunSummary:
        """Step ``ticks`` ticks (default: all that are left), then, once every planned tick is done,
        ask the scenario's probe questions and record the run as finished. Returns the summary."""
        self._check_open()
        for _ in range(self.ticks_left if ticks is None else ticks):
            self.model.step()
            if on_tick is not None:
                on_tick(self)
        if self.ticks_left == 0 and self.status == "running":
            if self.model.scenario.probes and self._run.probes_due:
                if on_probes is not None:
                    on_probes()
                self.model.ask_probes()
                self._run.probes_due = False
            self.store.replace_behaviour(self.behaviour())
            self.close()
        return self.summary()

    def behaviour(self) -> dict[str, float | None]:
        """The behaviour metrics of what has run so far (docs/behaviour.md); a finished run also
        keeps them in run.db's ``behaviour`` table."""
        from simulation.rundb.behaviour import behaviour

        return behaviour(self.db, self.run_id)

    def summary(self) -> RunSummary:
        """What happened so far, from run.db alone (what ``agora run`` prints)."""
        from simulation.rundb.summary import summarize

        return summarize(self.run_dir / "run.db")

    def saved(self) -> str:
        """What a stopped run kept, and the command that continues it."""
        done = self.model.tick
        where = self.run_dir / "run.db"
        kept = f"ticks 0-{done - 1} are saved in {where}" if done else f"no tick was completed ({where})"
        return f"{kept}\ncontinue with: agora resume {self.run_dir}"

    def close(self, status: str | None = None, message: str | None = None) -> None:
        """Record how the run ended, release its lock, close the model's loop and the backend it built.
        Without a ``status``: finished if every planned tick is done, else interrupted (resumable)."""
        if self._closed:
            return
        self._closed = True
        if status is None:
            probes_left = bool(self.model.scenario.probes) and self._run.probes_due
            status = "finished" if self.ticks_left == 0 and not probes_left else "interrupted"
            if status == "interrupted":
                message = message or f"closed after {self.model.tick} tick(s)"
        self.status = status
        try:
            finish(self._run, status, message)
        finally:
            try:
                self.model.close()
            finally:
                self._backends.close()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._closed:
            return
        if exc is None:
            self.close()
        elif isinstance(exc, KeyboardInterrupt):
            self.close("interrupted", f"stopped by the user after {self.model.tick} tick(s)")
        elif isinstance(exc, RunError):
            self.close("failed", str(exc))
        else:
            self.close("failed", f"internal error: {type(exc).__name__}: {exc}")

    def _check_open(self) -> None:
        if self._closed:
            raise RunError(f"{self.run_dir} is closed ({self.status}); reopen it with Simulation.resume")
