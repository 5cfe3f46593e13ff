"""The town the people live in, apart from the people themselves (``simulation.agents``).

``town_map`` (``TownMap``: the places on a networkx graph, routes, layout, the Mesa Network
space), ``relationships`` (``SocialGraph``: who knows whom, stored per tick) and
``conversations`` (``Conversation``, one between two people, and ``Conversations``, the open
ones: starting, speaking in and ending one, and their rows). The tick (``simulation.tick``)
builds and steps them; cognition reaches them only through ``Mind``.
"""

from simulation.world.conversations import Conversation, Conversations
from simulation.world.relationships import SocialGraph, Tie
from simulation.world.town_map import TownMap

__all__ = ["Conversation", "Conversations", "SocialGraph", "Tie", "TownMap"]
