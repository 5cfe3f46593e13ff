"""Every agent's memory stream, one vector index for the town, and batched retrieval.

Agents ``await retrieve(...)`` as ordinary sequential code. Like the LLM client, this
parks the request in a ``Batcher`` (simulation/llm/batching.py); once the event loop has nothing
else to run, the whole phase's queries go through at once: the phase's new memories and its
queries are embedded in one model call, the index is searched in one FAISS call, and all
candidates are scored together with numpy. Retrieved memories get their last-access time set
to now. Retrieval batches go before LLM batches (a lower priority number), so an agent that
retrieves before it asks still lands in the same LLM batch as one that asks straight away.

Every retrieval is logged (``retrievals``), every node and its vector go to run.db
(``memories``, ``embeddings``), and ``from_db`` rebuilds the whole thing from run.db.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from simulation.core.provenance import Provenance
from simulation.core.vocabulary import MemoryKind, Purpose, Source
from simulation.llm.batching import Batcher
from simulation.memory.embeddings import Embedder, get_embedder
from simulation.memory.index import MemoryIndex, Ranking
from simulation.memory.scoring import Weights
from simulation.memory.sentences import sentences
from simulation.memory.stream import MemoryNode, MemoryStream, StreamState

if TYPE_CHECKING:
    import sqlite_utils

    from simulation.record.store import TickBuffer
    from simulation.scenario import MemorySettings

PRIORITY = 0
"""Batcher priority: retrievals go before LLM questions (the LLM client's is 1)."""
SENTENCE_CANDIDATES = 4
"""Recognition by sentence reads, of a person's memories, this many times ``memory.top_k`` of those
most like the question whole (a sentence that names the news rarely sits in a memory ranked lower)."""


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def _parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M")


def _provenance(row: dict, fact: str | None = None, quote: str | None = None) -> Provenance | None:
    """A memory row's provenance; ``fact`` and ``quote`` are held by other tables (the memory's
    declared ``fact_memories`` row, its line's ``utterances.text``)."""
    if not row.get("source"):
        return None
    return Provenance(Source(row["source"]), row.get("from_agent"), row.get("utterance_id"), row.get("event_id"),
                      row.get("conversation_id"), fact=fact, quote=quote)


_RECAP = re.compile(r"^Talked with .+? at .+?: (.*)$", re.S)
"""A recap memory's text (``converse._keep_recap``): its quote is the summary after the prefix."""
_SEEN = re.compile(r"^At .+?: (.*)$", re.S)
"""A place event seen (``perceive``): its quote is the event's text after the place."""


def _quote(row: dict, lines: dict[int, str]) -> str | None:
    """The words a memory's provenance quotes: a line's (said or heard), a recap's summary."""
    if row.get("source") in ("said", "heard"):
        return lines.get(row.get("utterance_id"))  # type: ignore[arg-type]
    if row.get("source") == "recapped":
        match = _RECAP.match(row["text"])
        return match.group(1) if match else None
    if row.get("source") == "perceived" and row.get("event_id") is not None:
        match = _SEEN.match(row["text"])
        return match.group(1) if match else None
    return None


def clamp_importance(value: float) -> float:
    return float(min(10.0, max(1.0, value)))


@dataclass
class _Request:
    agent_id: str
    queries: list[str]
    purpose: str
    k: int
    exclude: frozenset[int]


def stored_precision(vectors: np.ndarray) -> np.ndarray:
    """Memory vectors as run.db keeps them (float16, back in float32): the live index holds exactly
    what a resumed run rebuilds, at half the bytes of float32 (a 1,000-person town wrote 33 MB of
    vectors in a game hour). Rounding moves a cosine similarity by about 1e-3 at most."""
    return np.asarray(vectors, dtype=np.float32).astype(np.float16).astype(np.float32)


def stored_vector(blob: bytes, dim: int) -> np.ndarray:
    """A vector of ``dim`` numbers from an ``embeddings`` row: float16 since run.db schema 8, float32 before."""
    dtype = np.float16 if len(blob) == dim * 2 else np.float32
    return np.frombuffer(blob, dtype=dtype).astype(np.float32)


@dataclass
class RetrievalStats:
    queries: int = 0
    batches: int = 0
    seconds: float = 0.0


@dataclass
class TownMemory:
    settings: MemorySettings
    epoch: datetime
    """Game time that hours are counted from (the run's start)."""
    embedder: Embedder | None = None
    buffer: TickBuffer | None = None
    """Where new rows go (None when rebuilt for reading)."""
    streams: dict[str, MemoryStream] = field(default_factory=dict)
    nodes: dict[int, MemoryNode] = field(default_factory=dict)
    index: MemoryIndex | None = None
    tick: int = 0
    now: datetime | None = None
    stats: RetrievalStats = field(default_factory=RetrievalStats)

    def __post_init__(self) -> None:
        if self.embedder is None:
            self.embedder = get_embedder(self.settings.embedding_model)
        if self.now is None:
            self.now = self.epoch
        self.weights = Weights(**self.settings.retrieval_weights.model_dump())
        self.probe_weights = Weights(**self.settings.probe_weights.model_dump())
        """What a probe question's memories are ranked by (``memory.probe_weights``)."""
        self._row_nodes: list[MemoryNode] = []
        self._seed_rows: list[int] = []
        """Index rows of everyone's seeded memories (``backstory_similarity``), kept as they are indexed."""
        self._unembedded: list[MemoryNode] = []
        self._dirty: dict[int, MemoryNode] = {}
        self._batcher: Batcher[_Request, list[list[MemoryNode]]] = Batcher(
            "memory retrieval", self._send, priority=PRIORITY)
        self._next_id = 1
        self._new: list[MemoryNode] = []
        self._stored_texts: set[str] = set()
        """Texts whose vector run.db holds already (under the first memory that had them)."""

    # ------------------------------------------------------------------ time

    def set_time(self, tick: int, now: datetime) -> None:
        self.tick, self.now = tick, now

    def hours(self, moment: datetime) -> float:
        return (moment - self.epoch).total_seconds() / 3600.0

    # ------------------------------------------------------------------ nodes

    def stream(self, agent_id: str) -> MemoryStream:
        return self.streams.setdefault(agent_id, MemoryStream())

    def add(self, agent_id: str, kind: str, text: str, provenance: Provenance | None = None, *,
            importance: float | None = None, evidence: Iterable[int] = (), depth: int = 0) -> MemoryNode:
        """A new node, now; its run.db row is queued. ``importance`` None: rated later by the LLM.
        Every memory the engine forms says where it came from (``provenance``); None is for memories
        made outside a run (tests of retrieval), which then carry no fact."""
        assert self.now is not None
        imp = None if importance is None else clamp_importance(importance)
        evidence = tuple(evidence)
        row = {"tick": self.tick, "sim_time": _iso(self.now), "agent_id": agent_id, "kind": kind, "text": text,
               "importance": imp, "evidence": json.dumps(list(evidence)) if evidence else None,
               "last_accessed": _iso(self.now), "depth": depth, **(provenance.columns() if provenance else {})}
        node_id = self.buffer.add("memories", row) if self.buffer is not None else None
        node = self._add_node(MemoryNode(
            id=node_id if node_id is not None else self._next_id, agent_id=agent_id, kind=kind, text=text,
            tick=self.tick, created=self.now, last_accessed=self.now, importance=imp, evidence=evidence, depth=depth,
            provenance=provenance,
        ))
        self._new.append(node)
        return node

    def stream_states(self) -> dict[str, StreamState]:
        """Each agent's reflection counters (``MemoryStream.state``), for the checkpoint."""
        return {agent_id: stream.state() for agent_id, stream in sorted(self.streams.items())}

    def restore_streams(self, states: dict[str, StreamState]) -> None:
        for agent_id, state in states.items():
            self.stream(agent_id).restore(state)

    def take_new(self) -> list[MemoryNode]:
        """The nodes added since the last call (what a tick remembered, for the fact tracker)."""
        new, self._new = self._new, []
        return new

    def _add_node(self, node: MemoryNode) -> MemoryNode:
        self._next_id = max(self._next_id, node.id + 1)
        stream = self.stream(node.agent_id)
        stream.add(node)
        self.nodes[node.id] = node
        self._unembedded.append(node)
        return node

    def rate(self, node: MemoryNode, importance: float) -> None:
        """Set a node's importance (from the LLM); it now counts towards the reflection threshold."""
        value = clamp_importance(importance)
        self.stream(node.agent_id).rate(node, value)
        if node.row >= 0 and self.index is not None:
            self.index.importance[node.row] = value
        self._dirty[node.id] = node

    def touch(self, nodes: Iterable[MemoryNode]) -> None:
        """Retrieved: last accessed now."""
        assert self.now is not None
        hours = self.hours(self.now)
        for node in nodes:
            node.last_accessed = self.now
            if node.row >= 0 and self.index is not None:
                self.index.accessed[node.row] = hours
            self._dirty[node.id] = node

    # ------------------------------------------------------------------ vectors

    def _index_nodes(self, nodes: Sequence[MemoryNode], vectors: np.ndarray) -> None:
        if not nodes:
            return
        vectors = stored_precision(vectors)
        if self.index is None:
            self.index = MemoryIndex(vectors.shape[1])
        rows = self.index.add(
            [n.agent_id for n in nodes], [n.id for n in nodes], vectors,
            [n.rated_importance for n in nodes], [self.hours(n.last_accessed) for n in nodes],
        )
        for node, row in zip(nodes, rows.tolist()):
            node.row = row
            self._row_nodes.append(node)
            if node.kind == MemoryKind.SEED:
                self._seed_rows.append(row)

    def embed_pending(self, queries: Sequence[str] = ()) -> np.ndarray:
        """Embed the nodes not yet in the index, plus ``queries``, in one model call; index the nodes
        (and queue their vectors for run.db); return the query vectors."""
        assert self.embedder is not None
        nodes, self._unembedded = self._unembedded, []
        vectors = self.embedder.embed([n.text for n in nodes] + list(queries))
        self._index_nodes(nodes, vectors[: len(nodes)])
        if self.buffer is not None:
            for node, vector in zip(nodes, vectors[: len(nodes)]):
                if node.text not in self._stored_texts:  # a text's vector is stored once per run
                    self._stored_texts.add(node.text)
                    self.buffer.add("embeddings", {"memory_id": node.id, "vector": vector.astype(np.float16).tobytes()})
        return vectors[len(nodes):]

    # ------------------------------------------------------------------ retrieval

    async def retrieve(self, agent_id: str, query: str, purpose: str, *, k: int | None = None,
                       exclude: Iterable[int] = ()) -> list[MemoryNode]:
        """The agent's top-k memories for ``query``, best first (batched with the phase's other queries)."""
        return (await self.retrieve_many(agent_id, [query], purpose, k=k, exclude=exclude))[0]

    async def retrieve_many(self, agent_id: str, queries: Sequence[str], purpose: str, *, k: int | None = None,
                            exclude: Iterable[int] = ()) -> list[list[MemoryNode]]:
        """One list of memories per query; one step should ask all its queries in one call."""
        request = _Request(agent_id, list(queries), purpose, k or self.settings.top_k, frozenset(exclude))
        return await self._batcher.submit(request, who=agent_id, purpose=purpose)

    async def _send(self, batch: list[_Request]) -> list[list[list[MemoryNode]]]:
        return self.search_now(batch)

    def search_now(self, requests: Sequence[_Request]) -> list[list[list[MemoryNode]]]:
        """Answer requests synchronously: one embedding call, one FAISS call, vectorised scoring."""
        started = time.perf_counter()
        if self.settings.retrieval == "recent":
            return self._newest(requests, started)
        flat = [(r, q) for r in requests for q in r.queries]
        vectors = self.embed_pending([q for _, q in flat])
        if self.index is None or not flat:
            rankings = [None] * len(flat)
        else:
            rankings = self.index.search(
                vectors, [r.agent_id for r, _ in flat], self.hours(self.now), k=max(r.k for r, _ in flat),
                weights=[self.weights_for(r.purpose) for r, _ in flat], decay=self.settings.recency_decay,
                exclude=[r.exclude for r, _ in flat],
            )
        out: list[list[list[MemoryNode]]] = [[] for _ in requests]
        position = {id(r): i for i, r in enumerate(requests)}
        touched: dict[int, MemoryNode] = {}
        for (request, query), ranking in zip(flat, rankings):
            nodes = self._log(request, query, ranking)
            out[position[id(request)]].append(nodes)
            touched.update((n.id, n) for n in nodes)
        self.touch(touched[i] for i in sorted(touched))
        self.stats.queries += len(flat)
        self.stats.batches += 1
        self.stats.seconds += time.perf_counter() - started
        return out

    def weights_for(self, purpose: str) -> Weights:
        """A probe's question is ranked by ``memory.probe_weights``; every other by ``retrieval_weights``."""
        return self.probe_weights if purpose == Purpose.PROBE else self.weights

    def familiarity(self, agent_id: str, query: str, by_sentence: bool = False) -> float:
        """The cosine similarity of ``query`` to the agent's closest memory (-1 with none): how
        familiar a question sounds before anything is recalled (``cognition/probe.py``); ``by_sentence``:
        to the closest sentence, as ``recognised`` reads them."""
        vector = self.embed_pending([query])[0]
        if self.index is None:
            return -1.0
        if not by_sentence:
            return self.index.closest(vector, agent_id)
        rows, _ = self.index.nearest(vector, agent_id, SENTENCE_CANDIDATES * self.settings.top_k)
        best = self._by_sentence([self._row_nodes[r] for r in rows.tolist()], vector)
        return float(best.max()) if len(best) else -1.0

    def backstory_similarity(self, query: str, percentile: float = 90.0, by_sentence: bool = False) -> float:
        """The ``percentile`` of ``query``'s cosine similarity to everyone's seeded memories (what the
        town knew before the day began; 0 with none): how like the question everyday memories are,
        so that recognition can ask a memory to rise above it (``cognition/probe.py``).
        ``by_sentence``: each memory counts by its sentence most like the question, as ``recognised``
        then reads the person's own."""
        vector = self.embed_pending([query])[0]
        if self.index is None or not self._seed_rows:
            return 0.0
        if by_sentence:
            similarity = self._by_sentence([self._row_nodes[r] for r in self._seed_rows], vector)
        else:
            similarity = self.index.similarity(vector, np.array(self._seed_rows, np.int64))
        return float(np.percentile(similarity, percentile))

    def _by_sentence(self, nodes: Sequence[MemoryNode], vector: np.ndarray) -> np.ndarray:
        """Each node's greatest cosine similarity to ``vector`` over its sentences (``memory.sentences``)."""
        assert self.embedder is not None
        pieces = [sentences(n.text) for n in nodes]
        flat = [p for ps in pieces for p in ps]
        sims = self.embedder.embed(flat) @ vector if flat else np.zeros(0)
        bounds = np.cumsum([0, *(len(ps) for ps in pieces)])
        return np.array([sims[a:b].max() for a, b in zip(bounds[:-1], bounds[1:])], np.float32)

    def recognised(self, agent_id: str, query: str, threshold: float, purpose: str,
                   k: int | None = None, by_sentence: bool = False) -> list[MemoryNode]:
        """The agent's memories at least ``threshold`` like ``query`` (cosine), the most like first, at
        most ``k`` (``memory.top_k``): what a question the person recognises brings back, and nothing
        else (``cognition/probe.py``). Recorded (``retrievals``, each with its similarity) and touched
        as a retrieval is. ``by_sentence``: a memory is as like the question as its sentence most like
        it, read among the ``SENTENCE_CANDIDATES`` × k memories most like it whole."""
        vector = self.embed_pending([query])[0]
        request = _Request(agent_id, [query], purpose, k or self.settings.top_k, frozenset())
        nodes: list[MemoryNode] = []
        results: list[dict[str, float | int]] = []
        if self.index is not None and by_sentence:
            rows, _ = self.index.nearest(vector, agent_id, SENTENCE_CANDIDATES * request.k)
            candidates = [self._row_nodes[r] for r in rows.tolist()]
            best = self._by_sentence(candidates, vector)
            ranked = sorted((-float(s), n.id, n) for n, s in zip(candidates, best) if s >= threshold)[:request.k]
            nodes, similarity = [n for _, _, n in ranked], [-s for s, _, _ in ranked]
        elif self.index is not None:
            rows, similarity = self.index.nearest(vector, agent_id, request.k, floor=threshold)
            nodes = [self._row_nodes[r] for r in rows.tolist()]
        if nodes:
            results = [{"memory_id": n.id, "similarity": round(float(s), 4)} for n, s in zip(nodes, similarity)]
        self._record(request, query, nodes, results)
        self.touch(nodes)
        self.stats.queries += 1
        return nodes

    def _newest(self, requests: Sequence[_Request], started: float) -> list[list[list[MemoryNode]]]:
        """``memory.retrieval: recent`` (the "no retrieval" ablation): each query gets its person's k
        newest memories, newest first, whatever it asks; nothing is embedded or scored, and a memory
        shown is not touched (its recency would not matter here)."""
        out: list[list[list[MemoryNode]]] = []
        for request in requests:
            nodes = [n for n in reversed(self.stream(request.agent_id).nodes) if n.id not in request.exclude]
            nodes = nodes[:request.k]
            out.append([nodes for _ in request.queries])
            for query in request.queries:
                self._record(request, query, nodes, [{"memory_id": n.id} for n in nodes])
        self.stats.queries += sum(len(r.queries) for r in requests)
        self.stats.batches += 1
        self.stats.seconds += time.perf_counter() - started
        return out

    def _log(self, request: _Request, query: str, ranking: Ranking | None) -> list[MemoryNode]:
        if ranking is None:
            nodes: list[MemoryNode] = []
            results: list[dict[str, float | int]] = []
        else:
            n = min(request.k, len(ranking.rows))
            nodes = [self._row_nodes[r] for r in ranking.rows[:n].tolist()]
            results = [
                {"memory_id": node.id, "score": round(float(ranking.score[i]), 4),
                 "recency": round(float(ranking.recency[i]), 4), "importance": round(float(ranking.importance[i]), 4),
                 "relevance": round(float(ranking.relevance[i]), 4)}
                for i, node in enumerate(nodes)
            ]
        self._record(request, query, nodes, results)
        return nodes

    def _record(self, request: _Request, query: str, nodes: list[MemoryNode],
                results: list[dict[str, float | int]]) -> None:
        if self.buffer is not None:
            assert self.now is not None
            self.buffer.add("retrievals", {
                "tick": self.tick, "sim_time": _iso(self.now), "agent_id": request.agent_id,
                "purpose": request.purpose, "query": query, "results": json.dumps(results),
            })

    def search(self, agent_id: str, query: str, purpose: str = "search", k: int | None = None) -> list[MemoryNode]:
        """A single retrieval outside the event loop (tools, tests, resume checks)."""
        request = _Request(agent_id, [query], purpose, k or self.settings.top_k, frozenset())
        return self.search_now([request])[0][0]

    # ------------------------------------------------------------------ run.db

    def flush_rows(self) -> None:
        """At the tick's commit: vectors of the tick's last nodes, and changed importance / last access."""
        if self._unembedded:
            self.embed_pending()
        if self.buffer is not None:
            for node_id in sorted(self._dirty):
                node = self._dirty[node_id]
                self.buffer.upsert("memories", {"id": node.id, "importance": node.importance,
                                                "last_accessed": _iso(node.last_accessed)})
        self._dirty.clear()

    @classmethod
    def from_db(cls, db: sqlite_utils.Database, run_id: str, settings: MemorySettings, epoch: datetime,
                embedder: Embedder | None = None) -> TownMemory:
        """Rebuild every stream and the FAISS index from run.db: stored vectors where present,
        the rest re-embedded in one call. Reflection counters are recomputed from the rows."""
        memory = cls(settings, epoch, embedder)
        stored = {r[0]: r[1] for r in db.execute(
            "select memory_id, vector from embeddings where run_id = ?", [run_id]).fetchall()}
        declared = {r[0]: r[1] for r in db.execute(
            "select memory_id, fact_id from fact_memories where run_id = ? and declared = 1", [run_id]).fetchall()}
        lines = {r[0]: r[1] for r in db.execute("select id, text from utterances where run_id = ?", [run_id]).fetchall()}
        nodes = []
        for r in db.query("select * from memories where run_id = ? order by id", [run_id]):
            created = _parse(r["sim_time"])
            node = MemoryNode(
                id=r["id"], agent_id=r["agent_id"], kind=r["kind"], text=r["text"], tick=r["tick"], created=created,
                last_accessed=_parse(r["last_accessed"]) if r.get("last_accessed") else created,
                importance=r["importance"], evidence=tuple(json.loads(r["evidence"])) if r["evidence"] else (),
                depth=r.get("depth") or 0,
                provenance=_provenance(r, declared.get(r["id"]), _quote(r, lines)),
            )
            memory.nodes[node.id] = node
            memory.stream(node.agent_id).add(node)
            memory._next_id = max(memory._next_id, node.id + 1)
            nodes.append(node)
        for stream in memory.streams.values():
            stream.recount()
        dim = memory.embedder.dimension() if stored else 0
        by_text = {n.text: stored_vector(stored[n.id], dim) for n in nodes if n.id in stored}
        missing = list(dict.fromkeys(n.text for n in nodes if n.text not in by_text))
        if missing:  # rows of older runs left out, or lost: embedded again (the same vector, see embeddings.py)
            by_text.update(zip(missing, memory.embedder.embed(missing)))
        if nodes:
            memory._index_nodes(nodes, np.stack([by_text[n.text] for n in nodes]))
        memory._stored_texts = {n.text for n in nodes}
        memory.now = max((n.last_accessed for n in nodes), default=epoch)
        return memory
