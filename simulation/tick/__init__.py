"""One tick of the town: the model that steps it and the mind its phases work through.

``model`` (``TownModel``, a ``mesa.Model``: scheduled events, routine, the scenario's cognition
phases, act, commit), ``town_mind`` (``TownMind``: the ``Mind`` a run's phases get, forwarding
to the world, memory, the LLM and the recorder) and ``checkpoint`` (``ModelState``: the
engine's state between ticks, for resume). Nothing below this package imports it.

The names are loaded on first use (the model brings Mesa, the memory index and the LLM client).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulation.tick.checkpoint import ModelState
    from simulation.tick.model import TownModel
    from simulation.tick.town_mind import TownMind

__all__ = ["ModelState", "TownMind", "TownModel"]


def __getattr__(name: str) -> Any:
    if name == "TownModel":
        from simulation.tick.model import TownModel

        return TownModel
    if name == "TownMind":
        from simulation.tick.town_mind import TownMind

        return TownMind
    if name == "ModelState":
        from simulation.tick.checkpoint import ModelState

        return ModelState
    raise AttributeError(f"module 'simulation.tick' has no attribute {name!r}")
