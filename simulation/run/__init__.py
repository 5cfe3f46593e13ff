"""A run: opening it, stepping it to the end, and checking it afterwards.

``simulation`` (``Simulation``: from_yaml / from_settings / resume, step, run, summary, close;
the run loop), ``settings`` (``RunSettings``: the scenario, the command line's overrides, seed
and ticks, resolved once and passed down), ``runner`` (the run directory, its lock, the rows of
a new or resumed run, the backend and the model) and ``verify`` (`agora verify`: re-make a run
from its run.db and replay cache only, compare every row). ``from simulation import Simulation``
is the public way in; the CLI (``simulation.cli``) and ``bench/`` sit above this package.

The names are loaded on first use (a run brings the whole engine).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulation.run.settings import RunSettings
    from simulation.run.simulation import Simulation

__all__ = ["RunSettings", "Simulation"]


def __getattr__(name: str) -> Any:
    if name == "Simulation":
        from simulation.run.simulation import Simulation

        return Simulation
    if name == "RunSettings":
        from simulation.run.settings import RunSettings

        return RunSettings
    raise AttributeError(f"module 'simulation.run' has no attribute {name!r}")
