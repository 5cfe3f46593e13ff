"""Retrieval scoring as in Generative Agents (Park et al., 2023), vectorised over every query of a phase.

score = w_r * recency + w_i * importance + w_v * relevance, where each component is min-max
normalised over the query's candidates (all the agent's memories):

- recency   = decay ** (game hours since the memory was last accessed), from its timestamp;
  the reference code instead ranks memories in a list ordered the wrong way round, so its
  oldest memories look freshest;
- importance = the 1-10 rating;
- relevance = cosine similarity of the memory's and the query's embeddings.

Inputs are (queries x candidates) matrices with a validity mask (queries have different
numbers of candidates); ties in the score go to the lower memory id, so results never
depend on the order memories happen to sit in the index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

NO_ID = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Weights:
    recency: float = 1.0
    importance: float = 1.0
    relevance: float = 1.0


DEFAULT_WEIGHTS = Weights()


def _columns(weights: Weights | Sequence[Weights], n: int) -> tuple[Any, Any, Any]:
    """(recency, importance, relevance) weights: floats for one ``Weights``, else one row each
    (columns of ``n`` values, so each query of a batch can weigh its candidates its own way)."""
    if isinstance(weights, Weights):
        return weights.recency, weights.importance, weights.relevance
    if len(weights) != n:
        raise ValueError(f"{len(weights)} weights for {n} queries")
    return tuple(np.array([getattr(w, name) for w in weights], np.float64)[:, None]
                 for name in ("recency", "importance", "relevance"))


def minmax(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Each row scaled to 0..1 over its valid entries; 0.5 where they are all equal; 0 where invalid."""
    lo = np.where(valid, values, np.inf).min(axis=1, keepdims=True)
    hi = np.where(valid, values, -np.inf).max(axis=1, keepdims=True)
    span = hi - lo
    ok = np.isfinite(span) & (span > 0)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.where(ok, (values - np.where(ok, lo, 0.0)) / np.where(ok, span, 1.0), 0.5)
    return np.where(valid, scaled, 0.0)


@dataclass
class Scores:
    """Per query (row) and candidate (column): the weighted score and its normalised components."""

    order: np.ndarray
    """The best ``k`` candidate columns of each row, best first (invalid columns last)."""
    score: np.ndarray
    recency: np.ndarray
    importance: np.ndarray
    relevance: np.ndarray
    valid: np.ndarray

    def __post_init__(self) -> None:
        self.n_valid = self.valid.sum(axis=1)

    def top(self, row: int, k: int) -> np.ndarray:
        """The best ``k`` valid candidate columns of a row."""
        return self.order[row, : min(k, int(self.n_valid[row]))]


def top_k(total: np.ndarray, ids: np.ndarray, valid: np.ndarray, k: int) -> np.ndarray:
    """Columns of the ``k`` best scores of each row, ordered by score then lower id. A partial
    sort per row; rows with a tie across the cut are sorted in full, so the cut is exact."""
    n, m = total.shape
    kk = min(k, m)
    if kk <= 0:
        return np.zeros((n, 0), np.int64)
    ids = np.where(valid, ids, NO_ID)
    if kk < m:
        part = np.argpartition(-total, kk - 1, axis=1)[:, :kk]
    else:
        part = np.broadcast_to(np.arange(m), (n, m)).copy()
    chosen = np.take_along_axis(total, part, 1)
    kth = chosen.min(axis=1, keepdims=True)
    at_or_above = (valid & (total >= kth)).sum(axis=1)
    order = np.lexsort((np.take_along_axis(ids, part, 1), -chosen), axis=-1)
    part = np.take_along_axis(part, order, 1)
    for row in np.flatnonzero(at_or_above > kk):  # equal scores straddle the cut: the lower ids win
        part[row] = np.lexsort((ids[row], -total[row]))[:kk]
    return part


def score(
    relevance: np.ndarray,
    importance: np.ndarray,
    hours_since_access: np.ndarray,
    ids: np.ndarray,
    valid: np.ndarray,
    weights: Weights | Sequence[Weights] = DEFAULT_WEIGHTS,
    decay: float = 0.995,
    k: int | None = None,
) -> Scores:
    """Score every candidate of every query and pick each query's top ``k`` (all when None);
    ``weights`` is one for every query or one per query."""
    hours = np.maximum(np.where(valid, hours_since_access, 0.0), 0.0)
    recency = minmax(np.power(decay, hours), valid)
    imp = minmax(np.where(valid, importance, 0.0), valid)
    rel = minmax(np.where(valid, relevance, 0.0), valid)
    w_recency, w_importance, w_relevance = _columns(weights, relevance.shape[0])
    total = w_recency * recency + w_importance * imp + w_relevance * rel
    total = np.where(valid, total, -np.inf)
    order = top_k(total, ids, valid, total.shape[1] if k is None else k)
    return Scores(order, total, recency, imp, rel, valid)
