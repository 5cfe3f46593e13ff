"""The cognition phases a tick runs, and how a scenario names them.

``default_phases()`` is what a tick has always done, in this order: perceive (no LLM),
importance (the deciding people's unrated memories), decide (daily plan / reaction / the
hour's steps), converse (one line per open conversation), recap (both sides of every
conversation that ended), reflect (people past their importance threshold). A scenario's
``cognition.phases`` lists names from ``PHASES`` or ``package.module:Class`` paths of phases
of one's own; the Python API takes ``Phase`` objects (``Simulation.from_yaml(..., phases=...)``).

A scenario whose ``story.director`` is on also runs the director (``cognition.director``), first
in the tick, and one whose ``cognition.moods`` is on runs the moods (``cognition.mood``) after the
recap, unless its list already names them.

Whatever the list, its order is checked before a tick runs (``order_problems``): a phase that
reads a note of the tick (``Phase.reads``) that no earlier phase writes is bad input, located at
its entry of ``cognition.phases`` and naming what it lacks and which phase writes it (listing
``decide`` before ``perceive`` used to run a town where nobody ever decided anything).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from simulation.cognition.converse import Converse, Recap
from simulation.cognition.decide import Decide
from simulation.cognition.director import Director
from simulation.cognition.importance import RateImportance
from simulation.cognition.mood import Moods
from simulation.cognition.perceive import Perceive
from simulation.cognition.phase import Phase
from simulation.cognition.reflect import Reflect
from simulation.errors import InputError, Problem

if TYPE_CHECKING:
    from simulation.scenario import LoadedScenario

PHASES: dict[str, type[Phase]] = {p.name: p for p in (Director, Perceive, RateImportance, Decide, Converse, Recap,
                                                      Moods, Reflect)}
DEFAULT = ("perceive", "importance", "decide", "converse", "recap", "reflect")


def default_phases() -> list[Phase]:
    return [PHASES[name]() for name in DEFAULT]


def phase_class(spec: str) -> type[Phase]:
    """The phase a scenario names: a built-in name, or ``package.module:Class``. Raises ValueError
    with what is wrong (the scenario loader turns it into a problem naming the field)."""
    if spec in PHASES:
        return PHASES[spec]
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"unknown phase {spec!r}: expected one of {', '.join(PHASES)} or package.module:Class")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import phase {spec!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Phase)):
        raise ValueError(f"{spec!r} is not a Phase subclass")
    return cls


def phases_from_names(names: Sequence[str]) -> list[Phase]:
    return [phase_class(name)() for name in names]


def order_problems(phases: Sequence[Phase]) -> list[tuple[int, str]]:
    """(index, what is wrong) for every phase that reads a note of the tick no earlier phase
    writes: a note a later phase writes means a wrong order; a required note (``reads``) that
    no phase writes means a missing phase."""
    problems = []
    written: set[str] = set()
    for i, phase in enumerate(phases):
        for note in sorted((phase.reads | phase.reads_if_any) - written):
            later = [p.name for p in phases[i + 1:] if note in p.writes]
            if later:
                problems.append((i, f"phase {phase.name!r} reads notes.{note}, which only {later[0]!r} writes, "
                                    f"later in the list: put {later[0]!r} before {phase.name!r}"))
            elif note in phase.reads:
                writers = [name for name, cls in PHASES.items() if note in cls.writes]
                hint = f" ({writers[0]!r} does)" if writers else ""
                problems.append((i, f"phase {phase.name!r} needs notes.{note}, which no phase before it "
                                    f"writes{hint}"))
        written |= phase.writes
    return problems


def scenario_phases(names: Sequence[str] | None, loaded: LoadedScenario | None = None) -> list[Phase]:
    """The phases a scenario's ``cognition.phases`` names (the default list when None), in an order
    that works (``order_problems``); a name that is no phase, or a wrong order, is bad input located
    in the scenario file (``loaded``, when given)."""
    directed = loaded is not None and loaded.scenario.story.director
    moody = loaded is not None and loaded.scenario.cognition.moods
    if names is None:
        return _with_story(default_phases(), directed, moody)

    def problem(index: int | None, message: str) -> Problem:
        where = ("cognition", "phases") + (() if index is None else (index,))
        if loaded is not None:
            from simulation.scenario import problem_at

            return problem_at(loaded, where, message)
        return Problem("scenario", message, field="cognition.phases" + ("" if index is None else f"[{index}]"))

    phases = []
    for i, name in enumerate(names):
        try:
            phases.append(phase_class(name)())
        except ValueError as exc:
            raise InputError(problem(i, str(exc))) from None
    found = order_problems(phases)
    if found:
        raise InputError([problem(i, message) for i, message in found])
    return _with_story(phases, directed, moody)


def _with_story(phases: list[Phase], directed: bool, moody: bool) -> list[Phase]:
    """``phases`` with the director first (``story.director``) and the moods after the recap
    (``cognition.moods``, before reflection: what a person feels is part of what they reflect on),
    unless the list names them already."""
    if directed and not any(isinstance(p, Director) for p in phases):
        phases.insert(0, Director())
    if moody and not any(isinstance(p, Moods) for p in phases):
        at = next((i + 1 for i, p in enumerate(phases) if isinstance(p, Recap)), len(phases))
        phases.insert(at, Moods())
    return phases


def checked(phases: Sequence[Phase]) -> list[Phase]:
    """Phase objects handed over from Python (``Simulation(..., phases=...)``), checked like a
    scenario's list (``InputError`` naming the phase and what it lacks)."""
    found = order_problems(phases)
    if found:
        raise InputError([Problem("phases", message, field=f"phases[{i}]") for i, message in found])
    return list(phases)
