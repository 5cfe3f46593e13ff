"""FactTracker: tags every memory a tick forms with the scenario's facts it carries.

At each commit the model hands it the tick's new memories. A memory whose provenance names a
fact (a whisper or place event with ``fact:``, a fact's seed) carries it by declaration; any
other is checked by ``ConveysDetector`` (the words said for a line, the text otherwise), all of
the tick's texts in one embedding call. Each carrying memory becomes a ``fact_memories`` row
with its source, who was behind it, and which details it kept, lost or changed. It also keeps
who is aware of what (``rules.AWARE_SOURCES``), which probe scoring needs; on resume that is
read back from run.db.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simulation.provenance.conveys import ConveysDetector, FactText
from simulation.provenance.details import CHANGED, KEPT, LOST, MIXED, DetailReader
from simulation.provenance.rules import AWARE_SOURCES

if TYPE_CHECKING:
    from simulation.memory.stream import MemoryNode
    from simulation.record.store import TickBuffer


class FactTracker:
    def __init__(self, facts: Sequence[FactText], detector: ConveysDetector, reader: DetailReader,
                 buffer: TickBuffer):
        self.facts = {f.id: f for f in facts}
        self.detector = detector
        self.reader = reader
        self.buffer = buffer
        self.aware: dict[str, set[str]] = {f.id: set() for f in facts}
        """fact id -> the people aware of it so far."""

    def correct(self, fact: FactText) -> None:
        """A fact's text (and details) corrected: the memories formed from now on are checked, and
        their details read, against the new version (earlier rows keep what they were scored by)."""
        self.facts[fact.id] = fact
        self.detector.replace(fact)

    def add_person(self, name: str) -> None:
        """Someone arrived: the detector knows their name as one of the town's people."""
        self.detector.add_person(name)

    def load(self, db: Any, run_id: str) -> None:
        """Who was aware of what at the last committed tick (resume)."""
        for fact_id, agent_id in db.execute(
                f"select fact_id, agent_id from fact_memories where run_id = ? and source in "
                f"({', '.join('?' for _ in AWARE_SOURCES)})", [run_id, *AWARE_SOURCES]).fetchall():
            self.aware.setdefault(fact_id, set()).add(agent_id)

    def observe(self, nodes: Sequence[MemoryNode]) -> None:
        """Tag ``nodes`` (the memories formed since the last call) and queue their rows."""
        todo = [n for n in nodes if n.provenance is not None]
        texts = [n.provenance.quote or n.text for n in todo]  # type: ignore[union-attr]
        found = self.detector.conveyed(texts)
        for node, text, detected in zip(todo, texts, found, strict=True):
            prov = node.provenance
            assert prov is not None
            carried = dict(detected)
            if prov.fact is not None and prov.fact in self.facts:
                carried = {prov.fact: None, **{k: v for k, v in carried.items() if k != prov.fact}}
            for fact_id, similarity in carried.items():
                self._row(node, text, fact_id, similarity, declared=similarity is None and fact_id == prov.fact)

    def _row(self, node: MemoryNode, text: str, fact_id: str, similarity: float | None, declared: bool) -> None:
        prov = node.provenance
        assert prov is not None
        details = self.reader.read_all(text, self.facts[fact_id].details, node.created.date())
        values = list(details.values())
        self.buffer.add("fact_memories", {
            "tick": node.tick, "sim_time": node.created.strftime("%Y-%m-%d %H:%M"), "memory_id": node.id,
            "agent_id": node.agent_id, "fact_id": fact_id, "source": str(prov.source), "from_agent": prov.from_agent,
            "utterance_id": prov.utterance_id, "conversation_id": prov.conversation_id, "declared": int(declared),
            "similarity": similarity, "details": json.dumps(details) if details else None,
            "kept": values.count(KEPT), "lost": values.count(LOST),
            "changed": values.count(CHANGED) + values.count(MIXED),  # a version adding a wrong value is distorted
        })
        if str(prov.source) in AWARE_SOURCES:
            self.aware.setdefault(fact_id, set()).add(node.agent_id)
