"""The people of the town: each one's state (``AgentState``, what cognition reads and writes and the
checkpoint stores) and the Mesa agent that moves it between places (``PersonaAgent``)."""

from simulation.agents.persona_agent import PersonaAgent
from simulation.agents.state import AgentState, Seeking, is_awake

__all__ = ["AgentState", "PersonaAgent", "Seeking", "is_awake"]
