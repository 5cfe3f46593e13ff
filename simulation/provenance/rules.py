"""The definitions awareness and probe scoring rest on, shared by the engine and the readers of
run.db (standard library only, so ``simulation.rundb`` and the viewer can import it).

Aware: a person is aware of a fact from their first memory that carries it and came from
outside them: told by the scenario (a seed, a whisper), seen (a place event, someone doing
something), or heard from someone (a line said to them). A fact in a person's own plan,
reflection, line or recap, before they were aware, is *invented* by them (counted, not
awareness: nobody told them).

Why a recap does not make anyone aware: a ``recapped`` memory is the listener's own summary of
a conversation, written by the model after it ended. The partner's lines are already tracked
one by one as the listener's ``heard`` memories (``conversations.say``). A recap conveys a fact
only when the partner's lines did, and then the listener is aware from hearing them (their
``heard`` memory, with the utterance that told them, is the cascade's edge); a recap that
carries a fact the lines never did is the person's own invention, counted in ``invented``.
"""

from __future__ import annotations

import json
from typing import Any

AWARE_SOURCES = ("seeded", "whispered", "perceived", "heard")
"""Memory sources through which a person learns a fact (``memories.source``). Not ``recapped``:
see the module's docstring."""
TOLD_SOURCES = ("heard",)
"""Sources where someone else (``from_agent``) passed the fact on: the cascade's edges."""

# probe verdicts (``probes.verdict``), by ``probes.score_answer``
RIGHT, PARTIAL, MIXED, WRONG, MISSED = "right", "partial", "mixed", "wrong", "missed"
"""For a person aware of the fact, on the details the question does not give away: every one
kept (only right values named); some kept, the rest not said; the right value of a detail named
beside another of its kind ("at Hobbs Cafe or the Rose and Crown"), none changed; a detail
changed (only another value named); nothing said of them (including "I don't know")."""
HONEST, INVENTED = "honest", "invented"
"""For a person not aware: claims nothing (says they do not know, or talks of something else);
names a detail (kept, mixed or changed, even after "I don't know" or "maybe") or claims to know
without saying anywhere that they do not."""
FAILED = "failed"
"""The model gave no usable answer (``probes.ok`` = 0), aware or not: neither honest nor missed,
left out of every verdict share and counted apart."""
AWARE_VERDICTS = (RIGHT, PARTIAL, MIXED, WRONG, MISSED)
"""The verdicts of people aware of the fact: the denominator of the right and wrong shares."""
UNAWARE_VERDICTS = (HONEST, INVENTED)
"""The verdicts of people not aware: the denominator of the hallucination rate."""
VERDICTS = (*AWARE_VERDICTS, *UNAWARE_VERDICTS, FAILED)


def corrections(con: Any, run_id: str) -> dict[str, tuple[int, str, list[dict[str, Any]]]]:
    """fact id -> (tick, text, details) of its last correction in a run.db (``events`` of kind
    ``correction``: a scheduled event, or a fork's ``--correct``). The fact's text and details are
    those from that tick on, so what later memories were read against and probes scored by; a
    reader of run.db that shows a fact, and re-scoring, take them from here."""
    if con.execute("select 1 from sqlite_master where type = 'table' and name = 'events'").fetchone() is None:
        return {}
    out: dict[str, tuple[int, str, list[dict[str, Any]]]] = {}
    for tick, text, data in con.execute("select tick, text, data from events where run_id = ? and kind = 'correction' "
                                        "order by id", [run_id]):
        try:
            said = json.loads(data or "{}")
        except ValueError:
            continue
        if isinstance(said, dict) and said.get("fact"):
            out[str(said["fact"])] = (int(tick), str(text or ""), list(said.get("details") or []))
    return out
