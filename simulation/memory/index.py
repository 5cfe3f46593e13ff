"""One FAISS index for the whole town, with the per-memory columns retrieval scores on.

Vectors live in a flat inner-product index (exact, deterministic); each row also has a
memory id, an importance and a last-access time in numpy columns, and every agent has
its list of rows. A search takes all the queries of a phase at once: it lays out each
query's candidates (its agent's rows, minus exclusions) as one padded label matrix and
asks FAISS for those inner products in a single ``compute_distance_subset`` call, then
scores the whole matrix with numpy. Every memory of the agent is a candidate, as in the
paper, because an old but important or recent memory can outrank a more similar one.

Where FAISS sees a GPU (the ``faiss-gpu`` build, ``make install-gpu``), the inner products are
computed there instead: every query against every vector in one ``pairwise_distance_gpu`` call,
then each query's candidates picked out (a GPU index has no subset search; a phase's queries
against a 1,000-person town's 16,000 vectors are 64 MB of distances, milliseconds on a GPU).
The same path runs on the CPU with ``faiss.pairwise_distances`` (``AGORA_INDEX_DEVICE=pairwise``),
which is how it is tested without a GPU: the same rankings as the subset path. ``AGORA_INDEX_DEVICE``
= ``cpu`` keeps the subset path on a GPU machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import os

import faiss
import numpy as np

from simulation.errors import RunError
from simulation.memory.scoring import DEFAULT_WEIGHTS, Scores, Weights, score


@dataclass
class Ranking:
    """The top memories for one query, best first, with their score components."""

    rows: np.ndarray
    ids: np.ndarray
    score: np.ndarray
    recency: np.ndarray
    importance: np.ndarray
    relevance: np.ndarray


def _empty_ranking() -> Ranking:
    empty = np.zeros(0)
    return Ranking(np.zeros(0, np.int64), np.zeros(0, np.int64), empty, empty, empty, empty)


DEVICES = ("auto", "cpu", "gpu", "pairwise")


def index_device() -> str:
    """Where the inner products are computed: ``AGORA_INDEX_DEVICE`` (auto, cpu, gpu, pairwise),
    auto meaning the GPU when FAISS has one, else the CPU's subset search."""
    chosen = os.environ.get("AGORA_INDEX_DEVICE", "auto").strip().lower() or "auto"
    if chosen not in DEVICES:
        raise RunError(f"AGORA_INDEX_DEVICE={chosen!r}: expected one of {', '.join(DEVICES)}")
    if chosen == "auto":
        return "gpu" if faiss.get_num_gpus() > 0 else "cpu"
    if chosen == "gpu" and not (hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0):
        raise RunError("AGORA_INDEX_DEVICE=gpu needs FAISS's GPU build and a GPU (make install-gpu)")
    return chosen


class MemoryIndex:
    def __init__(self, dim: int, device: str | None = None):
        self.dim = dim
        self.device = device or index_device()
        self._gpu: object | None = faiss.StandardGpuResources() if self.device == "gpu" else None
        self.index = faiss.IndexFlatIP(dim)
        self.ids = np.zeros(0, np.int64)
        self.importance = np.zeros(0, np.float64)
        self.accessed = np.zeros(0, np.float64)
        """Game hours (since the run's epoch) of each row's last access."""
        self._rows: dict[str, tuple[np.ndarray, int]] = {}
        """Per agent: its rows (a growing buffer) and how many are used."""
        self.search_calls = 0

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def _grow(self, n: int) -> None:
        need = len(self) + n
        if need > len(self.ids):
            cap = max(need, 2 * len(self.ids), 1024)
            for name in ("ids", "importance", "accessed"):
                old = getattr(self, name)
                new = np.zeros(cap, old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)

    def add(self, agents: Sequence[str], ids: Sequence[int], vectors: np.ndarray,
            importance: Sequence[float], accessed: Sequence[float]) -> np.ndarray:
        """Append memories; returns their rows."""
        n = len(ids)
        if n == 0:
            return np.zeros(0, np.int64)
        self._grow(n)
        start = len(self)
        rows = np.arange(start, start + n, dtype=np.int64)
        self.ids[rows] = ids
        self.importance[rows] = importance
        self.accessed[rows] = accessed
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        owners = np.asarray(agents, dtype=object)
        for agent in dict.fromkeys(agents):
            new = rows[owners == agent]
            buf, used = self._rows.get(agent, (np.zeros(0, np.int64), 0))
            if used + len(new) > len(buf):
                grown = np.zeros(max(2 * len(buf), used + len(new), 64), np.int64)
                grown[:used] = buf[:used]
                buf = grown
            buf[used:used + len(new)] = new
            self._rows[agent] = (buf, used + len(new))
        return rows

    def rows_of(self, agent: str) -> np.ndarray:
        buf, used = self._rows.get(agent, (np.zeros(0, np.int64), 0))
        return buf[:used]

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        return self.index.reconstruct_batch(np.asarray(rows, dtype=np.int64))

    def search(
        self,
        queries: np.ndarray,
        agents: Sequence[str],
        now_hours: float,
        *,
        k: int,
        weights: Weights | Sequence[Weights] = DEFAULT_WEIGHTS,
        decay: float = 0.995,
        exclude: Sequence[frozenset[int]] | None = None,
    ) -> list[Ranking]:
        """The top ``k`` of each agent's memories for each query (row i of ``queries`` is ``agents[i]``'s);
        ``weights``: one for all queries or one per query."""
        n = len(agents)
        cands = []
        for i, agent in enumerate(agents):
            rows = self.rows_of(agent)
            if exclude is not None and exclude[i] and len(rows):
                rows = rows[~np.isin(self.ids[rows], np.fromiter(exclude[i], np.int64))]
            cands.append(rows)
        m = max((len(c) for c in cands), default=0)
        if n == 0 or m == 0:
            return [_empty_ranking() for _ in range(n)]
        labels = np.full((n, m), -1, dtype=np.int64)
        for i, rows in enumerate(cands):
            labels[i, : len(rows)] = rows
        q = np.ascontiguousarray(queries, dtype=np.float32)
        dist = self._distances(q, labels)
        self.search_calls += 1
        valid = labels >= 0
        safe = np.where(valid, labels, 0)
        s = score(dist.astype(np.float64), self.importance[safe], now_hours - self.accessed[safe],
                  self.ids[safe], valid, weights, decay, k=k)
        return [self._ranking(s, labels, i, k) for i in range(n)]

    def closest(self, query: np.ndarray, agent: str) -> float:
        """The highest inner product of ``query`` with any of ``agent``'s vectors (-1 when they have none)."""
        _, similarity = self.nearest(query, agent, 1)
        return float(similarity[0]) if len(similarity) else -1.0

    def nearest(self, query: np.ndarray, agent: str, k: int, floor: float = -np.inf) -> tuple[np.ndarray, np.ndarray]:
        """(rows, inner products) of ``agent``'s ``k`` vectors most like ``query`` with at least ``floor``,
        best first; ties go to the older memory (the lower id), as in ``scoring``."""
        rows = self.rows_of(agent)
        if not len(rows) or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        similarity = self._distances(q, rows.reshape(1, -1))[0]
        order = np.lexsort((self.ids[rows], -similarity))
        order = order[similarity[order] >= floor][:k]
        return rows[order], similarity[order]

    def similarity(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Inner products of ``query`` with the vectors at ``rows``."""
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        return self._distances(q, np.asarray(rows, np.int64).reshape(1, -1))[0]

    def _distances(self, q: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Inner products of query i with the vectors in row i of ``labels`` (-1: padding)."""
        n, m = labels.shape
        if self.device == "cpu":
            dist = np.empty((n, m), dtype=np.float32)
            self.index.compute_distance_subset(n, faiss.swig_ptr(q), m, faiss.swig_ptr(dist),
                                               faiss.swig_ptr(labels))
            return dist
        xb = faiss.rev_swig_ptr(self.index.get_xb(), len(self) * self.dim).reshape(len(self), self.dim)
        if self.device == "gpu":
            full = faiss.pairwise_distance_gpu(self._gpu, q, xb, metric=faiss.METRIC_INNER_PRODUCT)
        else:
            full = faiss.pairwise_distances(q, xb, metric=faiss.METRIC_INNER_PRODUCT)
        return np.take_along_axis(np.asarray(full, dtype=np.float32), np.where(labels >= 0, labels, 0), axis=1)

    def _ranking(self, s: Scores, labels: np.ndarray, i: int, k: int) -> Ranking:
        cols = s.top(i, k)
        rows = labels[i, cols]
        return Ranking(rows, self.ids[rows], s.score[i, cols], s.recency[i, cols],
                       s.importance[i, cols], s.relevance[i, cols])
