"""The definitions awareness and probe scoring rest on, shared by the engine and the readers of
run.db (standard library only, so ``simulation.rundb`` and the viewer can import it).

Aware: a person is aware of a fact from their first memory that carries it and came from
outside them: told by the scenario (a seed, a whisper), seen (a place event, someone doing
something), heard from someone, or recapped from a conversation with someone. A fact in a
person's own plan, reflection or line, before they were aware, is *invented* by them (counted,
not awareness: nobody told them).
"""

from __future__ import annotations

AWARE_SOURCES = ("seeded", "whispered", "perceived", "heard", "recapped")
"""Memory sources through which a person learns a fact (``memories.source``)."""
TOLD_SOURCES = ("heard", "recapped")
"""Sources where someone else (``from_agent``) passed the fact on: the cascade's edges."""

# probe verdicts (``probes.verdict``)
RIGHT, PARTIAL, WRONG, MISSED = "right", "partial", "wrong", "missed"
"""For a person aware of the fact: every detail asked about kept; some kept, none changed; a
detail changed; nothing said of it (including "I don't know")."""
HONEST, INVENTED = "honest", "invented"
"""For a person not aware: says they do not know (or claims nothing); claims to know, or names a detail."""
VERDICTS = (RIGHT, PARTIAL, WRONG, MISSED, HONEST, INVENTED)
