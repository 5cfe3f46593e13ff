"""The cognition phases a tick runs, and how a scenario names them.

``default_phases()`` is what a tick has always done, in this order: perceive (no LLM),
importance (the deciding people's unrated memories), decide (daily plan / reaction / the
hour's steps), converse (one line per open conversation), recap (both sides of every
conversation that ended), reflect (people past their importance threshold). A scenario's
``cognition.phases`` lists names from ``PHASES`` or ``package.module:Class`` paths of phases
of one's own; the Python API takes ``Phase`` objects (``Simulation.from_yaml(..., phases=...)``).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from simulation.cognition.converse import Converse, Recap
from simulation.cognition.decide import Decide
from simulation.cognition.importance import RateImportance
from simulation.cognition.perceive import Perceive
from simulation.cognition.phase import Phase
from simulation.cognition.reflect import Reflect
from simulation.errors import InputError, Problem

PHASES: dict[str, type[Phase]] = {p.name: p for p in (Perceive, RateImportance, Decide, Converse, Recap, Reflect)}
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


def scenario_phases(names: Sequence[str] | None, source: str = "") -> list[Phase]:
    """The phases a scenario's ``cognition.phases`` names (the default list when None); a name that
    is no phase is bad input naming the field."""
    if names is None:
        return default_phases()
    try:
        return phases_from_names(names)
    except ValueError as exc:
        raise InputError(Problem(source or "scenario", str(exc), field="cognition.phases")) from None
