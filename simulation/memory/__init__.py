"""An agent's memory stream: everything it observed, heard, said, planned and was told."""

from simulation.memory.stream import MemoryNode, MemoryStream

__all__ = ["MemoryNode", "MemoryStream"]
