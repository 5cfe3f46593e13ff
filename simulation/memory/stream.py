"""The memory stream of one agent: an append-only list of timestamped nodes.

Retrieval here is recency plus word overlap with a query, which is enough for prompts to
mention what an agent just saw and what it knows about the person in front of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

_WORD = re.compile(r"[a-z']+")
_STOP = frozenset(
    "a an and the of to in on at is are was were be for with you your it this that do does "
    "did what who where when how i me my we our he she they them his her their or as by from".split()
)

def words(text: str) -> set[str]:
    return {w.strip("'") for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


@dataclass
class MemoryNode:
    id: int
    kind: str
    text: str
    tick: int
    time: datetime
    words: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if not self.words:
            self.words = words(self.text)


@dataclass
class MemoryStream:
    nodes: list[MemoryNode] = field(default_factory=list)

    def add(self, node: MemoryNode) -> MemoryNode:
        self.nodes.append(node)
        return node

    def recent(self, n: int, kinds: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> list[MemoryNode]:
        """The ``n`` newest nodes (oldest first), optionally of some kinds only."""
        out: list[MemoryNode] = []
        for node in reversed(self.nodes):
            if (kinds is None or node.kind in kinds) and node.kind not in exclude:
                out.append(node)
                if len(out) == n:
                    break
        return out[::-1]

    def relevant(self, query: str, n: int, skip: set[int] | None = None) -> list[MemoryNode]:
        """Up to ``n`` nodes sharing words with ``query``; more shared words, then newer, first."""
        q = words(query)
        skip = skip or set()
        scored = [
            (len(q & node.words), i, node)
            for i, node in enumerate(self.nodes)
            if node.id not in skip and q & node.words
        ]
        scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
        return sorted((node for _, _, node in scored[:n]), key=lambda node: node.id)
