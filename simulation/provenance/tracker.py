"""FactTracker: tags every memory a tick forms with the scenario's facts it carries.

At each commit the model hands it the tick's new memories. A memory whose provenance names a
fact (a whisper or place event with ``fact:``, a fact's seed) carries it by declaration; any
other is checked by ``ConveysDetector`` (the words said for a line, the text otherwise), all of
the tick's texts in one embedding call. Each carrying memory becomes a ``fact_memories`` row
with its source, who was behind it, and which details it kept, lost or changed. It also keeps
who is aware of what (``rules.AWARE_SOURCES``), which probe scoring needs; on resume that is
read back from run.db.

A fact corrected during a run (a ``correction`` event) has versions: the scenario's, then each
correction's. The memories formed from a correction on are checked and read against the newest
(what is scored is the corrected truth), but each aware person *holds* the version they were told
(``held``), which is what they act on (their happenings: plans and invitations). Someone aware
before a correction keeps the old version until a memory of theirs carries the corrected one;
someone who learns of the fact after it takes the version of the memory they learn it from
(``_heard_version``). Which version each person holds follows from the ``fact_memories`` rows
and the corrections' ticks alone, so on resume it is replayed from run.db, as ``aware`` is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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
        self.versions: dict[str, list[tuple[int, FactText]]] = {f.id: [(0, f)] for f in facts}
        """fact id -> (the tick it holds from, the fact) for the scenario's version and each
        correction's, oldest first (the last is ``facts[id]``)."""
        self.held: dict[str, dict[str, int]] = {f.id: {} for f in facts}
        """fact id -> aware person -> the index in ``versions`` of the version they hold."""

    def correct(self, fact: FactText, tick: int) -> None:
        """A fact's text (and details) corrected at ``tick``: the memories formed from now on are
        checked, and their details read, against the new version (earlier rows keep what they were
        scored by); who holds which version changes only by what they are told (``_hold``)."""
        self.facts[fact.id] = fact
        self.versions.setdefault(fact.id, []).append((tick, fact))
        self.detector.replace(fact)

    def version_held(self, fact_id: str, person_id: str) -> FactText | None:
        """The version of fact ``fact_id`` that ``person_id`` holds (None: not aware of it)."""
        index = self.held.get(fact_id, {}).get(person_id)
        return None if index is None else self.versions[fact_id][index][1]

    def add_person(self, name: str) -> None:
        """Someone arrived: the detector knows their name as one of the town's people."""
        self.detector.add_person(name)

    def load(self, db: Any, run_id: str) -> None:
        """Who was aware of what, and held which version, at the last committed tick (resume: the
        corrections made so far are in ``versions`` already). The rows are replayed in the order
        they were written, as ``_row`` made them."""
        for tick, fact_id, agent_id, from_agent, declared, details in db.execute(
                f"select tick, fact_id, agent_id, from_agent, declared, details from fact_memories "
                f"where run_id = ? and source in ({', '.join('?' for _ in AWARE_SOURCES)}) order by id",
                [run_id, *AWARE_SOURCES]).fetchall():
            read = json.loads(details) if details else {}
            self._aware(fact_id, agent_id, tick, from_agent, bool(declared), read)

    def _current(self, fact_id: str, tick: int) -> int:
        """The index of the version of ``fact_id`` that holds at ``tick``."""
        return max(i for i, (since, _) in enumerate(self.versions[fact_id]) if since <= tick)

    def _aware(self, fact_id: str, person_id: str, tick: int, from_agent: str | None, declared: bool,
               details: Mapping[str, str]) -> None:
        """``person_id`` formed a memory at ``tick`` through which one learns fact ``fact_id``: they
        are aware of it, and hold the version ``_heard_version`` says."""
        self.aware.setdefault(fact_id, set()).add(person_id)
        if fact_id not in self.versions:
            return
        held = self.held.setdefault(fact_id, {})
        told_by = held.get(from_agent) if from_agent is not None else None
        held[person_id] = self._heard_version(fact_id, self._current(fact_id, tick), held.get(person_id), told_by,
                                              declared, details)

    def _heard_version(self, fact_id: str, current: int, had: int | None, told_by: int | None, declared: bool,
                       details: Mapping[str, str]) -> int:
        """The version a person holds after a memory carrying fact ``fact_id`` whose details read
        ``details`` against version ``current`` (the newest then). ``had``: the version they held
        before (None: they learn of it now); ``told_by``: the version held by whoever the memory
        came from (its ``from_agent``), if anyone.

        With no older version in play (they hold the newest, or learn it from no one who holds
        another), it is the newest. Otherwise the memory moves them to the newest only if it
        *carries* it: none of its details contradicts the newest (changed or mixed), and it names a
        detail in which the two versions differ or is the fact itself declared (a whisper or place
        event tagged with it). Else they hold the older version: what they had, or, learning of it
        now, the teller's (a contradicting memory from no one: the version before the newest)."""
        if had == current:
            return current
        contradicts = any(v in (CHANGED, MIXED) for v in details.values())
        older = had if had is not None else told_by
        if older is None:
            return max(current - 1, 0) if contradicts else current
        if older == current:
            return current
        versions = self.versions[fact_id]
        was = {d.name: (d.kind, d.value) for d in versions[older][1].details}
        now = {d.name: (d.kind, d.value) for d in versions[current][1].details}
        differs = {name for name in was.keys() | now.keys() if was.get(name) != now.get(name)}
        carries = not contradicts and (declared or any(details.get(name) == KEPT for name in differs))
        return current if carries else older

    def observe(self, nodes: Sequence[MemoryNode]) -> None:
        """Tag ``nodes`` (the memories formed since the last call) and queue their rows. A director's
        thought (source ``directed``) is the engine's words, not something the person learnt: skipped."""
        todo = [n for n in nodes if n.provenance is not None and n.provenance.source != "directed"]
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
            self._aware(fact_id, node.agent_id, node.tick, prov.from_agent, declared, details)
