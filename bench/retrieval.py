"""Retrieval cost: one batched FAISS call plus vectorised numpy scoring, against a per-memory
Python loop (how the Generative Agents reference code scores memories).

    .venv/bin/python bench/retrieval.py                      # 25 x 1,000 and 1,000 x 1,000
    .venv/bin/python bench/retrieval.py --sizes 25x1000 --queries 4

Each agent has ``memories`` memories with random unit vectors (384-d, like all-MiniLM-L6-v2),
importance 1-10 and last-access times over two game days; each agent asks ``queries``
queries. Both sides score every memory of the agent (recency, importance, relevance, each
min-max normalised, weights 1-1-1) and keep the top k; the script checks that they return
the same memories, then prints ms per query and the ratio. Embedding is not timed (it is
the same work on both sides). The loop is generous to the reference: its vectors are numpy
arrays, where the reference keeps Python lists and converts them on every comparison.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulation.memory.index import MemoryIndex
from simulation.memory.scoring import Weights

DIM = 384
DECAY = 0.995
NOW = 48.0


def town(agents: int, memories: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = agents * memories
    vectors = rng.standard_normal((n, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owner = np.repeat(np.arange(agents), memories)
    importance = rng.integers(1, 11, n).astype(np.float64)
    accessed = rng.uniform(0, NOW, n)
    return vectors, owner, importance, accessed


def build_index(vectors, owner, importance, accessed) -> MemoryIndex:
    index = MemoryIndex(DIM)
    index.add([f"a{o}" for o in owner.tolist()], np.arange(len(owner)), vectors, importance, accessed)
    return index


def batched(index: MemoryIndex, queries: np.ndarray, asker: np.ndarray, k: int) -> list[list[int]]:
    rankings = index.search(queries, [f"a{a}" for a in asker.tolist()], NOW, k=k, weights=Weights(), decay=DECAY)
    return [r.ids.tolist() for r in rankings]


def _normalise(values: dict[int, float]) -> dict[int, float]:
    lo, hi = min(values.values()), max(values.values())
    if hi - lo == 0:
        return {key: 0.5 for key in values}
    return {key: (v - lo) / (hi - lo) for key, v in values.items()}


def loop(vectors, owner, importance, accessed, queries, asker, k: int) -> list[list[int]]:
    """One query at a time, one memory at a time, dicts of scores, as the reference code does."""
    by_agent: dict[int, list[int]] = {}
    for i, a in enumerate(owner.tolist()):
        by_agent.setdefault(a, []).append(i)
    out = []
    for q, a in zip(queries, asker.tolist()):
        recency, imp, rel = {}, {}, {}
        for i in by_agent[a]:
            v = vectors[i]
            recency[i] = DECAY ** (NOW - accessed[i])
            imp[i] = importance[i]
            rel[i] = float(np.dot(v, q) / (np.linalg.norm(v) * np.linalg.norm(q)))
        recency, imp, rel = _normalise(recency), _normalise(imp), _normalise(rel)
        total = {i: recency[i] + imp[i] + rel[i] for i in recency}
        out.append(sorted(total, key=lambda i: (-total[i], i))[:k])
    return out


def agree(a: list[list[int]], b: list[list[int]]) -> float:
    """Share of top-k sets that match (float rounding may swap near-ties at the cut)."""
    return sum(set(x) == set(y) for x, y in zip(a, b)) / max(1, len(a))


def run(agents: int, memories: int, queries_per_agent: int, k: int, loop_limit: int,
        repeat: int = 5) -> tuple[float, float]:
    vectors, owner, importance, accessed = town(agents, memories)
    index = build_index(vectors, owner, importance, accessed)
    rng = np.random.default_rng(1)
    asker = np.repeat(np.arange(agents), queries_per_agent)
    queries = rng.standard_normal((len(asker), DIM), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    batched(index, queries[:2], asker[:2], k)  # warm-up
    times = []
    for _ in range(repeat):  # the median of a few phases
        t = time.perf_counter()
        fast = batched(index, queries, asker, k)
        times.append(time.perf_counter() - t)
    fast_ms = float(np.median(times)) * 1000 / len(asker)
    sample = min(len(asker), loop_limit)  # the loop is timed on a sample when it would take minutes
    t = time.perf_counter()
    slow = loop(vectors, owner, importance, accessed, queries[:sample], asker[:sample], k)
    slow_ms = (time.perf_counter() - t) * 1000 / sample
    match = agree(fast[:sample], slow)
    print(f"{agents:>6} agents x {memories:>5} memories  {len(asker):>6} queries (loop timed on {sample})  "
          f"batched {fast_ms:8.3f} ms/query  loop {slow_ms:9.3f} ms/query  ratio {slow_ms / fast_ms:7.1f}x  "
          f"same top-{k}: {match:.0%}")
    return fast_ms, slow_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="25x1000,1000x1000", help="comma-separated AGENTSxMEMORIES")
    ap.add_argument("--queries", type=int, default=1, help="queries per agent in the phase")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--loop-limit", type=int, default=300, help="most queries the Python loop is timed on")
    ap.add_argument("--repeat", type=int, default=5, help="batched phases timed (the median is printed)")
    args = ap.parse_args()
    print(f"retrieval: top-{args.k} of every memory of the asking agent, {args.queries} query/agent; "
          f"one FAISS compute_distance_subset call + numpy scoring vs a per-memory Python loop")
    for size in args.sizes.split(","):
        agents, memories = (int(x) for x in size.lower().split("x"))
        if math.prod((agents, memories, DIM, 4)) > 8e9:
            sys.exit(f"{size}: more than 8 GB of vectors")
        run(agents, memories, args.queries, args.k, args.loop_limit, args.repeat)


if __name__ == "__main__":
    main()
