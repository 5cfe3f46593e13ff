"""Run an experiment: every condition over the same seeds, each through the behaviour benchmark
(``simulation.benchmark.behaviour.run_benchmark``), then each condition's effects against the
control. Every condition's scenario is built and validated before the first run, so a bad one
costs nothing; a condition's runs live in ``out/<condition>/runs``, where the benchmark's rules
make the experiment resumable (a finished run is re-read, an interrupted one resumed) and refuse
runs made by another engine or another scenario text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from simulation.benchmark.behaviour import BenchmarkResult, fork_benchmark, metric_order, run_benchmark
from simulation.errors import InputError, Problem
from simulation.evaluation.ranking import Ranking
from simulation.experiment.effects import Effect, effect
from simulation.experiment.overrides import condition_scenario
from simulation.experiment.spec import Condition, ExperimentSpec
from simulation.run.fork import Intervention, Parent, forked_scenario, parse_interventions
from simulation.llm.backend import Backend
from simulation.llm.factory import BackendChoice
from simulation.scenario import LoadedScenario

__all__ = ["ExperimentResult", "run_experiment"]


@dataclass
class ExperimentResult:
    spec: ExperimentSpec
    scenario: Path
    results: dict[str, BenchmarkResult] = field(default_factory=dict)
    """Condition -> its runs and their metrics, seed by seed."""
    command: str = ""
    ranking: Ranking | None = None
    """The conditions ranked by believability (``spec.believability``), when asked for."""

    @property
    def control(self) -> str:
        return self.spec.control_name

    def metric_names(self) -> list[str]:
        names: dict[str, None] = {}
        for result in self.results.values():
            names.update(dict.fromkeys(result.metric_names()))
        return sorted(names, key=metric_order)

    def values(self, condition: str, metric: str) -> list[float | None]:
        """``metric`` of ``condition``, in the spec's seed order (None where a seed has no value)."""
        by_seed = {r.seed: r.metrics.get(metric) for r in self.results[condition].runs}
        return [by_seed.get(seed) for seed in self.spec.seeds]

    def effects(self, condition: str) -> list[Effect]:
        """Every metric's effect of ``condition`` against the control, seed by seed."""
        return [effect(m, self.values(self.control, m), self.values(condition, m)) for m in self.metric_names()]


def scenarios(spec: ExperimentSpec, scenario: Path, spec_path: Path) -> dict[str, LoadedScenario]:
    """Each condition's scenario, validated (InputError naming the experiment file and condition);
    a fork's interventions are checked against its parent condition's scenario before any run too
    (``check_fork``: people, places, facts, tick)."""
    return {c.name: condition_scenario(scenario, c.name, c.overrides, f"{spec_path}: conditions[{i}] ({c.name})")
            for i, c in enumerate(spec.conditions) if c.fork is None}


def interventions(condition: Condition, where: str, base: Path | None = None) -> list[Intervention]:
    """A fork condition's interventions, parsed (InputError naming the condition); ``base``: the
    experiment file's folder, which persona files of arrivals are taken from."""
    f = condition.fork
    assert f is not None
    try:
        return parse_interventions(whisper=f.whisper, event=f.event, set_=f.set, fact=f.fact, remove=f.remove,
                                   add=f.add, correct=f.correct, detail=f.detail, base=base)
    except InputError as exc:
        raise InputError(Problem(where, f"fork: {exc}")) from None


def check_fork(condition: Condition, base: LoadedScenario, changes: list[Intervention], ticks: int | None,
               where: str) -> None:
    """A fork condition checked before any run, against the scenario of the condition it forks
    (its runs will have run it for ``ticks``): the tick, and that every person, place and fact its
    interventions name is there then (InputError naming the condition)."""
    f = condition.fork
    assert f is not None
    planned = ticks or base.scenario.clock.total_ticks
    try:
        forked_scenario(Parent(Path(f"{f.of}'s runs"), "", base, 0, planned, planned, []), f.at, changes)
    except InputError as exc:
        raise InputError(Problem(where, f"fork: {exc}")) from None


def run_experiment(spec: ExperimentSpec, scenario: Path, spec_path: Path, out: Path, *,
                   llm: BackendChoice | None = None, backend: Backend | str | None = None, command: str = "",
                   on_run: Callable[[str, int, int], None] | None = None,
                   on_tick: Callable[[int, int], None] | None = None, judge: Backend | None = None,
                   jobs: int = 1, on_run_done: Callable[[str, int, int], None] | None = None) -> ExperimentResult:
    """Run every condition of ``spec`` over its seeds into ``out/<condition>``. ``on_run(condition,
    i, seed)`` before each run and ``on_run_done`` after it (i counts all the experiment's runs);
    ``on_tick(done, total)`` after each tick of it (of the runs in flight, summed, with ``jobs`` > 1:
    a condition's seeds that many at once, each in its own process). With ``spec.believability``, every run's people are then interviewed and
    the conditions ranked by the judge it names (``judge``: a backend object instead, for tests)."""
    loaded = scenarios(spec, scenario, spec_path)
    if spec.believability is not None and judge is None:
        from simulation.experiment.believability import judge_of

        judge_of(spec.believability, spec_path.parent)  # a missing judge model is found before any run, not after
    changes = {c.name: interventions(c, f"{spec_path}: conditions[{i}] ({c.name})", spec_path.parent)
               for i, c in enumerate(spec.conditions) if c.fork is not None}
    for i, c in enumerate(spec.conditions):
        if c.fork is not None:
            check_fork(c, loaded[c.fork.of], changes[c.name], spec.ticks, f"{spec_path}: conditions[{i}] ({c.name})")
    result = ExperimentResult(spec, scenario, command=command)
    order = [c for c in spec.conditions if c.fork is None] + [c for c in spec.conditions if c.fork is not None]
    for k, condition in enumerate(order):  # forks after the runs they branch
        seen = (lambda i, seed, name=condition.name, base=k * len(spec.seeds): on_run(name, base + i, seed)) \
            if on_run is not None else None
        ended = (lambda i, seed, name=condition.name, base=k * len(spec.seeds): on_run_done(name, base + i, seed)) \
            if on_run_done is not None else None
        if condition.fork is None:
            result.results[condition.name] = run_benchmark(
                loaded[condition.name], spec.seeds, out / condition.name, ticks=spec.ticks, llm=llm, backend=backend,
                command=command, on_seed=seen, on_tick=on_tick, jobs=jobs, on_seed_done=ended)
        else:
            own = backend if backend is not None and not isinstance(backend, str) else None
            result.results[condition.name] = fork_benchmark(
                result.results[condition.fork.of], out / condition.name, at=condition.fork.at,
                interventions=changes[condition.name], llm=llm, backend=own, command=command, on_seed=seen,
                on_tick=on_tick, jobs=jobs, on_seed_done=ended)
    if spec.believability is not None:
        from simulation.experiment.believability import interview_condition, rank_conditions

        own = backend if backend is not None and not isinstance(backend, str) else None
        interviewed = [interview_condition(c.name, [(r.seed, r.run_dir) for r in result.results[c.name].runs],
                                           out / c.name / "believability", llm=llm, backend=own)
                       for c in spec.conditions]
        result.ranking = rank_conditions(interviewed, spec.believability, out / "believability", spec_path.parent,
                                         command, judge=judge)
    return result
