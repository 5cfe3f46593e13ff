"""The engine's leaf types: what an agent does, plans, perceives and is, and the names that key
seeds, the replay cache and reward queries. Nothing here imports any other part of the engine,
so every layer (cognition, the model, the store, checkpoints, the viewer's queries) may use them.
"""

from simulation.core.actions import Action, HourBlock, PlanItem, as_doing, doing_at
from simulation.core.happening import Happening
from simulation.core.moment import Moment
from simulation.core.move import Move
from simulation.core.perception import Focus, Perception, PlaceEvent
from simulation.core.provenance import Provenance
from simulation.core.vocabulary import Aim, EventKind, MemoryKind, Purpose, Source, Status, probe_purpose

__all__ = [
    "Action", "Aim", "EventKind", "Focus", "Happening", "HourBlock", "MemoryKind", "Moment", "Move", "Perception", "PlaceEvent",
    "PlanItem", "Provenance", "Purpose", "Source", "Status",
    "as_doing", "doing_at", "probe_purpose",
]
