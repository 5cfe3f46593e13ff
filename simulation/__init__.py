"""Agora: a multi-agent social simulation engine (import package ``simulation``).

    from simulation import Simulation

    with Simulation.from_yaml("scenarios/valentines.yaml", seed=7) as sim:
        sim.run(ticks=12)

``Simulation`` is imported on first use, so ``import simulation.rundb`` (the engine-free run.db
reader the viewer uses) does not load the engine.
"""

from typing import TYPE_CHECKING, Any

from simulation.version import __version__

if TYPE_CHECKING:
    from simulation.run.simulation import Simulation

__all__ = ["Simulation", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Simulation":
        from simulation.run.simulation import Simulation

        return Simulation
    raise AttributeError(f"module 'simulation' has no attribute {name!r}")
