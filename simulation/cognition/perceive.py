"""Perception without the LLM: who and what is at an agent's place, up to its attention bandwidth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.agent import IDLE, SLEEPING, WAKING, WALKING, Perception

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent
    from simulation.model import ActivePlaceEvent

NEWS_AFTER_MINUTES = 60
"""Seeing the same person again only counts as news after this many game minutes apart."""
TRIVIAL = 1.0
"""Importance of seeing someone idle: rated without asking the LLM."""


def perceive(agent: PersonaAgent, here: list[PersonaAgent], events: list[ActivePlaceEvent], tick: int) -> Perception:
    """Record new observations as memories; return the people and place events worth reacting to."""
    seen = Perception()
    if agent.status in (SLEEPING, WALKING):
        return seen
    budget = agent.model.scenario.cognition.attention_bandwidth
    for ev in events:
        key = f"event:{ev.id}"
        if key not in agent.last_seen and budget > 0:
            agent.last_seen[key] = tick
            agent.remember("observation", f"At {agent.model.town.name(ev.place)}: {ev.text}")
            seen.events.append(ev)
            budget -= 1
    for other in here:
        if budget <= 0:
            break
        if other is agent or other.status in (SLEEPING, WALKING):
            continue
        last = agent.last_seen.get(other.agent_id)
        agent.last_seen[other.agent_id] = tick
        if last is not None and (tick - last) * agent.model.clock.tick_minutes < NEWS_AFTER_MINUTES:
            continue
        idle = other.status in (IDLE, WAKING) and other.action is None
        agent.remember("observation", f"{other.persona.name} is {other.doing()} at {agent.model.town.name(agent.place)}",
                       importance=TRIVIAL if idle else None)
        seen.people.append(other.agent_id)
        budget -= 1
    return seen
