"""Memory: every agent's stream of nodes, embeddings, one FAISS index for the town, scored retrieval."""

from simulation.memory.stream import MemoryNode, MemoryStream, MemoryView
from simulation.memory.town import TownMemory

__all__ = ["MemoryNode", "MemoryStream", "MemoryView", "TownMemory"]
